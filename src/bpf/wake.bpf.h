/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The wake-up over sched_ext (its primitives: scx_prims.bpf.h): the state
 * select_task_rq_fair() reads besides the machine (the waker's
 * record_wakee() state, the tasks' PELT-like loads, TTWU_QUEUE_DESCHED's
 * observation at sched_waking); ops.select_cpu's body; and the idle
 * transitions that feed the wake-up's hints (has_idle_cores, avg_idle).
 */
#pragma once

#include <scx/common.bpf.h>
#include <scx/compat.bpf.h>
#include "intf.h"
#include "ctx.bpf.h"
#include "sis.bpf.h"
#include "idle.bpf.h"

/* ---- the state select_task_rq_fair() reads ---- */

/* record_wakee() of each CPU's idle task: interrupt wake-ups from idle */
struct sis_wake_state idle_wake_state[MAX_CPUS];

/* from ops.runnable */
static void wake_load_runnable(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tctx)
		tctx->load.runnable_at = bpf_ktime_get_ns();
	if (READ_ONCE(calib_on)) {
		u32 zero = 0;
		struct sis_ctx *c = bpf_map_lookup_elem(&sis_scratch, &zero);

		if (c)
			calib_flush(c, p->pid);
	}
}

/* from ops.quiescent */
static void wake_load_quiescent(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tctx)
		task_load_update(&tctx->load, p->scx.weight, bpf_ktime_get_ns());
}

/*
 * TTWU_QUEUE_DESCHED lives in try_to_wake_up(), before select_task_rq():
 *   if (READ_ONCE(p->on_cpu) && ttwu_queue_wakelist(p, task_cpu(p), wake_flags | WF_ON_CPU))
 * (the condition: ttwu_waking_cond(), sis.bpf.h). sched_ext on
 * 6.12 never takes this path for its tasks (it waits for on_cpu and calls
 * select_cpu), so the condition is evaluated at the same point of the same
 * wake-up: the sched_waking tracepoint, which try_to_wake_up() fires just
 * before it reads p->on_rq and p->on_cpu. select_cpu then places the task
 * on that CPU without the search (ttwu_desched_select()).
 */
/* p->on_cpu / p->on_rq: int on 6.12, u8 since 6.17 */
struct task_struct___on_u8 {
	u8 on_cpu;
	u8 on_rq;
} __attribute__((preserve_access_index));

struct task_struct___on_int {
	int on_cpu;
	int on_rq;
} __attribute__((preserve_access_index));

/* the wakee is still on its CPU (in schedule()) and dequeued */
static __always_inline bool task_descheduling(struct task_struct *p)
{
	if (bpf_core_type_matches(struct task_struct___on_u8)) {
		struct task_struct___on_u8 *t = (void *)p;

		return BPF_CORE_READ(t, on_cpu) && !BPF_CORE_READ(t, on_rq);
	} else {
		struct task_struct___on_int *t = (void *)p;

		return BPF_CORE_READ(t, on_cpu) && !BPF_CORE_READ(t, on_rq);
	}
}

/*
 * TTWU_QUEUE_DESCHED at sched_waking: the wakee is descheduling (on its
 * CPU, dequeued), and the decision (ttwu_waking_cond(), sis.bpf.h: the
 * feature on, ttwu_queue_cond() would queue it on that CPU).
 * True: select_cpu places it there without a search.
 */
static __always_inline bool ttwu_queue_desched(struct task_struct *p)
{
	s32 cpu;

	if (!task_descheduling(p))
		return false;
	cpu = p->thread_info.cpu;
	return ttwu_waking_cond(features(), cpu, bpf_cpumask_test_cpu(cpu, p->cpus_ptr));
}

SEC("tp_btf/sched_waking")
int BPF_PROG(sisutil_waking, struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (!tctx)
		return 0;
	tctx->desched_wakeup = ttwu_queue_desched(p);
	/* for wake_seen_runnable(): where the waker is, and whether p is on its CPU */
	tctx->waking_cpu = 1 + bpf_get_smp_processor_id();
	tctx->waking_on_cpu = task_descheduling(p);
	if (tctx->waking_on_cpu)
		stat_inc(sis_cpu_llc(p->thread_info.cpu), STAT_WAKE_ON_CPU);
	return 0;
}

/*
 * ops.runnable of a wake-up sched_waking saw: how the kernel activated it
 * (ttwu_wake_path(), sis.bpf.h), counted in the LLC of the CPU it is
 * activated on.
 */
