/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The seam: the interface every object that runs the scheduler's code plugs
 * into. It declares the machine's knobs and the primitives the decisions run
 * on (below, as prototypes), and holds the state of one wake-up decision, the
 * per-LLC and per-CPU state, the statistics and the small helpers every step
 * uses; sis.bpf.h holds the wake-up's steps, the other components theirs.
 *
 * One plug-in style, one order: an object includes this interface, then one
 * implementation of the prototypes, then the components that use them
 * (interface, implementation, users). The implementations:
 *   scx_prims.bpf.h       sched_ext's idle tracking, the kernel's runqueues and
 *                         DSQs, and the knobs as read-only data the loader sets
 *                         before load (the scheduler, main.bpf.c)
 *   tools/synth.bpf.h     a synthetic machine in .bss that a host program
 *                         rewrites between runs (the host test, placement-cost,
 *                         shadow's replay: they run this very code)
 * Both define the knobs through the one header they share, knobs.bpf.h.
 * No component includes an implementation, and no header here holds a switch
 * between them.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"

/*
 * The knobs, one value each for the whole run (knobs.bpf.h defines them once, with
 * their comments, for both implementations; the loader or the host program sets them):
 *   sis_topo()            the machine's topology: cpu -> LLC, each LLC's CPUs, SMT siblings,
 *                         the steal order (struct sis_topo, intf.h)
 *   sis_imbalance_pct()   imbalance_pct of the domains above SMT (wake_affine_weight())
 *   sis_shard_cpus()      LLC_SHARDS: CPUs per shard, before the raise to MAX_LLC_SHARDS
 *   sis_slice_ns()        the time slice a task runs before it is preempted
 *
 * The primitives:
 *   sis_idle_get(c)         the idle mask, fetched once per wake-up by select_task_rq_fair()
 *                           (or a harness calling the steps, or the kick) and passed down as
 *                           an argument to wake_affine() and select_idle_sibling(): the
 *                           verifier keeps the reference out of sis_ctx (a map value);
 *                           sis_idle_put(c, m) puts it. Opaque to the port (@c may be NULL):
 *                           synth.bpf.h returns NULL and reads its own synth_idle
 *   sis_idle(c, m, cpu)     available_idle_cpu(): a read of the fetched mask @m, no claim
 *   sis_claim(c, cpu)       take an idle CPU (test_and_clear)
 *   sis_nr_running(c, cpu)  cpu_rq(cpu)->nr_running
 *   sis_nr_delayed(c, cpu)  cfs_h_nr_delayed(cpu_rq(cpu)): fair tasks kept queued by
 *                           DELAY_DEQUEUE (6.12+), rq->cfs.h_nr_queued - h_nr_runnable
 *   sis_jiffies(c), sis_hz()                 jiffies, HZ
 *   sis_this_cpu()          the CPU running the program (bpf_get_smp_processor_id())
 *   calib_idle_words(c, dst, nr)             the first nr words of the idle mask
 *   sis_dsq_move(dsq)       move the head of DSQ @dsq (an LLC queue's shard, shard_dsq())
 *                           to this CPU: scx_bpf_dsq_move_to_local(); true when a task moved
 *   sis_dsq_nr(dsq)         the tasks queued in DSQ @dsq: scx_bpf_dsq_nr_queued()
 *   kick_idle_word(e, w)    word @w of the idle mask @e->idle (the kick's search, kick.bpf.h)
 *   kick_allowed_word(e, w) word @w of the task @e->p's cpus_ptr
 *   sis_kick_idle(cpu)      wake idle CPU @cpu to take work: scx_bpf_kick_cpu(SCX_KICK_IDLE)
 */
struct sis_ctx;

/* what the kick's search reads through its two primitives (synth.bpf.h: neither) */
struct kick_env {
	const struct cpumask *idle;
	const struct task_struct *p;
};

static __always_inline const volatile struct sis_topo *sis_topo(void);
static __always_inline u64 sis_imbalance_pct(void);
static __always_inline u32 sis_shard_cpus(void);
static __always_inline u64 sis_slice_ns(void);

static __always_inline const struct cpumask *sis_idle_get(struct sis_ctx *c);
static __always_inline void sis_idle_put(struct sis_ctx *c, const struct cpumask *idle_mask);
static __always_inline bool sis_idle(struct sis_ctx *c, const struct cpumask *idle_mask, s32 cpu);
static __always_inline bool sis_claim(struct sis_ctx *c, s32 cpu);
static __always_inline u32 sis_nr_running(struct sis_ctx *c, s32 cpu);
static __always_inline u32 sis_nr_delayed(struct sis_ctx *c, s32 cpu);
static __always_inline u64 sis_jiffies(struct sis_ctx *c);
static __always_inline u32 sis_hz(void);
static __always_inline s32 sis_this_cpu(void);
static __always_inline void calib_idle_words(struct sis_ctx *c, u64 *dst, u32 nr);
static __always_inline bool sis_dsq_move(u64 dsq);
static __always_inline u64 sis_dsq_nr(u64 dsq);
static __always_inline u64 kick_idle_word(struct kick_env *e, u32 w);
static __always_inline u64 kick_allowed_word(struct kick_env *e, u32 w);
static __always_inline void sis_kick_idle(s32 cpu);

/* the DSQ ids of the LLC queues' shards (sis_dsq_move(), sis_dsq_nr()) are below this (shards.bpf.h) */
#define SHARD_DSQ_END	(MAX_LLCS + MAX_LLCS * MAX_LLC_SHARDS)

/* per-LLC state (nr_idle_scan, has_idle_cores) and per-CPU state (idle_start, SIS_PROP, util) */
struct llc_ctx llc_ctxs[MAX_LLCS];
struct cpu_ctx cpu_ctxs[MAX_CPUS];

#define SIS_INT_MAX	0x7fffffffLL

/*
 * The wake-up bookkeeping fair.c keeps in task_struct: current->last_wakee,
 * ->wakee_flips, ->wakee_flip_decay_ts (record_wakee / wake_wide) and
 * p->recent_used_cpu. The scheduler keeps it in task storage (and, for the
 * idle task that wakes from interrupts, in cpu_ctx); the host test in .bss.
 */
struct sis_wake_state {
	s32 recent_used_cpu;
	s32 last_wakee;		/* an id of the last task woken (pid), -1 none */
	u32 wakee_flips;
	u32 __pad;
	u64 wakee_flip_decay_ts; /* jiffies */
};

/*
 * A task's load for wake_affine_weight() (task_load_update(), sis.bpf.h):
 * the PELT-like runnable average and the times it is updated from. The
 * scheduler keeps it in task storage (ctx.bpf.h), the host test in .bss.
 */
struct task_load {
	u64 avg;		/* task_h_load() */
	u64 runnable_at;	/* ops.runnable */
	u64 quiescent_at;	/* ops.quiescent, 0: never slept */
};

/* One wake-up's state: inputs, and the counters it produced. */
struct sis_ctx {
	u64 feat;
	s32 this_cpu;		/* smp_processor_id() of the waker */
	s32 prev;
	u32 depth_hit;		/* select_idle_cpu: the hit counter of the feature that set nr */
	s32 claimed;		/* the CPU this wake-up took from the idle mask, or -1 */
	s32 wakee_id;		/* p, as last_wakee records it */
	u32 pcpu_kthread;	/* is_per_cpu_kthread(current) && in_task() */
	u64 waker_load;		/* task_h_load(current) */
	u64 wakee_load;		/* task_h_load(p) */
	u64 allowed[MAX_CPUS / 64];	/* p->cpus_ptr */
	s32 calib_target;	/* calib.bpf.h: the scan's target, -1 no scan */
	s32 __calib_pad;
	s64 calib_nr;		/* calib.bpf.h: the scan's nr (depth + 1) */
	u32 calib_core;		/* calib.bpf.h: the scan looked for idle cores (not bounded by nr) */
	u32 stats_llc;		/* sis_stats' key the counters go to: the LLC the wake-up places in */
};

/*
 * Is feature @f (a FEAT_* bit of intf.h) on in the feature word @word: every
 * test of a feature bit, the analog of sched_feat(X), goes through it. It
 * returns the bit itself (non-zero when on), as the open-coded `word & f`
 * did, so the objects' machine code is what it was (a bool result moved
 * clang's code in ops.update_idle).
 */
static __always_inline u64 feat_on(u64 word, u64 f)
{
	return word & f;
}

/* feat_on() over this wake-up's feature word */
static __always_inline bool sis_feat(struct sis_ctx *c, u64 f)
{
	return feat_on(c->feat, f);
}

static __always_inline struct cpu_ctx *sis_cpu_ctx(s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return NULL;
	return &cpu_ctxs[cpu & (MAX_CPUS - 1)];
}

static __always_inline struct llc_ctx *sis_llc_ctx(s32 llc)
{
	u32 row = llc;

	if (llc < 0 || llc >= MAX_LLCS)
		return NULL;
	/*
	 * The mask stays in the code: clang drops it after the check and may
	 * index with a copy of llc the verifier does not tie to the checked
	 * one (shadow_replay's select_idle_sibling(): "R4 max value is outside
	 * of the allowed memory range"); as smt_row() (sis.bpf.h).
	 */
	barrier_var(row);
	return &llc_ctxs[row & (MAX_LLCS - 1)];
}

/* a CPU's word in a mask of MAX_CPUS bits, and its bit in that word */
static __always_inline u32 mask_word(s32 cpu)
{
	return ((u32)cpu / 64) & (MAX_CPUS / 64 - 1);
}

static __always_inline u64 mask_bit(s32 cpu)
{
	return 1ULL << ((u32)cpu % 64);
}

static __always_inline bool mask_test(const u64 *mask, s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return false;
	return mask[mask_word(cpu)] & mask_bit(cpu);
}

static __always_inline void mask_set(u64 *mask, s32 cpu)
{
	if (cpu >= 0 && cpu < MAX_CPUS)
		mask[mask_word(cpu)] |= mask_bit(cpu);
}

/* cpumask_test_cpu(cpu, p->cpus_ptr) */
static __always_inline bool sis_allowed(struct sis_ctx *c, s32 cpu)
{
	return mask_test(c->allowed, cpu);
}

static __always_inline s32 sis_cpu_llc(s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return -1;
	return sis_topo()->cpu_llc[cpu & (MAX_CPUS - 1)];
}

/*
 * The SIS statistics: enum sis_stat counters per LLC, per CPU (no shared
 * atomics on the hot paths); the loader sums each LLC's over the CPUs.
 * A wake-up's counters belong to the LLC of the CPU it is placed on.
 */
struct sis_counters {
	u64 cnt[STAT_NR];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_LLCS);
	__type(key, u32);
	__type(value, struct sis_counters);
} sis_stats SEC(".maps");

