/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_sisutil: the CFS wake-up placement (select_task_rq_fair ->
 * select_idle_sibling -> select_idle_cpu) and five kernel patches as
 * live-switchable sched_ext policies. Per-LLC vruntime DSQs underneath.
 *
 * This file wires the sched_ext callbacks to the components that decide;
 * the queue's callbacks (enqueue, tick, dispatch) read the task and
 * sched_ext here and call queue.bpf.h, as scx_eevdf's main.bpf.c holds its
 * enqueue and dispatch. Included in the seam's order: its interface, its
 * implementation over sched_ext, then the components that use it:
 *   sis_ctx.bpf.h   the seam: the knobs and primitives every component runs on
 *                   (declared), the wake-up's context, per-LLC/per-CPU state, counters
 *   scx_prims.bpf.h the knobs and primitives over sched_ext (the host objects'
 *                   twin: tools/synth.bpf.h); the knobs themselves, with their
 *                   comments, in knobs.bpf.h, which both include
 *   ctx.bpf.h       the live feature word, per-task context, the wake-up's scratch
 *   sis.bpf.h       the wake path: fair.c's steps top to bottom, WF_SYNC,
 *                   TTWU_QUEUE_DESCHED's condition and hand-off, the task's load
 *   calib.bpf.h     the scan depth calibration (how far an idle CPU was)
 *   idle.bpf.h      a CPU's idle time and ops.update_idle's accounting
 *   idle_time.bpf.h that idle time's two writes (shadow's tracer uses them too)
 *   wake.bpf.h      the wake-up over sched_ext: task load, the TTWU_QUEUE_DESCHED
 *                   tracepoint, select_cpu, idle transitions
 *   vtime.bpf.h     fairness inside an LLC: EEVDF's vruntime, lag and deadlines
 *   wait_hist.bpf.h the wait histogram's log2 buckets (the latency tracer's too)
 *   shards.bpf.h    LLC_SHARDS: an LLC's queue as shards, geometry and decisions
 *   kick.bpf.h      the kick of an idle CPU: flag word, search, its two features
 *   steal.bpf.h     dispatch's steal from other LLCs and its summary
 *   queue.bpf.h     the queue's decisions: WAKE_RESCUE, the tick's kick,
 *                   NEWIDLE_SKIP_IPI, dispatch's order
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

/* ---- the queue's callbacks: what they read from sched_ext and the task, then queue.bpf.h ---- */

/*
 * ops.enqueue: into the LLC's vtime DSQ (vtime.bpf.h gives the key; the
 * shard: enqueue_shard(), shards.bpf.h), then the task's own CPU is kicked if
 * idle (the kernel's resched of target), or with WAKE_RESCUE an idle CPU of
 * the machine is asked to come and take it (enqueue_rescue(), queue.bpf.h;
 * kick_for_work(), kick.bpf.h).
 */
static void queue_enqueue(struct task_struct *p, u64 enq_flags)
{
	s32 cpu = scx_bpf_task_cpu(p), llc = sis_cpu_llc(cpu);
	struct task_ctx *tctx;
	u64 feat = features();
	u32 shard;

	if (llc < 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, sis_slice_ns(), enq_flags);
		sis_kick_idle(cpu);
		stat_inc(llc, STAT_DIRECT);
		return;
	}

	/* counted in the LLC's queued work before the insert (steal.bpf.h) */
	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (tctx)
		queued_enter(&tctx->queued_in, llc);
	else
		WRITE_ONCE(steal_uncounted, 1);
	shard = enqueue_shard(feat, cpu, llc);
	if (shard && !READ_ONCE(llc_shards_used))
		WRITE_ONCE(llc_shards_used, 1);
	/* the EEVDF order: the virtual deadline, within the LLC clock's wait guard */
	scx_bpf_dsq_insert_vtime(p, shard_dsq(llc, shard), sis_slice_ns(), vt_enqueue_key(p, llc),
				 enq_flags);
	stat_inc(llc, STAT_ENQUEUE);

	/*
	 * Pinned and migration-disabled tasks can only run where they are, but
	 * they queue in the LLC's vtime DSQ like everyone else: only their CPU
	 * can take them off it (consuming a DSQ skips tasks that cannot run on
	 * the consuming CPU). Straight into the local DSQ, they had strict
	 * priority over the LLC DSQ: stress-ng --affinity kept the local DSQs
	 * of an LLC's CPUs non-empty and the unbound kworker of sched_ext's
	 * own watchdog never ran ("watchdog failed to check in for 5.024s").
	 */
	if (enqueue_rescue(feat, p->nr_cpus_allowed == 1 || is_migration_disabled(p)))
		kick_for_work(llc, p, feat);
	else
		sis_kick_idle(cpu);
}

/*
 * ops.tick on a busy CPU: nohz_balancer_kick()'s kick_ilb() analog without
 * WAKE_RESCUE: the shard whose head an idle CPU is asked to come and take
 * (tick_kick_shard(), queue.bpf.h), its head's affinity for the search
 * (kick_for_work(), kick.bpf.h).
 */
static void queue_tick(struct task_struct *cur)
{
	s32 llc = sis_cpu_llc(scx_bpf_task_cpu(cur)), s;
	struct task_struct *p;
	u64 feat = features();

	s = tick_kick_shard(feat, llc);
	if (s < 0)
		return;
	bpf_for_each(scx_dsq, p, shard_dsq(llc, s), 0) {
		kick_for_work(llc, p, feat);
		return;
	}
}

/* ops.running and ops.quiescent: the task no longer counts as queued work (steal.bpf.h) */
static void queue_left(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tctx)
		queued_leave(&tctx->queued_in);
}

/* ops.dispatch: dispatch_order() (queue.bpf.h); prev going on gets a new slice */
static void queue_dispatch(s32 cpu, struct task_struct *prev)
{
	bool prev_queued = prev && (prev->scx.flags & SCX_TASK_QUEUED);

	if (dispatch_order(features(), cpu, prev_queued) == DISPATCH_PREV && prev)
		prev->scx.slice = sis_slice_ns();
}

/*
 * ops.init: the kick search's LLC masks, a DSQ per shard of each LLC (shard
 * 0's id = the LLC index; shard_dsq(), shards.bpf.h): all of them, so that
 * LLC_SHARDS switches on live.
 */
static s32 queue_init(void)
{
	u32 l, s, nr;
	s32 ret;
	u64 id;

	kick_llc_words_init();
	bpf_for(l, 0, sis_topo()->nr_llcs) {
		nr = llc_nr_shards(l);
		bpf_for(s, 0, nr) {
			id = shard_dsq(l, s);
			ret = scx_bpf_create_dsq(id, -1);
			if (ret) {
				scx_bpf_error("failed to create DSQ %llu: %d", id, ret);
				return ret;
			}
		}
	}
	return 0;
}

/* ---- the ops ---- */

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
	wake_seen_runnable(p, enq_flags);
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
