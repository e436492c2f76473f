/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The CFS wake-up placement, step by step, as plain functions over a
 * topology (struct sis_topo) and a few primitives that the including object
 * supplies. main.bpf.c backs them with sched_ext's idle cpumasks; the host
 * test object (sis_test.bpf.c) backs them with a synthetic idle mask, so the
 * same code runs through the real verifier on a kernel without sched_ext and
 * is compared with a reference model (src/sis_model.rs).
 *
 * Order, top to bottom, as kernel/sched/fair.c (v6.12):
 *   select_task_rq_fair -> wake_affine -> wake_affine_idle / _weight
 *   -> select_idle_sibling -> select_idle_smt / select_idle_cpu
 *   -> select_idle_core / __select_idle_cpu
 *
 * The includer defines, before including this file:
 *   struct sis_topo topo             the topology (rodata in the scheduler)
 *   bool sis_idle(c, cpu)            available_idle_cpu(): a read, no claim
 *   bool sis_claim(c, cpu)           take an idle CPU (test_and_clear)
 *   bool sis_test_idle_cores(c, llc) / void sis_set_idle_cores(c, llc, v)
 *   s64  sis_depth_begin(c, target, has_idle_core)   nr for select_idle_cpu
 *   void sis_depth_end(c, has_idle_core)             SIS_PROP cost accounting
 */
#ifndef __SIS_BPF_H
#define __SIS_BPF_H

#include "sis_ctx.bpf.h"

/* Take an idle CPU (scx_bpf_test_and_clear_cpu_idle) and remember it. */
static __always_inline bool sis_take(struct sis_ctx *c, s32 cpu)
{
	if (!sis_claim(c, cpu))
		return false;
	c->claimed = cpu;
	return true;
}

/*
 * Counters, as Mel Gorman's SIS schedstats (seed 004's se_eff/dom_eff):
 * the fast checks of target, prev and recent_used_cpu are ONE scan,
 * counted once at entry of select_idle_sibling() (a hit there is 100%
 * efficiency), and the domain search starts after them, before the SMT
 * sibling check. Every CPU probed from then on (select_idle_smt,
 * select_idle_core's threads, __select_idle_cpu) is one scanned runqueue
 * and one domain-scanned runqueue, so domain_scanned == scanned - search.
 */

/* A fast-path check (target, prev, recent): already counted as one scan. */
static __always_inline bool sis_fast_claim(struct sis_ctx *c, s32 cpu)
{
	return sis_idle(c, cpu) && sis_take(c, cpu);
}

/* A CPU probed by the domain search: scanned and domain-scanned. */
static __always_inline bool sis_probe(struct sis_ctx *c, s32 cpu)
{
	sis_inc(c, STAT_SCANNED);
	sis_inc(c, STAT_DOMAIN_SCANNED);
	return sis_idle(c, cpu);
}

/* Probe in the domain search and, when idle, claim it. */
static __always_inline bool sis_probe_claim(struct sis_ctx *c, s32 cpu)
{
	return sis_probe(c, cpu) && sis_take(c, cpu);
}

static __always_inline void mask_set(u64 *mask, s32 cpu)
{
	if (cpu >= 0 && cpu < MAX_CPUS)
		mask[((u32)cpu / 64) & (MAX_CPUS / 64 - 1)] |= 1ULL << ((u32)cpu % 64);
}

/*
 * Row index into topo.cpu_smt for use INSIDE a bpf_for body. clang drops a
 * plain `cpu & (MAX_CPUS - 1)` when an earlier check already bounds cpu,
 * but the 6.12 verifier widens imprecise spilled scalars at iterator loop
 * heads, so the reload is unbounded there ("math between map_value pointer
 * and register with unbounded min value"). barrier_var() hides the range
 * from clang and the mask is emitted where the verifier needs it.
 */
static __always_inline u32 smt_row(s32 cpu)
{
	u32 row = cpu;

	barrier_var(row);
	return row & (MAX_CPUS - 1);
}