/*
 * This CPU's row of sis_stats for *@key, an LLC clamped to 0.. (no LLC: the
 * first row; past MAX_LLCS: NULL), the one lookup of the counters. The key
 * is passed by address, as the helper takes it: sis_inc() hands over the
 * context's own c->stats_llc with no copy to the stack.
 */
static __always_inline struct sis_counters *sis_stats_row(const u32 *key)
{
	return bpf_map_lookup_elem(&sis_stats, key);
}

/* this CPU's counters of @llc (-1: the first row's, as no LLC) */
static __always_inline struct sis_counters *llc_counters(s32 llc)
{
	u32 key = llc < 0 ? 0 : llc;

	return sis_stats_row(&key);
}

/*
 * Counted in place. The CPU a wake-up is placed on is in the LLC of the
 * target select_idle_sibling() searches from (target itself, prev and
 * recent_used_cpu sharing its cache, prev's SMT sibling, the scan of
 * target's LLC), and the target is prev unless wake_affine() picks this_cpu:
 * the caller points the counters at prev's LLC (sis_count_in(c, prev)) and
 * wake_affine() at this_cpu's before it counts its pick. So each counter is
 * added where the wake-up ends, once, with no per-wake-up block to clear and
 * add up. The per-CPU row is looked up at each increment (the context is a
 * map value and may not hold a pointer): an inlined array lookup, no helper
 * call (the verifier inlines PERCPU_ARRAY lookups since 6.10); the scan
 * loops add their probes once per loop (sis_add2()).
 */
