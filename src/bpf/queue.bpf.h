/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Queueing and dispatching: one vtime-ordered DSQ per LLC (the key from
 * vtime.bpf.h), the enqueue's and the tick's kick of an idle CPU to come and
 * take the work (kick_for_work(): kick.bpf.h holds the kick whole), and the
 * dispatch that serves the LLC's queue, then steals (steal.bpf.h's summary
 * and walk; with NEWIDLE_SKIP_IPI, over kick.bpf.h's take_kick()).
 */
#pragma once

#include <scx/common.bpf.h>
#include <scx/compat.bpf.h>
#include "intf.h"
#include "ctx.bpf.h"
#include "vtime.bpf.h"
#include "kick.bpf.h"
#include "steal.bpf.h"
#include "decide.bpf.h"

/*
 * ops.enqueue: into the LLC's vtime DSQ (vtime.bpf.h gives the key), then
 * the task's own CPU is kicked if idle (the kernel's resched of target), or
 * with WAKE_RESCUE an idle CPU of the machine is asked to come and take it
 * (kick_for_work; enqueue_rescue(), decide.bpf.h).
 */
static void queue_enqueue(struct task_struct *p, u64 enq_flags)
{
	s32 cpu = scx_bpf_task_cpu(p), llc = sis_cpu_llc(cpu);
	struct task_ctx *tctx;
	u64 feat = features();
	u32 shard;

	if (llc < 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, sis_slice_ns(), enq_flags);
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_inc(llc, STAT_DIRECT);
		return;
	}

	/* counted in the LLC's queued work before the insert (steal.bpf.h) */
	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (tctx)
		queued_enter(&tctx->queued_in, llc);
	else
		WRITE_ONCE(steal_uncounted, 1);
	/* LLC_SHARDS: the shard of the task's CPU (decide.bpf.h); off, shard 0 */
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
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

/*
 * ops.tick on a busy CPU: nohz_balancer_kick()'s kick_ilb() analog without
 * WAKE_RESCUE (tick_kicks(), decide.bpf.h): while the LLC's queue holds
 * tasks, ask an idle CPU to come and take its head (kick_for_work with the
 * head's affinity; with shards, the head of the first shard holding any).
 */
static void queue_tick(struct task_struct *cur)
{
	s32 llc = sis_cpu_llc(scx_bpf_task_cpu(cur));
	struct task_struct *p;
	u64 feat = features();
	u32 s, nr;

	if (llc < 0 || !tick_kicks(feat, llc_queue_nr(llc)))
		return;
	nr = llc_shards_live(llc);
	bpf_for(s, 0, nr) {
		bpf_for_each(scx_dsq, p, shard_dsq(llc, s), 0) {
			kick_for_work(llc, p, feat);
			return;
		}
	}
}

/* ops.running and ops.quiescent: the task no longer counts as queued work (steal.bpf.h) */
static void queue_left(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tctx)
		queued_leave(&tctx->queued_in);
}

/*
 * ops.dispatch: this LLC's queue first (with LLC_SHARDS, the CPU's own shard,
 * then the LLC's others in rotation: dispatch_llc(), decide.bpf.h); else
 * prev goes on; else, unless
 * NEWIDLE_SKIP_IPI sends an idle CPU woken for no work back to idle, the
 * newidle balance analog steals from the other LLCs, nearest first, those
 * with queued work only (steal_search, steal.bpf.h).
 */
static void queue_dispatch(s32 cpu, struct task_struct *prev)
{
	s32 llc = sis_cpu_llc(cpu);
	bool kicked = take_kick(cpu);
	u32 tried = 0, walked = 0;

	if (llc < 0)
		return;
	/* its own shard, then the LLC's others in rotation (one shard: the LLC's DSQ alone) */
	if (dispatch_llc(cpu, llc)) {
		stat_inc(llc, STAT_DISPATCH_LLC);
		return;
	}
	/* nothing else to run here: let prev go on */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		prev->scx.slice = sis_slice_ns();
		return;
	}

	/* NEWIDLE_SKIP_IPI's decision (decide.bpf.h) */
	if (newidle_skip_ipi(features(), cpu, kicked)) {
		stat_inc(llc, STAT_HIT_NEWIDLE_SKIP_IPI);
		return;
	}

	/* the newidle balance analog: other LLCs, nearest first; none queued anywhere, no walk */
	if (steal_search(llc, &tried, &walked) >= 0)
		stat_inc(llc, STAT_STEAL);
}

/*
 * ops.init: the kick search's LLC masks, a DSQ per shard of each LLC (shard
 * 0's id = the LLC index; shard_dsq(), sis_ctx.bpf.h): all of them, so that
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
