/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * `scx_sisutil shadow`'s replay: each wake-up the kernel decided (shadow.bpf.c)
 * through the scheduler's own select_task_rq_fair() (sis.bpf.h) on the
 * synthetic machine (synth.bpf.h), the machine set from the snapshot. One
 * BPF_PROG_TEST_RUN of `replay_batch` replays a batch of jobs that
 * src/tools/shadow.rs writes into replay_jobs[] (the .bss, mmapped: no copy)
 * and reads back from it: per job the machine (replay_machine()), then the
 * production select_task_rq_fair() unchanged, or, for a job with a forced
 * target (force >= -1), the same step functions one by one, with the target
 * optionally forced, so that a disagreement can be put on the first step where
 * the two paths part (src/tools/shadow.rs). No struct_ops, no sched_ext kfunc:
 * it loads on any kernel that allows bpf().
 */
#include "tool_intf.h"
#include "sis_ctx.bpf.h"
#include "synth.bpf.h"
#include "sis.bpf.h"

char _license[] SEC("license") = "GPL";

static struct sis_ctx replay_ctx;
/* global: clang splits a static one into pieces the kernel's BTF check refuses ("Invalid
 * size"), and without the object's BTF replay_job_run() could not be verified as global */
struct sis_wake_state replay_waker, replay_wakee;
/* one job's counters, summed from sis_stats' rows (replay_out()) */
u64 replay_cnt[STAT_NR];

/* jobs per replay_batch run (src/tools/shadow.rs reads it as replay_jobs' length) */
#define REPLAY_BATCH	4096

/*
 * One replay: the wake-up (sis_test_args, as the host test's context, with its outputs) and
 * the machine around it. Every CPU and LLC not named here is idle and empty; the LLCs' depth
 * is the loader's rule on the kernel's nr_idle_scan, applied by src/tools/shadow.rs.
 */
struct replay_job {
	struct sis_test_args a;
	u32 this_nr_running;	/* nr_running[this_cpu] */
	u32 this_nr_delayed;	/* nr_delayed[this_cpu] */
	u64 this_util;		/* cpu_ctxs[this_cpu].util: cpu_load(this_rq) */
	u64 prev_util;		/* cpu_ctxs[prev].util (prev's wins where they are one CPU) */
	/* SIS_PROP's state of this_cpu (vanilla's counterfactual) */
	u64 avg_idle;
	u64 wake_avg_idle;
	u64 wake_stamp;
	u64 avg_scan_cost;
	u64 max_idle_balance_cost;
	/* sd_llc_shared of [0] this_cpu's LLC, [1] prev's (this_cpu's wins where they are one) */
	u64 llc_nr_idle_scan[2];
	u64 llc_has_idle_cores[2];
	s32 force;		/* < -1: select_task_rq_fair(); -1: the steps; >= 0: the steps on that target */
	u32 want_affine;	/* out (the steps) */
	s32 new_cpu;		/* out (the steps): wake_affine()'s CPU */
	u32 __pad;
};

struct replay_job replay_jobs[REPLAY_BATCH];
u32 replay_nr_jobs;
u32 replay_done;	/* out: jobs run */
/* the CPUs the previous job set (put back to zero before the next); global, as above */
s32 replay_dirty[2];

/* the previous job's machine back to zero, then @j's */
static __always_inline void replay_machine(struct replay_job *j)
{
	u32 i, nr_llcs = topo.nr_llcs;
	s32 cpu, llc;

	for (i = 0; i < 2; i++) {
		struct cpu_ctx *cc;

		cpu = replay_dirty[i] & (MAX_CPUS - 1);
		nr_running[cpu] = 0;
		nr_delayed[cpu] = 0;
		cc = &cpu_ctxs[cpu];
		cc->util = 0;
		cc->avg_idle = 0;
		cc->wake_avg_idle = 0;
		cc->wake_stamp = 0;
		cc->avg_scan_cost = 0;
		cc->max_idle_balance_cost = 0;
	}
	for (i = 0; i < MAX_LLCS && i < nr_llcs; i++) {
		llc_ctxs[i].has_idle_cores = 0;
		llc_ctxs[i].nr_idle_scan = 0;
	}
	cpu = j->a.this_cpu & (MAX_CPUS - 1);
	nr_running[cpu] = j->this_nr_running;
	nr_delayed[cpu] = j->this_nr_delayed;
	cpu_ctxs[cpu].util = j->this_util;
	cpu_ctxs[j->a.prev & (MAX_CPUS - 1)].util = j->prev_util;
	cpu_ctxs[cpu].avg_idle = j->avg_idle;
	cpu_ctxs[cpu].wake_avg_idle = j->wake_avg_idle;
	cpu_ctxs[cpu].wake_stamp = j->wake_stamp;
	cpu_ctxs[cpu].avg_scan_cost = j->avg_scan_cost;
	cpu_ctxs[cpu].max_idle_balance_cost = j->max_idle_balance_cost;
	replay_dirty[0] = cpu;
	replay_dirty[1] = j->a.prev & (MAX_CPUS - 1);
	/* prev's LLC, then this_cpu's */
	llc = sis_cpu_llc(j->a.prev);
	if (llc >= 0 && llc < MAX_LLCS) {
		llc_ctxs[llc].has_idle_cores = j->llc_has_idle_cores[1];
		llc_ctxs[llc].nr_idle_scan = j->llc_nr_idle_scan[1];
	}
	llc = sis_cpu_llc(j->a.this_cpu);
	if (llc >= 0 && llc < MAX_LLCS) {
		llc_ctxs[llc].has_idle_cores = j->llc_has_idle_cores[0];
		llc_ctxs[llc].nr_idle_scan = j->llc_nr_idle_scan[0];
	}
}

