/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Queueing, kicking and dispatching: one vtime-ordered DSQ per LLC (the key
 * from vtime.bpf.h), the enqueue's kick of an idle CPU to come and take the
 * work (kick.bpf.h's search over sched_ext's idle mask, kick_ilb()'s
 * shared flag word), and the dispatch that serves
 * the LLC's queue, then steals (steal.bpf.h's summary and walk; with
 * NEWIDLE_SKIP_IPI).
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

/* the kick-pending flag word (nohz_flags() of kick_ilb()): CPUs asked to come and take queued work */
u64 kick_pending[MAX_CPUS / 64];

/* ---- the enqueue's search for an idle CPU to kick (kick.bpf.h) over sched_ext ---- */

static bool kick_test(s32 cpu)
{
	return kick_pending[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)] & (1ULL << ((u32)cpu % 64));
}

struct kick_env {
	const struct cpumask *idle;
	const struct task_struct *p;
};

static __always_inline bool kick_candidate(struct kick_env *e, s32 cpu)
{
	return bpf_cpumask_test_cpu(cpu, e->idle) && bpf_cpumask_test_cpu(cpu, e->p->cpus_ptr);
}

/* word @w of a kernel cpumask (struct cpumask's size is NR_CPUS: read, not indexed) */
static __always_inline u64 cpumask_word(const struct cpumask *m, u32 w)
{
	return BPF_CORE_READ(m, bits[w & (MAX_CPUS / 64 - 1)]);
}

static __always_inline u64 kick_idle_word(struct kick_env *e, u32 w)
{
	return cpumask_word(e->idle, w);
}

static __always_inline u64 kick_allowed_word(struct kick_env *e, u32 w)
{
	return cpumask_word(e->p->cpus_ptr, w);
}

/*
 * Ask an idle CPU to come and take the work just queued on @llc (its own
 * LLC first, then the nearest LLC that has one: that CPU will steal), as
 * kick_ilb() asks the idle load balancer:
 *   flags = atomic_fetch_or(flags, nohz_flags(ilb_cpu));
 *   if (flags & NOHZ_KICK_MASK) return;       already asked: no second IPI
 *   smp_call_function_single_async(ilb_cpu, ...);
 * Tim Chen's patch adds only the read before the atomic ("if ((atomic_read(
 * nohz_flags(ilb_cpu)) & flags) == flags) return;", KICK_SKIP_REDUNDANT);
 * its review's search from this_cpu + 1 is KICK_WRAP_NEXT: both in
 * kick.bpf.h. Every CPU the search tests is counted (KICK_SCANNED), against
 * the enqueue's LLC.
 */
