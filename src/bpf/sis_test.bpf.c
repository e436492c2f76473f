/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host test object: the scheduler's wake-up path (sis.bpf.h, from
 * select_task_rq_fair down) on a synthetic topology and state, driven
 * through BPF_PROG_TEST_RUN by the Rust tests. The per-LLC and per-CPU state
 * (llc_ctxs, cpu_ctxs) and the runqueue lengths are this object's .bss,
 * written by the test; the idle mask, the tasks and the clocks come in the
 * argument. It has no struct_ops and calls no sched_ext kfunc, so it loads
 * on any kernel that allows bpf() - the verifier is the real one.
 */
#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

/* filled by the test through the skeleton's bss */
struct sis_topo topo;
struct llc_ctx llc_ctxs[MAX_LLCS];
struct cpu_ctx cpu_ctxs[MAX_CPUS];
u32 nr_running[MAX_CPUS];
u64 imbalance_pct = DEFAULT_IMBALANCE_PCT;

static u64 test_idle[MAX_CPUS / 64];
static u64 test_jiffies, test_clock, test_clock_step, test_clock_reads;
static u32 test_hz;
#include "sis_ctx.bpf.h"

static struct sis_ctx test_ctx;
static struct sis_wake_state test_waker, test_wakee;

static __always_inline bool sis_idle(struct sis_ctx *c, s32 cpu)
{
	return mask_test(test_idle, cpu);
}

static __always_inline bool sis_claim(struct sis_ctx *c, s32 cpu)
{
	if (!mask_test(test_idle, cpu))
		return false;
	test_idle[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)] &= ~(1ULL << ((u32)cpu % 64));
	return true;
}

static __always_inline u32 sis_nr_running(struct sis_ctx *c, s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return 0;
	return nr_running[cpu & (MAX_CPUS - 1)];
}

static __always_inline u64 sis_jiffies(struct sis_ctx *c)
{
	return test_jiffies;
}

/* the first read gives clock, each later one clock_step more */
static __always_inline u64 sis_clock(struct sis_ctx *c)
{
	return test_clock + test_clock_step * test_clock_reads++;
}

static __always_inline u32 sis_hz(void)
{
	return test_hz;
}

/* the idle mask's words, for the depth calibration */
static __always_inline void calib_idle_words(struct sis_ctx *c, u64 *dst, u32 nr)
{
	__builtin_memcpy(dst, test_idle, sizeof(test_idle));
}

#include "calib.bpf.h"
#include "sis.bpf.h"

SEC("syscall")
int sis_test(struct sis_test_args *a)
{
	struct sis_ctx *c = &test_ctx;

	/*
	 * The context may only be read at constant offsets ("dereference of
	 * modified ctx ptr"): whole-array copies, which clang emits as
	 * fixed-offset loads, instead of an indexed loop.
	 */
	__builtin_memcpy(test_idle, a->idle, sizeof(test_idle));
	__builtin_memcpy(c->allowed, a->allowed, sizeof(c->allowed));
	__builtin_memset(c->cnt, 0, sizeof(c->cnt));
	c->feat = a->features;
	c->this_cpu = a->this_cpu;
	c->prev = a->prev;
	c->claimed = -1;
	c->depth_src = DEPTH_NONE;
	c->calib_target = -1;
	c->wakee_id = a->wakee_id;
	c->pcpu_kthread = a->pcpu_kthread;
	c->waker_load = a->waker_load;
	c->wakee_load = a->wakee_load;
	imbalance_pct = a->imbalance_pct;
	test_jiffies = a->jiffies;
	test_clock = a->clock;
	test_clock_step = a->clock_step;
	test_clock_reads = 0;
	test_hz = a->hz;

	test_waker.last_wakee = a->waker_last_wakee;
	test_waker.wakee_flips = a->waker_flips;
	test_waker.wakee_flip_decay_ts = a->waker_decay_ts;
	test_wakee.recent_used_cpu = a->recent;
	test_wakee.wakee_flips = a->wakee_flips;

	a->cpu = select_task_rq_fair(c, &test_waker, &test_wakee, a->prev, a->sync);
	a->recent_out = test_wakee.recent_used_cpu;
	a->waker_last_wakee_out = test_waker.last_wakee;
	a->waker_flips_out = test_waker.wakee_flips;
	a->waker_decay_ts_out = test_waker.wakee_flip_decay_ts;
	__builtin_memcpy(a->cnt, c->cnt, sizeof(a->cnt));
	return 0;
}

/*
 * The depth calibration's record of the wake-up sis_test just ran, as the
 * scheduler makes it in ops.runnable: a program of its own, as there (calling
 * it at the end of sis_test made that program too complex to verify).
 */
SEC("syscall")
int calib_test_flush(void *a)
{
	calib_flush(&test_ctx, test_ctx.wakee_id);
	return 0;
}