static __always_inline void sis_count_in(struct sis_ctx *c, s32 cpu)
{
	s32 llc = sis_cpu_llc(cpu);

	c->stats_llc = llc < 0 ? 0 : llc;
}

/*
 * A wake-up's context before its decision (ops.select_cpu, wake.bpf.h; the host objects'
 * wake-ups, synth_wake_setup()): nothing claimed and no scan recorded yet. The context is
 * a per-CPU scratch that holds the last wake-up's.
 */
static __always_inline void sis_wake_fresh(struct sis_ctx *c)
{
	c->claimed = -1;
	c->calib_target = -1;
}

static __always_inline void sis_inc(struct sis_ctx *c, u32 stat)
{
	struct sis_counters *sc = sis_stats_row(&c->stats_llc);

	if (sc && stat < STAT_NR)
		sc->cnt[stat]++;
}

/*
 * @n to each of two counters, one lookup of the row: a scan loop counts its
 * probes in a local and adds them once after the loop (each CPU it visits
 * counts two), not a lookup per CPU.
 */
static __always_inline void sis_add2(struct sis_ctx *c, u32 a, u32 b, u32 n)
{
	struct sis_counters *sc = sis_stats_row(&c->stats_llc);

	if (!sc)
		return;
	if (a < STAT_NR)
		sc->cnt[a] += n;
	if (b < STAT_NR)
		sc->cnt[b] += n;
}

/*
 * @n to counter @stat of this CPU's row of @llc (-1: the first row): the
 * counters outside a wake-up (the queue, the kick), the one idiom beside the
 * wake-up's sis_inc() / sis_add2(), which count in the row sis_count_in() chose.
 */
static __always_inline void stat_add(s32 llc, u32 stat, u64 n)
{
	struct sis_counters *sc = llc_counters(llc);

	if (sc && stat < STAT_NR)
		sc->cnt[stat] += n;
}

static __always_inline void stat_inc(s32 llc, u32 stat)
{
	stat_add(llc, stat, 1);
}

/* cpus_share_cache() */
static __always_inline bool sis_share_cache(s32 a, s32 b)
{
	s32 la = sis_cpu_llc(a);

	return la >= 0 && la == sis_cpu_llc(b);
}
