/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Placement cost on the host's CPU: the scheduler's wake-up path - the
 * production select_task_rq_fair() of sis.bpf.h, and, when it places the
 * task on no idle CPU, the enqueue's kick search of kick.bpf.h - run many
 * times in one BPF_PROG_TEST_RUN (bpf_loop inside the program), timed with
 * bpf_ktime_get_ns(), on one synthetic LLC whose idle mask, utilization and
 * SIS_PROP averages the caller sets through .bss (src/cost.rs).
 *
 * Each placement draws a waker CPU (a busy one, when any is busy), prev and
 * recent_used_cpu from the LLC, runs the path, then restores the state it
 * changed (the claimed CPU's idle bit, has_idle_cores, this CPU's
 * wake_avg_idle) so every placement sees the same load. The same loop with
 * cost_cfg.harness_only set does the draws and restores alone: the harness's
 * share of the time. No struct_ops, no sched_ext kfunc: loads on any kernel
 * that allows bpf().
 */
#include "synth.bpf.h"
#include "sis.bpf.h"
#include "kick.bpf.h"

char _license[] SEC("license") = "GPL";

/* filled by the caller through the skeleton's bss (the machine: synth.bpf.h) */
/* the CPUs a waker may run on (the busy ones, or all when none is busy) */
u16 wakers[MAX_CPUS];

struct cost_cfg {
	u64 features;
	u32 llc;		/* the LLC placed on (index) */
	u32 nr_wakers;
	u32 nr_placements;
	u32 seed;
	u32 has_idle_cores;	/* restored before each placement */
	u32 harness_only;	/* the loop without the placement: its overhead */
};

struct cost_out {
	u64 ns;			/* bpf_ktime_get_ns() around the whole loop */
	u64 placements;
	u64 direct;		/* placed on a claimed idle CPU (no enqueue) */
	u64 enqueued;		/* queued: the enqueue's kick search ran */
	u64 kicked;		/* ... and found a CPU to kick */
	u64 cnt[STAT_NR];
};

struct cost_cfg cost_cfg;
struct cost_out cost_out;

/*
 * The scheduler's feature word, declared as ctx.bpf.h declares it: the
 * loader's per-interval work is measured against this map (`placement-cost
 * --loader`), read through its mmap as the loader reads the scheduler's.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} sis_features SEC(".maps");

/* the wake-up's context and the two tasks' bookkeeping */
static struct sis_ctx cost_ctx;
struct sis_wake_state cost_waker, cost_wakee;	/* global: clang would split a static one (no BTF) */

/* the kick search's primitives (kick.bpf.h) over the synthetic idle mask */
struct kick_env {
	u32 unused;
};

static __always_inline bool kick_candidate(struct kick_env *e, s32 cpu)
{
	return mask_test(synth_idle, cpu) && mask_test(cost_ctx.allowed, cpu);
}

static __always_inline u64 kick_idle_word(struct kick_env *e, u32 w)
{
	return synth_idle[w & (MAX_CPUS / 64 - 1)];
}

static __always_inline u64 kick_allowed_word(struct kick_env *e, u32 w)
{
	return cost_ctx.allowed[w & (MAX_CPUS / 64 - 1)];
}

static __always_inline u32 xorshift(u32 *s)
{
	u32 x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

/* @v & @mask where the verifier sees it (clang drops a mask it can prove redundant) */
static __always_inline u32 masked(u32 v, u32 mask)
{
	barrier_var(v);
	return v & mask;
}

struct loop_state {
	u32 rng;
	u32 llc;
	u32 start;
	u32 nr;
	u64 jiffies;
};

static long place_one(u64 i, void *data)
{
	struct loop_state *st = data;
	struct sis_ctx *c = &cost_ctx;
	struct llc_ctx *lc = &llc_ctxs[masked(st->llc, MAX_LLCS - 1)];
	struct cpu_ctx *tc;
	struct kick_env e = {};
	u32 nw = cost_cfg.nr_wakers, probed = 0, r;
	s32 this_cpu, prev, recent, cpu;

	if (!st->nr || !nw || nw > MAX_CPUS)
		return 1;
	r = xorshift(&st->rng);
	this_cpu = wakers[masked(r % nw, MAX_CPUS - 1)];
	r = xorshift(&st->rng);
	prev = topo.llc_cpus[masked(st->start + r % st->nr, MAX_CPUS - 1)];
	r = xorshift(&st->rng);
	recent = topo.llc_cpus[masked(st->start + r % st->nr, MAX_CPUS - 1)];

	/* the state this placement sees: what the previous one changed, put back */
	lc->has_idle_cores = cost_cfg.has_idle_cores;
	tc = &cpu_ctxs[masked(this_cpu, MAX_CPUS - 1)];
	tc->wake_avg_idle = tc->avg_idle / 2;
	tc->wake_stamp = st->jiffies;
	c->this_cpu = this_cpu;
	c->prev = prev;
	c->claimed = -1;
	c->wakee_id = i;
	cost_waker.last_wakee = -1;
	cost_waker.wakee_flips = 0;
	cost_waker.wakee_flip_decay_ts = st->jiffies;
	cost_wakee.recent_used_cpu = recent;
	cost_wakee.wakee_flips = 0;
	if (cost_cfg.harness_only) {
		barrier_var(prev);
		return 0;
	}

	cpu = select_task_rq_fair(c, &cost_waker, &cost_wakee, prev, false);
	if (c->claimed >= 0 && c->claimed == cpu) {
		/* select_cpu's direct insert: no enqueue */
		cost_out.direct++;
	} else {
		/* ops.enqueue: queued on the LLC, look for an idle CPU to kick */
		cost_out.enqueued++;
		if (kick_search(&e, sis_cpu_llc(cpu), this_cpu, c->feat, &probed) >= 0)
			cost_out.kicked++;
		c->cnt[STAT_KICK_SCANNED] += probed;
	}
	if (c->claimed >= 0)
		mask_set(synth_idle, c->claimed);
	return 0;
}

SEC("syscall")
int placement_cost(void *ctx)
{
	struct sis_ctx *c = &cost_ctx;
	struct loop_state st = {};
	u32 llc = cost_cfg.llc;
	u64 t0, t1;
	u32 i;

	if (llc >= MAX_LLCS || cost_cfg.nr_placements > (1 << 23))
		return 1;
	st.rng = cost_cfg.seed | 1;
	st.llc = llc;
	st.start = topo.llc_start[llc & (MAX_LLCS - 1)];
	st.nr = topo.llc_nr[llc & (MAX_LLCS - 1)];
	st.jiffies = bpf_jiffies64();
	/* the host's jiffies (SIS_PROP ages wake_avg_idle by them) */
	synth_real_time = 1;

	kick_llc_words_init();
	__builtin_memset(c->cnt, 0, sizeof(c->cnt));
	bpf_for(i, 0, MAX_CPUS / 64)
		c->allowed[i & (MAX_CPUS / 64 - 1)] = ~0ULL;
	c->feat = cost_cfg.features;
	c->pcpu_kthread = 0;
	c->waker_load = 512;
	c->wakee_load = 256;
	cost_out.direct = 0;
	cost_out.enqueued = 0;
	cost_out.kicked = 0;

	t0 = bpf_ktime_get_ns();
	bpf_loop(cost_cfg.nr_placements, place_one, &st, 0);
	t1 = bpf_ktime_get_ns();

	cost_out.ns = t1 - t0;
	cost_out.placements = cost_cfg.nr_placements;
	__builtin_memcpy(cost_out.cnt, c->cnt, sizeof(cost_out.cnt));
	return 0;
}