/*
 * select_idle_core() (fair.c): is every thread of @core's SMT mask idle?
 * On the way, remember the first idle allowed thread in *idle_cpu, as the
 * fallback of the whole scan. A busy core's threads are taken out of the
 * scan (cpumask_andnot(cpus, cpus, cpu_smt_mask(core))): @removed.
 */
static s32 select_idle_core(struct sis_ctx *c, s32 core, s32 *idle_cpu, u64 *removed)
{
	bool idle = true;
	u32 i, nr;

	if (core < 0 || core >= MAX_CPUS)
		return -1;
	nr = topo.cpu_nr_smt[core & (MAX_CPUS - 1)];
	if (nr > MAX_SMT)
		nr = MAX_SMT;

	bpf_for(i, 0, nr) {
		s32 cpu = topo.cpu_smt[smt_row(core)][i & (MAX_SMT - 1)];

		if (!sis_probe(c, cpu)) {
			idle = false;
			/* sched_idle_cpu() fallback is not modelled: no SCHED_IDLE rqs */
			if (*idle_cpu == -1)
				continue;
			break;
		}
		if (*idle_cpu == -1 && sis_allowed(c, cpu))
			*idle_cpu = cpu;
	}

	if (idle && sis_take(c, core))
		return core;

	bpf_for(i, 0, nr)
		mask_set(removed, topo.cpu_smt[smt_row(core)][i & (MAX_SMT - 1)]);
	return -1;
}

/*
 * select_idle_smt() (fair.c): the LLC has no idle core, so try an idle
 * sibling of @target (prev) before scanning the domain.
 */
static s32 select_idle_smt(struct sis_ctx *c, s32 target)
{
	u32 i, nr;

	if (target < 0 || target >= MAX_CPUS)
		return -1;
	nr = topo.cpu_nr_smt[target & (MAX_CPUS - 1)];
	if (nr > MAX_SMT)
		nr = MAX_SMT;

	bpf_for(i, 0, nr) {
		s32 cpu = topo.cpu_smt[smt_row(target)][i & (MAX_SMT - 1)];

		if (cpu == target || !sis_allowed(c, cpu) || !sis_share_cache(cpu, target))
			continue;
		if (sis_probe_claim(c, cpu))
			return cpu;
	}
	return -1;
}

/*
 * select_idle_cpu() (fair.c): scan the LLC of @target for an idle CPU,
 * wrapping from target + 1 (for_each_cpu_wrap), at most nr - 1 CPUs:
 *   SIS_UTIL  nr = sd_llc_shared->nr_idle_scan + 1; nr == 1 -> no scan at all
 *   SIS_PROP  nr = max(4, span_weight * wake_avg_idle / (avg_scan_cost + 1))
 *   neither   nr = INT_MAX
 * "because !--nr is the condition to stop scan" (seed 004). With an idle
 * core expected the scan looks for whole cores and is not bounded by nr.
 */
