/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host test object: the scheduler's wake-up path (sis.bpf.h, from
 * select_task_rq_fair down) on a synthetic topology and state, driven
 * through BPF_PROG_TEST_RUN by the Rust tests. The per-LLC and per-CPU state
 * (llc_ctxs, cpu_ctxs) and the runqueue lengths are this object's .bss
 * (synth.bpf.h), written by the test; the idle mask, the tasks and the clocks come in the
 * argument. It has no struct_ops and calls no sched_ext kfunc, so it loads
 * on any kernel that allows bpf() - the verifier is the real one.
 */
#include "synth.bpf.h"
#include "sis.bpf.h"
#include "idle.bpf.h"

char _license[] SEC("license") = "GPL";

static struct sis_ctx test_ctx;
static struct sis_wake_state test_waker, test_wakee;

SEC("syscall")
int sis_test(struct sis_test_args *a)
{
	struct sis_ctx *c = &test_ctx;

	/*
	 * The context may only be read at constant offsets ("dereference of
	 * modified ctx ptr"): whole-array copies, which clang emits as
	 * fixed-offset loads, instead of an indexed loop.
	 */
	__builtin_memcpy(synth_idle, a->idle, sizeof(synth_idle));
	__builtin_memcpy(c->allowed, a->allowed, sizeof(c->allowed));
	__builtin_memset(c->cnt, 0, sizeof(c->cnt));
	c->feat = a->features;
	c->this_cpu = a->this_cpu;
	c->prev = a->prev;
	c->claimed = -1;
	c->calib_target = -1;
	c->wakee_id = a->wakee_id;
	c->pcpu_kthread = a->pcpu_kthread;
	c->waker_load = a->waker_load;
	c->wakee_load = a->wakee_load;
	imbalance_pct = a->imbalance_pct;
	synth_jiffies = a->jiffies;
	synth_hz = a->hz;

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

/*
 * The idle-time accounting (idle.bpf.h) on cpu_ctxs[idle_test_cpu], as the
 * scheduler runs it: idle_test_op 0 is ops.update_idle(cpu, true) at
 * idle_test_now, 1 a wake-up's claim or the CPU's exit at idle_test_now (the
 * period's length in idle_test_ret).
 */
u32 idle_test_op, idle_test_cpu;
u64 idle_test_now, idle_test_ret;

SEC("syscall")
int idle_test(void *a)
{
	struct cpu_ctx *cc = &cpu_ctxs[idle_test_cpu & (MAX_CPUS - 1)];

	if (idle_test_op == 0) {
		idle_enter(cc, idle_test_now);
		idle_test_ret = 0;
	} else {
		idle_test_ret = idle_exit(cc, idle_test_now);
	}
	return 0;
}
