/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Dispatch's steal from the other LLCs (the newidle balance analog,
 * queue.bpf.h), and the summary of queued work that spares it the walk when
 * no LLC holds any.
 *
 * Without the summary, a CPU whose own LLC queue is empty tried every other
 * LLC's DSQ (a scx_bpf_dsq_move_to_local() each: a DSQ hash lookup and a
 * list test), O(LLCs) kfunc calls on every dispatch that found nothing,
 * which at light load is every idle entry. With it, one machine-wide test
 * (a load per LLC, unrolled: no kfunc, no iterator call) ends the steal when nothing is queued anywhere, and the walk, when there
 * is something, tries only the LLCs whose count is not zero.
 *
 * llc_queued[l] counts the tasks ops.enqueue put in LLC l's DSQ that have
 * neither run (ops.running) nor stopped being runnable (ops.quiescent) since:
 * each task carries the LLC it is counted in (task_ctx.queued_in), entered
 * before its insert (in ops.enqueue; sched_ext inserts after it returns)
 * and left at whichever of those two comes first, once. A task can reach
 * an LLC DSQ only through ops.enqueue, and leaves it only to run, to be
 * dequeued (quiescent) or to be moved to a CPU's local DSQ (then it runs or
 * is dequeued): so at every instant llc_queued[l] >= the tasks in DSQ l,
 * and a zero count is an empty DSQ (the exactness the skip needs). The
 * surplus is the tasks in flight (taken off the DSQ, not yet running), for
 * which a steal tries and fails as the plain walk would. It does not depend
 * on ops.update_idle or on sched_ext's idle masks, so bypass (which skips
 * ops.enqueue and ops.dispatch but not the tasks' dequeues) keeps it exact.
 * A task queued without a task context cannot be counted: steal_uncounted
 * is set and every later steal walks every LLC.
 *
 * The walk moves a task with shards.bpf.h's llc_shards_move() from shard 0
 * of the LLC tried (an LLC's shards in order), over the seam's primitive
 * sis_dsq_move(): sched_ext's DSQs in the scheduler, synthetic queue
 * lengths in the host test (sis_test.bpf.c runs this very walk).
 */
#pragma once

#include "sis_ctx.bpf.h"
#include "shards.bpf.h"		/* llc_shards_move() */

/*
 * Tasks counted in each LLC's DSQ (an upper bound of its length, above), a
 * cache line each: packed 8 to a line, an enqueue's atomic costs what one
 * word shared by every CPU costs (placement-cost --contention: 13 ns against
 * 1.9 ns on a line of its own, 2 CPUs; docs/DESIGN.md).
 */
struct steal_count {
	u64 n;
	u64 __pad[7];
} __attribute__((aligned(64)));

struct steal_count llc_queued[MAX_LLCS];
/* set once a task was queued without its count: the summary no longer bounds the DSQs */
u32 steal_uncounted;

/*
 * A task leaves the count it is in (@in: 1 + its LLC, 0 none): at
 * ops.running and ops.quiescent; a second call does nothing.
 */
static __always_inline void queued_leave(u32 *in)
{
	u32 l = *in;

	if (!l)
		return;
	*in = 0;
	__sync_fetch_and_sub(&llc_queued[(l - 1) & (MAX_LLCS - 1)].n, 1);
}

/* ops.enqueue, before the insert into LLC @llc's DSQ: the task is counted there (once) */
static __always_inline void queued_enter(u32 *in, s32 llc)
{
	if (llc < 0 || llc >= MAX_LLCS) {
		WRITE_ONCE(steal_uncounted, 1);
		return;
	}
	queued_leave(in);
	*in = llc + 1;
	__sync_fetch_and_add(&llc_queued[llc & (MAX_LLCS - 1)].n, 1);
}

/*
 * The machine-wide test: may any LLC's DSQ hold a task? Every count in
 * turn, unrolled (no iterator call; one load per LLC, no kfunc), read
 * without the atomics' lock: a count read as zero was zero at that instant,
 * as the walk's list test would have seen its DSQ.
 */
static __always_inline bool steal_any_queued(void)
{
	u32 i, nr = sis_topo()->nr_llcs;
	u64 acc = 0;

	/* no exit in the body, or clang leaves the loop rolled (7.x refuses plain loops here) */
#pragma unroll
	for (i = 0; i < MAX_LLCS; i++)
		if (i < nr)
			acc |= READ_ONCE(llc_queued[i].n);
	return acc || READ_ONCE(steal_uncounted);
}

/*
 * The steal: the other LLCs in @llc's steal order (topo.llc_steal: same node
 * first, nearest first), the first whose DSQ gives this CPU a task, or -1.
 * LLCs counted empty are not tried; *tried counts the moves attempted,
 * *walked the LLCs of the order looked at (0: the machine test ended it).
 */
static __always_inline s32 steal_search(s32 llc, u32 *tried, u32 *walked)
{
	bool every = READ_ONCE(steal_uncounted);
	u32 k;
	s32 l;

	if (llc < 0 || llc >= MAX_LLCS || sis_topo()->nr_llcs < 2)
		return -1;
	/* nothing queued anywhere: no walk */
	if (!steal_any_queued())
		return -1;
	bpf_for(k, 0, sis_topo()->nr_llcs - 1) {
		if (k >= MAX_LLCS)
			break;
		l = sis_topo()->llc_steal[llc & (MAX_LLCS - 1)][k & (MAX_LLCS - 1)];
		(*walked)++;
		if (!every && !READ_ONCE(llc_queued[l & (MAX_LLCS - 1)].n))
			continue;
		(*tried)++;
		/* its shards from shard 0 (one shard: the LLC's DSQ, as before shards) */
		if (llc_shards_move(l, 0))
			return l;
	}
	return -1;
}