static s32 select_idle_cpu(struct sis_ctx *c, s32 target, bool has_idle_core)
{
	u64 removed[MAX_CPUS / 64] = {};
	s32 llc = sis_cpu_llc(target), idle_cpu = -1;
	u32 i, start, nr_cpus, pos;
	s64 nr;

	if (llc < 0 || llc >= MAX_LLCS)
		return -1;

	if (has_idle_core)
		sis_inc(c, STAT_CORE_SEARCH);

	c->depth_src = DEPTH_NONE;
	nr = sis_depth_begin(c, target, has_idle_core);
	if (nr == 1) {
		/* "overloaded LLC is unlikely to have idle cpu/core" */
		sis_inc(c, STAT_SCAN_SKIPPED);
		sis_inc(c, STAT_HIT_SIS_UTIL);
		return -1;
	}

	start = topo.llc_start[llc & (MAX_LLCS - 1)];
	nr_cpus = topo.llc_nr[llc & (MAX_LLCS - 1)];
	pos = topo.cpu_llc_pos[target & (MAX_CPUS - 1)];

	bpf_for(i, 0, nr_cpus) {
		u32 idx = pos + 1 + i;
		s32 cpu;

		if (idx >= nr_cpus)
			idx -= nr_cpus;
		idx += start;
		cpu = topo.llc_cpus[idx & (MAX_CPUS - 1)];

		/* cpus = sched_domain_span(sd) & p->cpus_ptr, minus busy cores */
		if (!sis_allowed(c, cpu) || mask_test(removed, cpu))
			continue;

		if (has_idle_core) {
			s32 core = select_idle_core(c, cpu, &idle_cpu, removed);

			if (core >= 0) {
				sis_inc(c, STAT_HIT_SIS_CORE);
				return core;
			}
		} else {
			if (--nr <= 0) {
				sis_inc(c, STAT_DEPTH_LIMITED);
				sis_inc(c, c->depth_src == DEPTH_SIS_PROP ?
					   STAT_HIT_SIS_PROP : STAT_HIT_SIS_UTIL);
				return -1;
			}
			/* __select_idle_cpu() */
			if (sis_probe_claim(c, cpu)) {
				idle_cpu = cpu;
				break;
			}
		}
	}

	if (has_idle_core) {
		sis_inc(c, STAT_CORE_FAILED);
		sis_set_idle_cores(c, llc, false);
		/* the fallback thread found on the way still has to be taken */
		if (idle_cpu >= 0 && !sis_take(c, idle_cpu))
			idle_cpu = -1;
	}

	sis_depth_end(c, has_idle_core);
	return idle_cpu;
}

/*
 * select_idle_sibling() (fair.c): the fast checks (target, prev,
 * recent_used_cpu), the SMT sibling of prev, then the LLC scan.
 * @recent_used_cpu points to the task's p->recent_used_cpu.
 */
static s32 select_idle_sibling(struct sis_ctx *c, s32 prev, s32 target, s32 *recent_used_cpu)
{
	bool has_idle_core = false;
	s32 i, llc, recent;

	sis_inc(c, STAT_SEARCH);
	/*
	 * "Checking if prev, target and recent is treated as one scan. A
	 * perfect hit on one of those is considered 100% efficiency."
	 */
	sis_inc(c, STAT_SCANNED);

	if (sis_allowed(c, target) && sis_fast_claim(c, target)) {
		sis_inc(c, STAT_FAST);
		return target;
	}

	/* "If the previous CPU is cache affine and idle, don't be stupid" */
	if (prev != target && sis_share_cache(prev, target) && sis_allowed(c, prev) &&
	    sis_fast_claim(c, prev)) {
		sis_inc(c, STAT_FAST);
		return prev;
	}

	/* "Check a recently used CPU as a potential idle candidate" */
	recent = *recent_used_cpu;
	*recent_used_cpu = prev;
	if (recent >= 0 && recent != prev && recent != target &&
	    sis_share_cache(recent, target) && sis_allowed(c, recent) &&
	    sis_fast_claim(c, recent)) {
		sis_inc(c, STAT_FAST);
		sis_inc(c, STAT_RECENT);
		return recent;
	}

	llc = sis_cpu_llc(target);
	if (llc < 0)
		return target;

	/* the fast checks failed: a domain search, the SMT sibling included */
	sis_inc(c, STAT_DOMAIN_SEARCH);

	/* sched_smt_active(): SIS_CORE off behaves as a kernel without SMT */
	if (topo.smt && sis_feat(c, FEAT_SIS_CORE)) {
		has_idle_core = sis_test_idle_cores(c, llc);
		if (!has_idle_core && sis_share_cache(prev, target)) {
			i = select_idle_smt(c, prev);
			if (i >= 0) {
				sis_inc(c, STAT_SMT);
				return i;
			}
		}
	}

	i = select_idle_cpu(c, target, has_idle_core);
	if (i >= 0)
		return i;

	sis_inc(c, STAT_FAILED);
	return target;
}

#endif /* __SIS_BPF_H */
