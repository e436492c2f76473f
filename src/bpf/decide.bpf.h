/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The decisions the scheduler takes outside select_task_rq_fair(), as pure
 * functions over the seam of sis_ctx.bpf.h (the machine's state and the
 * wake-up's primitives), one function per decision: wake.bpf.h and
 * queue.bpf.h call them with what they read from sched_ext and the task,
 * the host test object (sis_test.bpf.c) with synthetic state, so the host
 * tests run this very code. The kick search and KICK_SKIP_REDUNDANT's
 * decision are kick.bpf.h's, __update_idle_core() is sis.bpf.h's.
 */
#pragma once

#include "sis_ctx.bpf.h"
#include "sis.bpf.h"
#include "idle.bpf.h"

/*
 * select_task_rq_fair()'s
 *   int sync = (wake_flags & WF_SYNC) && !(current->flags & PF_EXITING);
 * an exiting waker is not going to sleep on the CPU it leaves to the wakee.
 */
static __always_inline bool wake_sync(bool wf_sync, u32 current_flags)
{
	return wf_sync && !(current_flags & PF_EXITING);
}

/*
 * TTWU_QUEUE_DESCHED, Mel Gorman's "sched/core: Offload wakee task
 * activation if the wakee is descheduling" (2020, 2ebb17717550):
 * ttwu_queue_cond() for a wakee still on @cpu (WF_ON_CPU), woken from
 * @this_cpu: another CPU than the waker's, sharing its cache, in
 * p->cpus_ptr (@allowed), and "(wake_flags & WF_ON_CPU) &&
 * cpu_rq(cpu)->nr_running <= 1" - the wakee, already dequeued, is not
 * counted, so it is the later kernel's !nr_running.
 */
static __always_inline bool ttwu_queue_cond_desched(s32 this_cpu, s32 cpu, bool allowed)
{
	return cpu != this_cpu && sis_share_cache(cpu, this_cpu) && allowed &&
	       !sis_nr_running(NULL, cpu);
}

/*
 * TTWU_QUEUE_DESCHED's condition as sched_waking evaluates it, on the
 * waking CPU (this CPU, sis_this_cpu()), for a wakee that is descheduling on
 * @wakee_cpu, @allowed there: the waker is this CPU, the wakee's CPU is the
 * one whose runqueue must be empty.
 */
static __always_inline bool ttwu_waking_cond(s32 wakee_cpu, bool allowed)
{
	return ttwu_queue_cond_desched(sis_this_cpu(), wakee_cpu, allowed);
}

/*
 * TTWU_QUEUE_DESCHED's hand-off in select_cpu: *@desched is what
 * sched_waking saw; it is consumed here (a later select_cpu without a
 * sched_waking before it must not reuse it). The activation happens on prev
 * without select_task_rq(): prev is returned, -1 when the hand-off does not
 * apply. The hit counts only when prev is claimed and the task goes
 * straight there; otherwise it is queued on prev's LLC without a search.
 */
static __always_inline s32 ttwu_desched_select(struct sis_ctx *c, u32 *desched)
{
	if (!*desched || !sis_feat(c, FEAT_TTWU_QUEUE_DESCHED))
		return -1;
	*desched = 0;
	if (sis_take(c, c->prev))
		sis_inc(c, STAT_HIT_TTWU_QUEUE_DESCHED);
	return c->prev;
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
 * ops.update_idle's accounting at @now (ns) and @jiffies: going idle opens
 * an idle period (idle_enter(), idle.bpf.h: idle_start, the first transition
 * of a run of them) and updates has_idle_cores (__update_idle_core(),
 * sis.bpf.h); leaving idle closes the period unless a wake-up's claim closed
 * it already (idle_exit(): the loader's busy time = elapsed - idle_ns) and
 * feeds SIS_PROP's avg_idle (sis_prop_idle_exit()). "Idle" is the
 * scheduler's own view, so the hint does not depend on when sched_ext
 * updates its idle masks (on 6.12 update_idle runs before they change).
 */
static __always_inline void idle_update(u64 feat, s32 cpu, bool idle, u64 now, u64 jiffies)
{
	struct cpu_ctx *cc = sis_cpu_ctx(cpu);
	u64 delta;

	if (!cc)
		return;
	if (idle) {
		idle_enter(cc, now);
		update_idle_core(feat, cpu);
		return;
	}
	delta = idle_exit(cc, now);
	if (delta)
		sis_prop_idle_exit(cc, delta, jiffies);
}

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

/*
 * PELT's decay_load(): val * y^n, y^32 = 1/2, n in 1024 us periods.
 * runnable_avg_yN_inv[i] = y^i * 2^32.
 */
static const u32 yN_inv[32] = {
	0xffffffff, 0xfa83b2db, 0xf5257d15, 0xefe4b99b, 0xeac0c6e7, 0xe5b906e7,
	0xe0ccdeec, 0xdbfbb797, 0xd744fcca, 0xd2a81d91, 0xce248c15, 0xc9b9bd86,
	0xc5672a11, 0xc12c4cca, 0xbd08a39f, 0xb8fbaf47, 0xb504f333, 0xb123f581,
	0xad583eea, 0xa9a15ab4, 0xa5fed6a9, 0xa2704303, 0x9ef53260, 0x9b8d39b9,
	0x9837f051, 0x94f4efa8, 0x91c3d373, 0x8ea4398b, 0x8b95c1e3, 0x88980e80,
	0x85aac367, 0x82cd8698,
};

static __always_inline u64 decay_load(u64 val, u64 ns)
{
	u64 n = ns >> 20;	/* ~1024 us periods */

	if (n > 63 * 32)
		return 0;
	val >>= n / 32;
	return (val * yN_inv[n % 32 & 31]) >> 32;
}

/*
 * The task's load for wake_affine_weight(): sched_ext keeps no se.avg for
 * its tasks, so a PELT-like runnable average is kept (struct task_load, of
 * a task of weight @weight at @now, ns), updated by wake.bpf.h when the
 * task stops being runnable (ops.quiescent), as the kernel updates a
 * blocked task's load at dequeue and task_h_load() reads it unchanged:
 *   load = decay(load, slept) ; load = decay(load, runnable) + w * (1 - y^runnable)
 * w = 1024 * weight / 100 (NICE_0 -> 1024). A new task starts at w
 * (init_entity_runnable_average()).
 */
static __always_inline void task_load_update(struct task_load *l, u32 weight, u64 now)
{
	u64 w = 1024ULL * weight / 100, r;

	if (l->quiescent_at && l->runnable_at > l->quiescent_at)
		l->avg = decay_load(l->avg, l->runnable_at - l->quiescent_at);
	r = l->runnable_at && now > l->runnable_at ? now - l->runnable_at : 0;
	l->avg = decay_load(l->avg, r) + w - decay_load(w, r);
	l->quiescent_at = now;
}
