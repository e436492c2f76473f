/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The seam's implementation over a synthetic machine (the interface:
 * sis_ctx.bpf.h; the scheduler's: scx_prims.bpf.h), for the host objects
 * that run the scheduler's own code without sched_ext: the differential and
 * decision tests (testing/sis_test.bpf.c), the placement-cost benchmark
 * (cost.bpf.c) and shadow's replay (shadow_replay.bpf.c). The caller writes
 * the machine through the skeleton's .bss (topo, the knobs, llc_ctxs,
 * cpu_ctxs, nr_running, synth_idle, synth_dsq_nr, synth_allowed) or through a
 * program's argument (synth_wake_setup(): tool_intf.h's struct sis_test_args).
 *
 * Time is synthetic (synth_jiffies, synth_hz) unless synth_real_time is
 * set: then jiffies are the host's and HZ is 250. (SIS_PROP's scan cost is
 * counted in probes, not read from a clock: sis_prop_account().)
 *
 * The counters are the scheduler's, counted in place into this CPU's rows of
 * sis_stats (sis_ctx.bpf.h); synth_stats_clear() and synth_stats_take() read
 * them around one run.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"
#include "sis_ctx.bpf.h"
#include "knobs.bpf.h"
#include "tool_intf.h"

/* ---- the knobs: the scheduler's (knobs.bpf.h), writable between runs ---- */

SIS_KNOBS()

/* ---- the primitives ---- */

u32 nr_running[MAX_CPUS];
/* cfs_h_nr_delayed() per CPU (the shadow replay: the kernel's; else 0) */
u32 nr_delayed[MAX_CPUS];
/* the idle mask */
u64 synth_idle[MAX_CPUS / 64];
u64 synth_jiffies;
u32 synth_hz, synth_real_time;

/* the synthetic idle mask is synth_idle itself: nothing to fetch or put */
static __always_inline const struct cpumask *sis_idle_get(struct sis_ctx *c)
{
	return NULL;
}

static __always_inline void sis_idle_put(struct sis_ctx *c, const struct cpumask *idle_mask)
{
}

static __always_inline bool sis_idle(struct sis_ctx *c, const struct cpumask *idle_mask, s32 cpu)
{
	return mask_test(synth_idle, cpu);
}

static __always_inline bool sis_claim(struct sis_ctx *c, s32 cpu)
{
	if (!mask_test(synth_idle, cpu))
		return false;
	synth_idle[mask_word(cpu)] &= ~mask_bit(cpu);
	return true;
}

static __always_inline u32 sis_nr_running(struct sis_ctx *c, s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return 0;
	return nr_running[cpu & (MAX_CPUS - 1)];
}

static __always_inline u32 sis_nr_delayed(struct sis_ctx *c, s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return 0;
	return nr_delayed[cpu & (MAX_CPUS - 1)];
}

static __always_inline u64 sis_jiffies(struct sis_ctx *c)
{
	return synth_real_time ? bpf_jiffies64() : synth_jiffies;
}

static __always_inline u32 sis_hz(void)
{
	return synth_real_time ? 250 : synth_hz;
}

/* the CPU the program runs on, as the test sets it */
s32 synth_this_cpu;

static __always_inline s32 sis_this_cpu(void)
{
	return synth_this_cpu;
}

/* the idle mask's words, for the depth calibration */
static __always_inline void calib_idle_words(struct sis_ctx *c, u64 *dst, u32 nr)
{
	__builtin_memcpy(dst, synth_idle, sizeof(synth_idle));
}

/*
 * The LLC queues' DSQs (sis_dsq_move(); the shards' ids, shard_dsq()):
 * synth_dsq_nr[id] tasks in DSQ id, a move takes one. Every move tried is
 * counted in synth_dsq_nr_tried and the first MAX_LLCS are logged, in
 * order, in synth_dsq_tried.
 */
u32 synth_dsq_nr[SHARD_DSQ_END];
u64 synth_dsq_tried[MAX_LLCS];
u32 synth_dsq_nr_tried;

static __always_inline u64 sis_dsq_nr(u64 dsq)
{
	u64 id = dsq;

	barrier_var(id);
	return id < SHARD_DSQ_END ? synth_dsq_nr[id] : 0;
}