static void wake_seen_runnable(struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	s32 this_cpu = bpf_get_smp_processor_id(), llc = sis_cpu_llc(this_cpu);
	u32 path;

	if (!tctx || !tctx->waking_cpu)
		return;
	if (enq_flags & SCX_ENQ_WAKEUP) {
		path = ttwu_wake_path(tctx->waking_on_cpu, tctx->waking_cpu - 1, this_cpu);
		if (path & WAKE_PATH_LIST)
			stat_inc(llc, STAT_WAKE_LIST);
		if (path & WAKE_PATH_LIST_ON_CPU)
			stat_inc(llc, STAT_WAKE_LIST_ON_CPU);
		if (path & WAKE_PATH_SPUN)
			stat_inc(llc, STAT_WAKE_SPUN);
	}
	tctx->waking_cpu = 0;
}

/*
 * current's record_wakee() state: its task storage, created for tasks the
 * scheduler does not manage; the idle task (interrupt wake-ups) has a
 * per-CPU slot.
 */
static struct sis_wake_state *waker_state(struct task_struct *cur, s32 this_cpu, u64 *load)
{
	struct task_ctx init = { .ws = { .recent_used_cpu = -1, .last_wakee = -1 } };
	struct task_ctx *wctx;

	*load = 0;
	if (!cur->pid) {
		if (this_cpu < 0 || this_cpu >= MAX_CPUS)
			return NULL;
		return &idle_wake_state[this_cpu & (MAX_CPUS - 1)];
	}
	wctx = bpf_task_storage_get(&task_ctxs, cur, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!wctx)
		return NULL;
	*load = wctx->load.avg;
	return &wctx->ws;
}

/*
 * A wake-up claimed idle @cpu for its task: the CPU is busy from now (its
 * idle period closed, idle.bpf.h), and SIS_PROP's avg_idle learns the period
 * now, as ttwu_do_activate() does when the wakee lands on the idle runqueue.
 */
static void wake_claimed(s32 cpu)
{
	struct cpu_ctx *cc = sis_cpu_ctx(cpu);
	u64 delta;

	if (!cc)
		return;
	delta = idle_exit(cc, bpf_ktime_get_ns());
	if (delta)
		sis_prop_idle_exit(cc, delta, bpf_jiffies64());
}

/*
 * ops.select_cpu: select_task_rq_fair() (sis.bpf.h) for a wake-up, or
 * TTWU_QUEUE_DESCHED's placement on prev without a search; a CPU the
 * wake-up claimed from the idle mask gets the task directly.
 */
static s32 wake_select_cpu(struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct sis_wake_state *waker;
	struct task_ctx *tctx;
	struct sis_ctx *c;
	u32 zero = 0;
	s32 cpu;

	/* fork/exec balancing is the kernel's slow path: just any idle CPU */
	if (!(wake_flags & SCX_WAKE_TTWU)) {
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
		if (cpu >= 0) {
			wake_claimed(cpu);
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sis_slice_ns(), 0);
			return cpu;
		}
		return prev_cpu;
	}

	c = bpf_map_lookup_elem(&sis_scratch, &zero);
	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (!c || !tctx)
		return prev_cpu;
	c->feat = features();
	c->this_cpu = bpf_get_smp_processor_id();
	c->prev = prev_cpu;
	sis_wake_fresh(c);
	c->wakee_id = p->pid;
	c->wakee_load = tctx->load.avg;
	/* is_per_cpu_kthread(current); in_task() is taken as true (DESIGN.md) */
	c->pcpu_kthread = (cur->flags & PF_KTHREAD) && cur->nr_cpus_allowed == 1;
	sis_count_in(c, prev_cpu);	/* prev's LLC, unless wake_affine() picks this_cpu */
	wake_allowed(c, p->cpus_ptr, p->nr_cpus_allowed);

	/* TTWU_QUEUE_DESCHED: the activation happens on prev, no select_task_rq() at all */
	cpu = ttwu_desched_select(c, &tctx->desched_wakeup);
	if (cpu < 0) {
		waker = waker_state(cur, c->this_cpu, &c->waker_load);
		if (!waker)
			return prev_cpu;
		cpu = select_task_rq_fair(c, waker, &tctx->ws, prev_cpu,
					  wake_sync(wake_flags & SCX_WAKE_SYNC, cur->flags));
	}

	if (c->claimed >= 0 && c->claimed == cpu) {
		wake_claimed(cpu);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sis_slice_ns(), 0);
		sis_inc(c, STAT_DIRECT);
	}
	return cpu;
}

/*
 * Idle transitions: per-CPU busy time for the loader's utilization
 * (busy = elapsed - idle_ns, whatever ran: any class, IRQs; idle.bpf.h),
 * SIS_PROP's avg_idle (ttwu_do_activate(); for a period a wake-up's claim
 * did not close already), and the has_idle_cores hint: idle_update(),
 * idle.bpf.h.
 */
static void wake_update_idle(s32 cpu, bool idle)
{
	idle_update(features(), cpu, idle, bpf_ktime_get_ns(), bpf_jiffies64());
}
