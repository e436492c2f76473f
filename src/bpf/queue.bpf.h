/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The queue's decisions: one vtime-ordered queue per LLC (its shards:
 * shards.bpf.h), whether the enqueue searches for an idle CPU to kick
 * (WAKE_RESCUE), the tick's kick of an idle CPU for the work waiting
 * (nohz_balancer_kick()), and dispatch's order: the LLC's queue, prev, the
 * NEWIDLE_SKIP_IPI stop, the steal (steal.bpf.h). Each a function over the
 * seam's primitives (sis_ctx.bpf.h): the scheduler's callbacks (main.bpf.c)
 * call them with what they read from sched_ext and the task, the host test
 * (testing/sis_test.bpf.c) with a synthetic machine, so it runs this very
 * code. The kick itself is kick.bpf.h's (kick_for_work(), take_kick()).
 */
#pragma once

#include "sis_ctx.bpf.h"
#include "shards.bpf.h"
#include "kick.bpf.h"
#include "steal.bpf.h"

/*
 * The enqueue's kick. The kernel has no rescue for a wakee whose search
 * found no idle CPU: select_idle_sibling() returns target, the wakee waits
 * on target's runqueue (target is woken if idle: resched_curr()), and an
 * idle CPU gets it only through a balance. True when the enqueue searches
 * the machine for an idle CPU to kick at once (WAKE_RESCUE, not the
 * kernel's); false: only the task's own CPU is kicked. Pinned and
 * migration-disabled tasks (@pinned) only ever kick their CPU.
 */
static __always_inline bool enqueue_rescue(u64 feat, bool pinned)
{
	return feat_on(feat, FEAT_WAKE_RESCUE) && !pinned;
}

/*
 * The tick's kick, nohz_balancer_kick() from sched_tick() on a busy CPU:
 *   if (rq->nr_running >= 2) { flags = NOHZ_STATS_KICK | NOHZ_BALANCE_KICK; goto out; }
 *   out: if (flags) kick_ilb(flags);
 * kick_ilb() finds an idle CPU (the search and KICK_SKIP_REDUNDANT of
 * kick.bpf.h) and the idle balance it runs pulls the waiting task. Here the
 * waiting tasks are the LLC queue's (@queued): a busy CPU of the LLC that
 * ticks while it holds any asks for an idle CPU. Without WAKE_RESCUE only:
 * with it the enqueue has kicked already.
 */
static __always_inline bool tick_kicks(u64 feat, u64 queued)
{
	return !feat_on(feat, FEAT_WAKE_RESCUE) && queued >= 1;
}

/*
 * The tick's kick for LLC @llc (tick_kicks() over the LLC's queue): the
 * first live shard (llc_shards_live(), in shard order) whose queue holds a
 * task, whose head the caller asks an idle CPU to come and take
 * (kick_for_work()); -1 when the tick kicks nobody. One live shard: no
 * iterator, the LLC's own DSQ alone.
 */
static __always_inline s32 tick_kick_shard(u64 feat, s32 llc)
{
	u32 s, nr;

	if (llc < 0 || llc >= MAX_LLCS)
		return -1;
	nr = llc_shards_live(llc);
	if (nr <= 1)
		return tick_kicks(feat, sis_dsq_nr(shard_dsq(llc, 0))) ? 0 : -1;
	bpf_for(s, 0, nr)
		if (tick_kicks(feat, sis_dsq_nr(shard_dsq(llc, s))))
			return s;
	return -1;
}

/*
 * NEWIDLE_SKIP_IPI: K Prateek Nayak, "sched/fair: Skip newidle_balance()
 * when an idle CPU is woken up to process an IPI" (2024): "if (prev ==
 * rq->idle) return NULL;" - a CPU that was idle (@cpu's idle_start is set)
 * and was not asked to take work (!@kicked) goes back to idle at once
 * instead of pulling from other LLCs. True when it does.
 */
static __always_inline bool newidle_skip_ipi(u64 feat, s32 cpu, bool kicked)
{
	struct cpu_ctx *cc = sis_cpu_ctx(cpu);

	return feat_on(feat, FEAT_NEWIDLE_SKIP_IPI) && cc && READ_ONCE(cc->idle_start) && !kicked;
}

/*
 * ops.dispatch on CPU @cpu, in the kernel's order (pick_next_task_fair():
 * the CPU's own runqueue, then prev, then sched_balance_newidle()): this
 * LLC's queue first (its own shard, then the LLC's others in rotation:
 * dispatch_llc(), shards.bpf.h); else prev goes on (@prev_queued: prev is
 * still runnable, the caller refills its slice); else, unless
 * NEWIDLE_SKIP_IPI sends an idle CPU woken for no work back to idle, the
 * newidle balance analog steals from the other LLCs, nearest first, those
 * with queued work only (steal_search()). This CPU's kick-pending bit is
 * taken first, whatever the step (take_kick()). Each step counted against
 * the CPU's LLC; the step taken is returned (enum dispatch_step, intf.h).
 */
static __always_inline u32 dispatch_order(u64 feat, s32 cpu, bool prev_queued)
{
	s32 llc = sis_cpu_llc(cpu);
	bool kicked = take_kick(cpu);
	u32 tried = 0, walked = 0;

	if (llc < 0)
		return DISPATCH_NONE;
	if (dispatch_llc(cpu, llc)) {
		stat_inc(llc, STAT_DISPATCH_LLC);
		return DISPATCH_LLC;
	}
	if (prev_queued)
		return DISPATCH_PREV;
	if (newidle_skip_ipi(feat, cpu, kicked)) {
		stat_inc(llc, STAT_HIT_NEWIDLE_SKIP_IPI);
		return DISPATCH_SKIP_IDLE;
	}
	if (steal_search(llc, &tried, &walked) >= 0) {
		stat_inc(llc, STAT_STEAL);
		return DISPATCH_STEAL;
	}
	return DISPATCH_NONE;
}
