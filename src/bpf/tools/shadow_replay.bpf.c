/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * `scx_sisutil shadow`'s replay: each wake-up the kernel decided (shadow.bpf.c)
 * through the scheduler's own select_task_rq_fair() (sis.bpf.h) on the
 * synthetic machine (synth.bpf.h), the machine set by src/tools/shadow.rs from the
 * snapshot. `replay` is the production entry point, unchanged; `replay_steps`
 * runs the same step functions one by one, with the target optionally forced,
 * so that a disagreement can be put on the first step where the two paths part
 * (src/tools/shadow.rs). No struct_ops, no sched_ext kfunc: it loads on any kernel
 * that allows bpf().
 */
#include "sis_ctx.bpf.h"
#include "synth.bpf.h"
#include "sis.bpf.h"

char _license[] SEC("license") = "GPL";

static struct sis_ctx replay_ctx;
static struct sis_wake_state replay_waker, replay_wakee;
u64 replay_cnt[STAT_NR];

/* replay_steps: in, the target select_idle_sibling() gets (-1: wake_affine's); out */
s32 force_target = -1;
u32 out_want_affine;
s32 out_new_cpu;

static __always_inline struct sis_ctx *replay_setup(struct sis_test_args *a)
{
	struct sis_ctx *c = &replay_ctx;

	synth_wake_setup(a, c, &replay_waker, &replay_wakee);
	return c;
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
	 * copied whole (the context is written at constant offsets only)
	 */
	__builtin_memset(replay_cnt, 0, sizeof(replay_cnt));
	synth_stats_take(-1, replay_cnt, replay_cnt);
	__builtin_memcpy(a->cnt, replay_cnt, sizeof(a->cnt));
}

SEC("syscall")
int replay(struct sis_test_args *a)
{
	struct sis_ctx *c = replay_setup(a);

	replay_out(a, c, select_task_rq_fair(c, &replay_waker, &replay_wakee, a->prev, a->sync));
	return 0;
}

/*
 * select_task_rq_fair()'s steps, as there, each result kept: record_wakee,
 * want_affine, wake_affine, then select_idle_sibling() on force_target when
 * it is set (the other target) or on wake_affine's.
 */
SEC("syscall")
int replay_steps(struct sis_test_args *a)
{
	struct sis_ctx *c = replay_setup(a);
	s32 this_cpu = c->this_cpu, prev = a->prev, new_cpu = prev, target, cpu;
	const struct cpumask *idle_mask;
	bool want_affine;

	if (sis_cpu_llc(this_cpu) < 0 || sis_cpu_llc(prev) < 0) {
		replay_out(a, c, prev);
		return 0;
	}
	idle_mask = sis_idle_get(c);
	record_wakee(c, &replay_waker);
	want_affine = !wake_wide(c, &replay_waker, &replay_wakee) && sis_allowed(c, this_cpu);
	if (want_affine && this_cpu != prev)
		new_cpu = wake_affine(c, idle_mask, this_cpu, prev, a->sync);
	out_want_affine = want_affine;
	out_new_cpu = new_cpu;
	target = force_target >= 0 ? force_target : new_cpu;
	cpu = select_idle_sibling(c, idle_mask, prev, target, &replay_wakee.recent_used_cpu);
	sis_idle_put(c, idle_mask);
	replay_out(a, c, cpu);
	return 0;
}