static __always_inline bool sis_dsq_move(u64 dsq)
{
	u32 i = synth_dsq_nr_tried++;
	u64 id = dsq;

	if (i < MAX_LLCS)
		synth_dsq_tried[i] = dsq;
	/* the bound tested on the register that indexes (not on a copy of it) */
	barrier_var(id);
	if (id >= SHARD_DSQ_END || !synth_dsq_nr[id])
		return false;
	synth_dsq_nr[id]--;
	return true;
}

/*
 * The kick's search over the synthetic idle mask and the task's allowed
 * mask synth_allowed (the kick_env is not read); each idle word read counted
 * in synth_kick_word_tests. A kick (sis_kick_idle()) sets the CPU's bit in
 * synth_kicked.
 */
u64 synth_allowed[MAX_CPUS / 64];
u64 synth_kicked[MAX_CPUS / 64];
u64 synth_kick_word_tests;

static __always_inline u64 kick_idle_word(struct kick_env *e, u32 w)
{
	synth_kick_word_tests++;
	return synth_idle[w & (MAX_CPUS / 64 - 1)];
}

static __always_inline u64 kick_allowed_word(struct kick_env *e, u32 w)
{
	return synth_allowed[w & (MAX_CPUS / 64 - 1)];
}

static __always_inline void sis_kick_idle(s32 cpu)
{
	mask_set(synth_kicked, cpu);
}

/*
 * The rows of sis_stats a run clears and takes: all of them (a host test sees a
 * count in any row), or the replay's topology's LLCs (src/tools/shadow.rs sets
 * it: a wake-up's key is an LLC of the topology, and the loops over every row
 * were most of a replayed wake-up's cost)
 */
u32 synth_stats_rows = MAX_LLCS;

/* every row of sis_stats (this CPU's) cleared, before a run */
static __always_inline void synth_stats_clear(void)
{
	u32 l;

	bpf_for(l, 0, synth_stats_rows) {
		struct sis_counters *sc = sis_stats_row(&l);

		if (sc)
			__builtin_memset(sc->cnt, 0, sizeof(sc->cnt));
	}
}

/*
 * After a run: LLC @llc's row (-1: the first) added into @row, every other
 * row into @others (both may be the same array: the run's sum)
 */
static __always_inline void synth_stats_take(s32 llc, u64 *row, u64 *others)
{
	u32 l, i, key = llc < 0 ? 0 : llc;

	bpf_for(l, 0, synth_stats_rows) {
		struct sis_counters *sc = sis_stats_row(&l);
		u64 *dst = l == key ? row : others;

		if (!sc)
			continue;
		for (i = 0; i < STAT_NR; i++)
			dst[i] += sc->cnt[i];
	}
}

/*
 * One wake-up's state from a host test's or a replay's arguments: the machine
 * (idle mask, knobs, clocks), the wake-up's context and the waker's and
 * wakee's wake state. The program context may only be read at constant
 * offsets ("dereference of modified ctx ptr"): whole-array copies, which clang
 * emits as fixed-offset loads, instead of an indexed loop.
 */
static __always_inline void synth_wake_setup(struct sis_test_args *a, struct sis_ctx *c,
					     struct sis_wake_state *waker,
					     struct sis_wake_state *wakee)
{
	__builtin_memcpy(synth_idle, a->idle, sizeof(synth_idle));
	__builtin_memcpy(c->allowed, a->allowed, sizeof(c->allowed));
	synth_stats_clear();
	c->feat = a->features;
	c->this_cpu = a->this_cpu;
	c->prev = a->prev;
	sis_count_in(c, a->prev);
	sis_wake_fresh(c);
	c->wakee_id = a->wakee_id;
	c->pcpu_kthread = a->pcpu_kthread;
	c->waker_load = a->waker_load;
	c->wakee_load = a->wakee_load;
	imbalance_pct = a->imbalance_pct;
	synth_jiffies = a->jiffies;
	synth_hz = a->hz;
	waker->last_wakee = a->waker_last_wakee;
	waker->wakee_flips = a->waker_flips;
	waker->wakee_flip_decay_ts = a->waker_decay_ts;
	wakee->recent_used_cpu = a->recent;
	wakee->wakee_flips = a->wakee_flips;
}