static __always_inline void replay_out(struct sis_test_args *a, struct sis_ctx *c, s32 cpu)
{
	a->cpu = cpu;
	a->recent_out = replay_wakee.recent_used_cpu;
	a->waker_last_wakee_out = replay_waker.last_wakee;
	a->waker_flips_out = replay_waker.wakee_flips;
	a->waker_decay_ts_out = replay_waker.wakee_flip_decay_ts;
	/*
	 * the wake-up's counters, counted in place as the scheduler counts them:
	 * every row's sum (synth_wake_setup() cleared them); summed in .bss, then
	 * copied whole into the job
	 */
	__builtin_memset(replay_cnt, 0, sizeof(replay_cnt));
	synth_stats_take(-1, replay_cnt, replay_cnt);
	__builtin_memcpy(a->cnt, replay_cnt, sizeof(a->cnt));
}

/* the production entry point, unchanged */
static __always_inline void replay(struct sis_test_args *a)
{
	struct sis_ctx *c = &replay_ctx;

	synth_wake_setup(a, c, &replay_waker, &replay_wakee);
	replay_out(a, c, select_task_rq_fair(c, &replay_waker, &replay_wakee, a->prev, a->sync));
}

/*
 * select_task_rq_fair()'s steps, as there, each result kept: record_wakee,
 * want_affine, wake_affine, then select_idle_sibling() on @force_target when
 * it is set (the other target) or on wake_affine's.
 */
static __always_inline void replay_steps(struct replay_job *j, s32 force_target)
{
	struct sis_test_args *a = &j->a;
	struct sis_ctx *c = &replay_ctx;
	s32 this_cpu, prev = a->prev, new_cpu = prev, target, cpu;
	const struct cpumask *idle_mask;
	bool want_affine;

	synth_wake_setup(a, c, &replay_waker, &replay_wakee);
	this_cpu = c->this_cpu;
	if (sis_cpu_llc(this_cpu) < 0 || sis_cpu_llc(prev) < 0) {
		replay_out(a, c, prev);
		return;
	}
	idle_mask = sis_idle_get(c);
	record_wakee(c, &replay_waker);
	want_affine = !wake_wide(c, &replay_waker, &replay_wakee) && sis_allowed(c, this_cpu);
	if (want_affine && this_cpu != prev)
		new_cpu = wake_affine(c, idle_mask, this_cpu, prev, a->sync);
	j->want_affine = want_affine;
	j->new_cpu = new_cpu;
	target = force_target >= 0 ? force_target : new_cpu;
	cpu = select_idle_sibling(c, idle_mask, prev, target, &replay_wakee.recent_used_cpu);
	sis_idle_put(c, idle_mask);
	replay_out(a, c, cpu);
}

/*
 * One job. Global (not static): the verifier checks it once, for any @i, not once per
 * iteration of replay_batch's loop.
 */
__noinline int replay_job_run(u32 i)
{
	struct replay_job *j;
	s32 force;

	if (i >= REPLAY_BATCH)
		return 0;
	j = &replay_jobs[i];
	replay_machine(j);
	force = j->force;
	if (force < -1)
		replay(&j->a);
	else
		replay_steps(j, force);
	return 0;
}

/* replay_jobs[0 .. replay_nr_jobs), in order; replay_done: how many ran */
SEC("syscall")
int replay_batch(void *ctx)
{
	u32 i, n = replay_nr_jobs;

	replay_done = 0;
	bpf_for(i, 0, n) {
		if (i >= REPLAY_BATCH)
			break;
		replay_job_run(i);
		replay_done = i + 1;
	}
	return 0;
}
