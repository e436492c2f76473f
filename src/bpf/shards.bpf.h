/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * LLC_SHARDS (not the kernel's; off in every preset), whole: an LLC's queue
 * as several DSQs ("shards") of a few CPUs each, so the queue's lock and
 * rbtree are written by k CPUs, not the LLC's n. Its geometry (how many
 * shards, whose CPU is in which, each shard's DSQ id), the set-once flag
 * that makes the other shards live, and its decisions: the enqueue's shard,
 * the rotation dispatch and the steal try the shards in, the move over the
 * seam's sis_dsq_move(), and the queue's length over sis_dsq_nr(). The
 * scheduler's callbacks (main.bpf.c), the steal (steal.bpf.h), the tick's
 * kick (queue.bpf.h) and the host test run these very functions.
 */
#pragma once

#include "sis_ctx.bpf.h"

/*
 * LLC_SHARDS' geometry: LLC @llc's queue is llc_nr_shards() DSQs of
 * llc_shard_cpus() CPUs each, by a CPU's position in the LLC (cpu_llc_pos):
 * k = shard_cpus, raised to ceil(n / MAX_LLC_SHARDS); ceil(n / k) shards,
 * one when n <= k. Shard 0 is the LLC's own DSQ (id = the LLC's index), so
 * with the feature off, or in an LLC of one shard, the queue is today's.
 */
static __always_inline u32 llc_shard_cpus(s32 llc)
{
	u32 n = sis_topo()->llc_nr[llc & (MAX_LLCS - 1)], k = sis_shard_cpus();
	u32 min = (n + MAX_LLC_SHARDS - 1) / MAX_LLC_SHARDS;

	if (k < min)
		k = min;
	return k ?: 1;
}

static __always_inline u32 llc_nr_shards(s32 llc)
{
	u32 n = sis_topo()->llc_nr[llc & (MAX_LLCS - 1)], k = llc_shard_cpus(llc);

	return n > k ? (n + k - 1) / k : 1;
}

/* the shard of CPU @cpu in its LLC @llc */
static __always_inline u32 cpu_shard(s32 cpu, s32 llc)
{
	return sis_topo()->cpu_llc_pos[cpu & (MAX_CPUS - 1)] / llc_shard_cpus(llc);
}

/*
 * the DSQ id of shard @s of LLC @llc: the LLC's index for shard 0, above
 * MAX_LLCS for the others; every shard's id is below SHARD_DSQ_END
 * (sis_ctx.bpf.h)
 */
static __always_inline u64 shard_dsq(s32 llc, u32 s)
{
	return s ? MAX_LLCS + (u64)(llc & (MAX_LLCS - 1)) * MAX_LLC_SHARDS + s : (u64)llc;
}

/*
 * Set once an enqueue used a shard other than 0 (never cleared: tasks may
 * still wait there after LLC_SHARDS is switched off). Until then dispatch,
 * steal and tick look at shard 0 alone, as without shards.
 */
u32 llc_shards_used;

/*
 * The shards of LLC @llc's queue that may hold tasks: all of them once
 * LLC_SHARDS has used a shard other than 0, else shard 0 alone.
 */
static __always_inline u32 llc_shards_live(s32 llc)
{
	return READ_ONCE(llc_shards_used) ? llc_nr_shards(llc) : 1;
}
/*
 * LLC_SHARDS (not the kernel's; off in every preset): the shard of LLC @llc
 * that ops.enqueue puts a task of CPU @cpu in: the CPU's own shard, so the
 * queue's lock and rbtree are written by its k CPUs, not the LLC's n.
 * Off: shard 0, the LLC's one queue.
 */
static __always_inline u32 enqueue_shard(u64 feat, s32 cpu, s32 llc)
{
	if (!feat_on(feat, FEAT_LLC_SHARDS))
		return 0;
	return cpu_shard(cpu, llc);
}

/*
 * LLC_SHARDS: the @j-th of @nr shards tried from shard @first, in the
 * fixed rotation first, first + 1, ... mod nr: every shard is visited
 * within nr tries, so a shard whose own CPUs are busy is served by the
 * LLC's others as soon as their own shards are empty (the wait bound of
 * docs/DESIGN.md, "Sharding"; src/testing/vtime_model.rs).
 */
static __always_inline u32 shard_rotation(u32 first, u32 j, u32 nr)
{
	return nr ? (first + j) % nr : 0;
}

/*
 * Move the head of the first non-empty shard of LLC @llc to this CPU,
 * trying its live shards (llc_shards_live()) in rotation from shard @first
 * (shard_rotation()); true when a task moved. ops.dispatch starts at the
 * CPU's own shard (dispatch_llc()), the steal at shard 0 (steal.bpf.h). One
 * live shard: no iterator, the one move as before shards (shard 0's DSQ is
 * the LLC's).
 */
static __always_inline bool llc_shards_move(s32 llc, u32 first)
{
	u32 j, nr = llc_shards_live(llc);

	if (nr <= 1)
		return sis_dsq_move(shard_dsq(llc, 0));
	bpf_for(j, 0, nr)
		if (sis_dsq_move(shard_dsq(llc, shard_rotation(first, j, nr))))
			return true;
	return false;
}

/*
 * ops.dispatch's move from its own LLC @llc: CPU @cpu serves its own shard
 * first, then the others in rotation (llc_shards_move()). Its own is the
 * CPU's shard whether LLC_SHARDS is on or not: switched off, new tasks
 * queue in shard 0 and each shard's CPUs still drain their own shard first;
 * with own = 0 for every CPU the tasks left in the other shards waited for
 * shard 0 to run dry, which under overload it never did (tests/vm.rs
 * shards_live: "runnable task stall ... 22 s").
 */
static __always_inline bool dispatch_llc(s32 cpu, s32 llc)
{
	return llc_shards_move(llc, cpu_shard(cpu, llc));
}

/* the tasks in LLC @llc's queue, every shard's (one shard: no iterator, as before shards) */
static __always_inline u64 llc_queue_nr(s32 llc)
{
	u32 s, nr = llc_shards_live(llc);
	u64 sum = 0;

	if (nr <= 1)
		return sis_dsq_nr(llc);
	bpf_for(s, 0, nr)
		sum += sis_dsq_nr(shard_dsq(llc, s));
	return sum;
}
