/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_sisutil: the CFS wake-up placement (select_task_rq_fair ->
 * select_idle_sibling -> select_idle_cpu) and five kernel patches as
 * live-switchable sched_ext policies. Per-LLC vruntime DSQs underneath.
 *
 * This file only wires the sched_ext callbacks to the components that do the work:
 *   ctx.bpf.h     knobs, the feature word, statistics, per-task and per-CPU context
 *   sis_ctx.bpf.h the machine the wake-up reads, and its primitives
 *   sis.bpf.h     the wake-up placement, fair.c's steps top to bottom
 *   decide.bpf.h  the decisions outside select_task_rq_fair, one pure function
 *                 each over the primitives (the host test runs them too)
 *   idle.bpf.h    a CPU's idle time, in the write order the loader's read needs
 *   calib.bpf.h   the scan depth calibration (how far an idle CPU was)
 *   wake.bpf.h    the wake-up over sched_ext: primitives, task load, the
 *                 TTWU_QUEUE_DESCHED tracepoint, select_cpu, idle transitions
 *   vtime.bpf.h   fairness inside an LLC: EEVDF's vruntime, lag and deadlines
 *   queue.bpf.h   enqueue, the kick of an idle CPU (kick.bpf.h), dispatch and
 *                 its steal (steal.bpf.h)
 */
#include <scx/common.bpf.h>
#include <scx/compat.bpf.h>
#include "intf.h"
#include "sis_ctx.bpf.h"	/* the seam's interface */
#include "scx_prims.bpf.h"	/* its implementation over sched_ext */
#include "ctx.bpf.h"		/* then its users */
#include "wake.bpf.h"
#include "vtime.bpf.h"
#include "queue.bpf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

s32 BPF_STRUCT_OPS(sisutil_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	return wake_select_cpu(p, prev_cpu, wake_flags);
}

void BPF_STRUCT_OPS(sisutil_enqueue, struct task_struct *p, u64 enq_flags)
{
	queue_enqueue(p, enq_flags);
}

void BPF_STRUCT_OPS(sisutil_dispatch, s32 cpu, struct task_struct *prev)
{
	queue_dispatch(cpu, prev);
}

void BPF_STRUCT_OPS(sisutil_tick, struct task_struct *p)
{
	queue_tick(p);
}

void BPF_STRUCT_OPS(sisutil_running, struct task_struct *p)
{
	cpu_note_running(p);
	queue_left(p);
	vt_running(p);
}

void BPF_STRUCT_OPS(sisutil_stopping, struct task_struct *p, bool runnable)
{
	vt_stopping(p, runnable);
}

void BPF_STRUCT_OPS(sisutil_runnable, struct task_struct *p, u64 enq_flags)
{
	wake_load_runnable(p);
	vt_runnable(p);
}

void BPF_STRUCT_OPS(sisutil_quiescent, struct task_struct *p, u64 deq_flags)
{
	wake_load_quiescent(p);
	queue_left(p);
	vt_quiescent(p);
}

void BPF_STRUCT_OPS(sisutil_set_weight, struct task_struct *p, u32 weight)
{
	vt_set_weight(p, weight);
}

void BPF_STRUCT_OPS(sisutil_update_idle, s32 cpu, bool idle)
{
	wake_update_idle(cpu, idle);
}

void BPF_STRUCT_OPS(sisutil_enable, struct task_struct *p)
{
	vt_enable(p);
}

void BPF_STRUCT_OPS(sisutil_disable, struct task_struct *p)
{
	vt_disable(p);
}

s32 BPF_STRUCT_OPS(sisutil_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	return task_ctx_init(p);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(sisutil_init)
{
	if (!sis_topo()->nr_llcs || sis_topo()->nr_llcs > MAX_LLCS) {
		scx_bpf_error("bad topology: %u LLCs", sis_topo()->nr_llcs);
		return -EINVAL;
	}
	cpu_ctx_init();
	return queue_init();
}

void BPF_STRUCT_OPS(sisutil_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(sisutil_ops,
	       .select_cpu	= (void *)sisutil_select_cpu,
	       .enqueue		= (void *)sisutil_enqueue,
	       .dispatch	= (void *)sisutil_dispatch,
	       .tick		= (void *)sisutil_tick,
	       .running		= (void *)sisutil_running,
	       .stopping	= (void *)sisutil_stopping,
	       .update_idle	= (void *)sisutil_update_idle,
	       .enable		= (void *)sisutil_enable,
	       .disable		= (void *)sisutil_disable,
	       .runnable	= (void *)sisutil_runnable,
	       .quiescent	= (void *)sisutil_quiescent,
	       .set_weight	= (void *)sisutil_set_weight,
	       .init_task	= (void *)sisutil_init_task,
	       .init		= (void *)sisutil_init,
	       .exit		= (void *)sisutil_exit,
	       .timeout_ms	= 5000,
	       .name		= "sisutil");