static void kick_for_work(s32 llc, const struct task_struct *p, u64 feat)
{
	struct kick_env e = { .p = p };
	struct sis_counters *ksc;
	s32 cpu;
	u32 probed = 0;
	u64 bit, old;
	u64 *word;

	if (llc < 0 || llc >= MAX_LLCS)
		return;
	e.idle = scx_bpf_get_idle_cpumask();
	cpu = kick_search(&e, llc, bpf_get_smp_processor_id(), feat, &probed);
	scx_bpf_put_idle_cpumask(e.idle);
	{
		struct sis_counters *sc = llc_counters(llc);

		if (sc)
			sc->cnt[STAT_KICK_SCANNED] += probed;
	}
	if (cpu < 0 || cpu >= MAX_CPUS)
		return;
	/* the kicked CPU's LLC counts the kick: one lookup of its row */
	ksc = llc_counters(sis_cpu_llc(cpu));

	if (kick_already_asked(feat, kick_test(cpu), ksc ? ksc->cnt : NULL))
		return;
	bit = 1ULL << ((u32)cpu % 64);
	word = &kick_pending[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)];
	old = __sync_fetch_and_or(word, bit);
	if (ksc)
		ksc->cnt[STAT_KICK_ATOMIC]++;
	if (old & bit)
		return;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	if (ksc)
		ksc->cnt[STAT_KICK]++;
}

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

	if (llc < 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
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
	/* the EEVDF order: the virtual deadline, within the LLC clock's wait guard */
	scx_bpf_dsq_insert_vtime(p, llc, slice_ns, vt_enqueue_key(p, llc), enq_flags);
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
	if (enqueue_rescue(features(), p->nr_cpus_allowed == 1 || is_migration_disabled(p)))
		kick_for_work(llc, p, features());
	else
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

/*
 * ops.tick on a busy CPU: nohz_balancer_kick()'s kick_ilb() analog without
 * WAKE_RESCUE (tick_kicks(), decide.bpf.h): while the LLC's queue holds
 * tasks, ask an idle CPU to come and take its head (kick_for_work with the
 * head's affinity).
 */
static void queue_tick(struct task_struct *cur)
{
	s32 llc = sis_cpu_llc(scx_bpf_task_cpu(cur));
	struct task_struct *p;
	u64 feat = features();

	if (llc < 0 || !tick_kicks(feat, scx_bpf_dsq_nr_queued(llc)))
		return;
	bpf_for_each(scx_dsq, p, llc, 0) {
		kick_for_work(llc, p, feat);
		break;
	}
}

/* ops.running and ops.quiescent: the task no longer counts as queued work (steal.bpf.h) */
static void queue_left(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tctx)
		queued_leave(&tctx->queued_in);
}

/* the steal's move (steal.bpf.h) over sched_ext's DSQs */
struct steal_env {
	u32 unused;
};

static __always_inline bool steal_move(struct steal_env *e, s32 llc)
{
	return scx_bpf_dsq_move_to_local(llc, 0);
}

/* Clear this CPU's kick-pending bit; true if it was set (woken for work). */
static bool take_kick(s32 cpu)
{
	u64 bit = 1ULL << ((u32)cpu % 64);
	u64 *word = &kick_pending[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)];

	if (!(READ_ONCE(*word) & bit))
		return false;
	__sync_fetch_and_and(word, ~bit);
	return true;
}

/*
 * ops.dispatch: this LLC's queue first; else prev goes on; else, unless
 * NEWIDLE_SKIP_IPI sends an idle CPU woken for no work back to idle, the
 * newidle balance analog steals from the other LLCs, nearest first, those
 * with queued work only (steal_search, steal.bpf.h).
 */
static void queue_dispatch(s32 cpu, struct task_struct *prev)
{
	s32 llc = sis_cpu_llc(cpu);
	bool kicked = take_kick(cpu);
	struct steal_env se = {};
	u32 tried = 0, walked = 0;

	if (llc < 0)
		return;
	if (scx_bpf_dsq_move_to_local(llc, 0)) {
		stat_inc(llc, STAT_DISPATCH_LLC);
		return;
	}
	/* nothing else to run here: let prev go on */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		prev->scx.slice = slice_ns;
		return;
	}

	/* NEWIDLE_SKIP_IPI's decision (decide.bpf.h) */
	if (newidle_skip_ipi(features(), cpu, kicked)) {
		stat_inc(llc, STAT_HIT_NEWIDLE_SKIP_IPI);
		return;
	}

	/* the newidle balance analog: other LLCs, nearest first; none queued anywhere, no walk */
	if (steal_search(&se, llc, &tried, &walked) >= 0)
		stat_inc(llc, STAT_STEAL);
}

/* ops.init: the kick search's LLC masks, one DSQ per LLC (id = LLC index) */
static s32 queue_init(void)
{
	s32 ret;
	u32 l;

	kick_llc_words_init();
	bpf_for(l, 0, topo.nr_llcs) {
		ret = scx_bpf_create_dsq(l, -1);
		if (ret) {
			scx_bpf_error("failed to create DSQ %u: %d", l, ret);
			return ret;
		}
	}
	return 0;
}
