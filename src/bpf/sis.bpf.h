/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The CFS wake-up placement, step by step, as kernel/sched/fair.c does it
 * (v6.12; SIS_PROP from v6.6), one function per step, top to bottom:
 *
 *   select_task_rq_fair
 *     record_wakee, wake_wide
 *     wake_affine -> wake_affine_idle [WA_IDLE_PREV], wake_affine_weight [WA_WEIGHT]
 *     select_idle_sibling
 *       target / prev / per-CPU kthread / recent_used_cpu
 *       select_idle_smt [SIS_CORE]
 *       select_idle_cpu: depth sis_prop_nr [SIS_PROP] then SIS_UTIL's nr_idle_scan
 *         select_idle_core [SIS_CORE] / __select_idle_cpu
 *   update_idle_core (the has_idle_cores hint, from the idle transitions)
 *
 * The machine it reads (topology, per-LLC and per-CPU state) and the
 * primitives it runs on (idle test and claim, nr_running, clocks) are
 * declared in sis_ctx.bpf.h; the caller fills struct sis_ctx with the
 * waker's CPU, p's cpus_ptr, the two tasks' loads and whether current is a
 * per-CPU kthread. wake.bpf.h backs the primitives with sched_ext,
 * synth.bpf.h with synthetic state: the host test runs this very code.
 * select_idle_cpu() calls the depth calibration hook sis_calib()
 * (calib.bpf.h).
 */
#pragma once

#include "sis_ctx.bpf.h"
#include "calib.bpf.h"

/* Take an idle CPU (scx_bpf_test_and_clear_cpu_idle) and remember it. */
static __always_inline bool sis_take(struct sis_ctx *c, s32 cpu)
{
	if (!sis_claim(c, cpu))
		return false;
	c->claimed = cpu;
	return true;
}

/*
 * Counters, as Mel Gorman's SIS schedstats (se_eff/dom_eff, quoted in the SIS_UTIL thread):
 * the fast checks of target, prev and recent_used_cpu are ONE scan,
 * counted once at entry of select_idle_sibling() (a hit there is 100%
 * efficiency), and the domain search starts after them, before the SMT
 * sibling check. Every CPU visited from then on (each CPU of
 * select_idle_smt()'s loop, select_idle_core()'s threads,
 * __select_idle_cpu()) is one scanned runqueue and one domain-scanned
 * runqueue, so domain_scanned == scanned - search. Each loop counts its
 * CPUs in a local and adds them once when it ends, on every way out.
 */

/* A fast-path check (target, prev, recent): already counted as one scan. */
static __always_inline bool sis_fast_claim(struct sis_ctx *c, const struct cpumask *idle_mask,
					   s32 cpu)
{
	return sis_idle(c, idle_mask, cpu) && sis_take(c, cpu);
}

/* @n CPUs visited by the domain search: scanned and domain-scanned. */
static __always_inline void sis_count_scans(struct sis_ctx *c, u32 n)
{
	sis_add2(c, STAT_SCANNED, STAT_DOMAIN_SCANNED, n);
}

/* Probe in the domain search: counted in *@probes, then available_idle_cpu(). */
static __always_inline bool sis_probe(struct sis_ctx *c, const struct cpumask *idle_mask, s32 cpu,
				      u32 *probes)
{
	(*probes)++;
	return sis_idle(c, idle_mask, cpu);
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

static __always_inline u32 smt_nr(s32 cpu)
{
	u32 nr = sis_topo()->cpu_nr_smt[cpu & (MAX_CPUS - 1)];

	return nr > MAX_SMT ? MAX_SMT : nr;
}

/* the @i-th thread of @cpu's core: for_each_cpu(sib, cpu_smt_mask(cpu)), i < smt_nr(cpu) */
static __always_inline s32 smt_sibling(s32 cpu, u32 i)
{
	return sis_topo()->cpu_smt[smt_row(cpu)][i & (MAX_SMT - 1)];
}

/* Are @a and @b threads of one core (a domain with SD_SHARE_CPUCAPACITY)? */
static bool sis_smt_siblings(s32 a, s32 b)
{
	u32 i, nr;

	if (a < 0 || a >= MAX_CPUS)
		return false;
	nr = smt_nr(a);
	bpf_for(i, 0, nr) {
		if (smt_sibling(a, i) == b)
			return true;
	}
	return false;
}

/* ---- has_idle_cores: test_idle_cores / set_idle_cores / __update_idle_core ---- */

static __always_inline bool test_idle_cores(s32 llc)
{
	struct llc_ctx *lc = sis_llc_ctx(llc);

	return lc && READ_ONCE(lc->has_idle_cores);
}

/* set_idle_cores() (fair.c): an unconditional WRITE_ONCE */
static __always_inline void set_idle_cores(s32 llc, bool val)
{
	struct llc_ctx *lc = sis_llc_ctx(llc);

	if (lc)
		WRITE_ONCE(lc->has_idle_cores, val);
}

/*
 * __update_idle_core() (fair.c), run when @cpu goes idle: if every other
 * thread of its core is idle too, the LLC has an idle core. "Idle" is the
 * scheduler's own view (cpu_ctx idle_start, kept by ops.update_idle), so
 * the hint does not depend on when sched_ext updates its idle masks.
 */
static __attribute__((unused)) void update_idle_core(u64 feat, s32 cpu)
{
	struct cpu_ctx *sc;
	u32 i, nr;
	s32 sib;

	if (cpu < 0 || cpu >= MAX_CPUS || !sis_topo()->smt || !feat_on(feat, FEAT_SIS_CORE))
		return;
	if (test_idle_cores(sis_cpu_llc(cpu)))
		return;
	nr = smt_nr(cpu);
	bpf_for(i, 0, nr) {
		sib = smt_sibling(cpu, i);
		if (sib == cpu)
			continue;
		sc = sis_cpu_ctx(sib);
		if (!sc || !READ_ONCE(sc->idle_start))
			return;
	}
	set_idle_cores(sis_cpu_llc(cpu), true);
}

/* ---- select_idle_sibling() and below ---- */

/*
 * select_idle_core() (fair.c): is every thread of @core's SMT mask idle?
 * On the way, remember the first idle allowed thread in *idle_cpu, as the
 * fallback of the whole scan. A busy core's threads are taken out of the
 * scan (cpumask_andnot(cpus, cpus, cpu_smt_mask(core))): @removed.
 */
static s32 select_idle_core(struct sis_ctx *c, const struct cpumask *idle_mask, s32 core,
			    s32 *idle_cpu, u64 *removed)
{
	bool idle = true;
	u32 i, nr, probes = 0;

	if (core < 0 || core >= MAX_CPUS)
		return -1;
	nr = smt_nr(core);

	bpf_for(i, 0, nr) {
		s32 cpu = smt_sibling(core, i);

		if (!sis_probe(c, idle_mask, cpu, &probes)) {
			idle = false;
			/* sched_idle_cpu() fallback is not modelled: no SCHED_IDLE rqs */
			if (*idle_cpu == -1)
				continue;
			break;
		}
		if (*idle_cpu == -1 && sis_allowed(c, cpu))
			*idle_cpu = cpu;
	}
	sis_count_scans(c, probes);

	if (idle && sis_take(c, core))
		return core;

	bpf_for(i, 0, nr)
		mask_set(removed, smt_sibling(core, i));
	return -1;
}

/*
 * select_idle_smt() (fair.c): the LLC has no idle core, so try an idle
 * sibling of @target (prev) before scanning the domain:
 *   for_each_cpu_and(cpu, cpu_smt_mask(target), p->cpus_ptr)
 * Every CPU of that loop is counted, at the top of the loop body, as the
 * schedstat patch counts (target itself included).
 */
static s32 select_idle_smt(struct sis_ctx *c, const struct cpumask *idle_mask, s32 target)
{
	u32 i, nr, scanned = 0;
	s32 found = -1;

	if (target < 0 || target >= MAX_CPUS)
		return -1;
	nr = smt_nr(target);

	bpf_for(i, 0, nr) {
		s32 cpu = smt_sibling(target, i);

		if (!sis_allowed(c, cpu))
			continue;
		scanned++;
		if (cpu == target)
			continue;
		/* isolcpus: a sibling may be outside the LLC domain */
		if (!sis_share_cache(cpu, target))
			continue;
		if (sis_idle(c, idle_mask, cpu) && sis_take(c, cpu)) {
			found = cpu;	/* return cpu */
			break;
		}
	}
	sis_count_scans(c, scanned);
	return found;
}

/* update_avg() (fair.c): avg += (sample - avg) / 8 */
static __always_inline void update_avg(u64 *avg, u64 sample)
{
	s64 diff = (s64)(sample - *avg);

	*avg += diff / 8;
}

/*
 * SIS_PROP (v6.6 select_idle_cpu(), removed in v6.7): scan in proportion
 * to how long this CPU expects to stay idle, against what a scan costs:
 *   if (this_rq->wake_stamp < now)       age the prediction: each jiffy
 *     while (wake_stamp < now && wake_avg_idle) { wake_stamp++; wake_avg_idle >>= 1; }
 *   span_avg = sd->span_weight * wake_avg_idle
 *   nr = span_avg > 4 * avg_cost ? span_avg / avg_cost : 4,  avg_cost = avg_scan_cost + 1
 * wake_stamp is not set to now after the loop (it is refreshed when the CPU
 * leaves idle, sis_prop_idle_exit()). avg_scan_cost is this CPU's sd_llc's.
 */
static s64 sis_prop_nr(struct sis_ctx *c, s32 llc)
{
	struct cpu_ctx *this = sis_cpu_ctx(c->this_cpu);
	u64 now = sis_jiffies(c), avg_cost, span_avg;
	u32 i;

	if (!this || sis_cpu_llc(c->this_cpu) < 0 || llc < 0 || llc >= MAX_LLCS)
		return -1;	/* !this_sd */

	if (this->wake_stamp < now) {
		/* a u64 is 0 after 64 halvings: the bound ends nothing early */
		bpf_for(i, 0, 65) {
			if (this->wake_stamp >= now || !this->wake_avg_idle)
				break;
			this->wake_stamp++;
			this->wake_avg_idle >>= 1;
		}
	}

	avg_cost = this->avg_scan_cost + 1;
	span_avg = (u64)sis_topo()->llc_nr[llc & (MAX_LLCS - 1)] * this->wake_avg_idle;
	if (span_avg > SIS_PROP_MIN_NR * avg_cost)
		return span_avg / avg_cost;
	return SIS_PROP_MIN_NR;
}

/*
 * SIS_PROP's accounting after a scan that was not cut by !--nr: "Account
 * for the scan cost of wakeups against the average idle time."
 *   time = cpu_clock(this) - time
 *   wake_avg_idle -= min(wake_avg_idle, time); update_avg(&avg_scan_cost, time)
 * In kernel units: time is @probes __select_idle_cpu() calls at
 * SIS_PROP_PROBE_NS each (intf.h), not this BPF scan's own clock, which under
 * emulation and with sched_ext's kfuncs per probe is many times the kernel's.
 */
static void sis_prop_account(struct sis_ctx *c, u32 probes)
{
	struct cpu_ctx *this = sis_cpu_ctx(c->this_cpu);
	u64 time = (u64)probes * SIS_PROP_PROBE_NS;

	if (!this)
		return;
	this->wake_avg_idle -= this->wake_avg_idle < time ? this->wake_avg_idle : time;
	update_avg(&this->avg_scan_cost, time);
}

/*
 * sched_init() (v6.6), a CPU's SIS_PROP state before its first idle period:
 *   rq->avg_idle = 2*sysctl_sched_migration_cost;
 *   rq->max_idle_balance_cost = sysctl_sched_migration_cost;
 *   rq->wake_stamp = jiffies; rq->wake_avg_idle = rq->avg_idle;
 * (sysctl_sched_migration_cost: SIS_PROP_MAX_IDLE_BALANCE_COST, intf.h)
 */
static __always_inline void sis_prop_init(struct cpu_ctx *cc, u64 jiffies)
{
	cc->max_idle_balance_cost = SIS_PROP_MAX_IDLE_BALANCE_COST;
	cc->avg_idle = 2 * SIS_PROP_MAX_IDLE_BALANCE_COST;
	cc->wake_avg_idle = cc->avg_idle;
	cc->wake_stamp = jiffies;
}

/*
 * ttwu_do_activate() (v6.6) when the CPU leaves idle (rq->idle_stamp set):
 *   update_avg(&avg_idle, now - idle_stamp); avg_idle <= 2 * max_idle_balance_cost
 *   wake_stamp = jiffies; wake_avg_idle = avg_idle / 2
 */
static __attribute__((unused)) void sis_prop_idle_exit(struct cpu_ctx *cc, u64 idle_delta, u64 jiffies)
{
	u64 max = 2 * cc->max_idle_balance_cost;

	update_avg(&cc->avg_idle, idle_delta);
	if (cc->avg_idle > max)
		cc->avg_idle = max;
	cc->wake_stamp = jiffies;
	cc->wake_avg_idle = cc->avg_idle / 2;
}

/*
 * SIS_UTIL: Chen Yu, "sched/fair: Introduce SIS_UTIL to search idle CPU
 * based on sum of util_avg" (commit 70fb5ccf2ebb). The depth is computed
 * from the LLC's utilization by update_idle_cpu_scan() (the loader,
 * sis_util_depth.rs):
 *   nr_idle_scan = llc_weight * (1 - (x * pct)^2),
 *   x = sum_util / (llc_weight * 1024), pct = imbalance_pct / 100
 * (0 from x = 1 / pct: 85 % for 117; the integer form is there)
 * and select_idle_cpu() reads it: "nr = READ_ONCE(sd_share->nr_idle_scan)
 * + 1" - "because !--nr is the condition to stop scan"; nr == 1: no scan.
 */
static __always_inline s64 sis_util_nr(struct llc_ctx *lc)
{
	return READ_ONCE(lc->nr_idle_scan) + 1;
}

/*
 * select_idle_cpu() (fair.c): scan the LLC of @target for an idle CPU,
 * wrapping from target + 1 (for_each_cpu_wrap):
 *   SIS_PROP  nr = sis_prop_nr() (not with an idle core expected)
 *   SIS_UTIL  nr = sd_llc_shared->nr_idle_scan + 1; nr == 1 -> no scan at all
 *   neither   nr = INT_MAX
 * "because !--nr is the condition to stop scan" (SIS_UTIL). With an idle
 * core expected the scan looks for whole cores and is not bounded by nr.
 */
static s32 select_idle_cpu(struct sis_ctx *c, const struct cpumask *idle_mask, s32 target,
			   bool has_idle_core)
{
	u64 removed[MAX_CPUS / 64] = {};
	s32 llc = sis_cpu_llc(target), idle_cpu = -1;
	struct llc_ctx *lc = sis_llc_ctx(llc);
	bool prop = false;
	u32 i, start, nr_cpus, pos, probes = 0;
	s64 nr = SIS_INT_MAX;

	if (!lc)
		return -1;

	if (has_idle_core)
		sis_inc(c, STAT_CORE_SEARCH);

	c->depth_hit = STAT_NR;		/* none: nothing to count */
	if (sis_feat(c, FEAT_SIS_PROP) && !has_idle_core) {
		nr = sis_prop_nr(c, llc);
		if (nr < 0)
			return -1;
		prop = true;
		c->depth_hit = STAT_HIT_SIS_PROP;
	}
	if (sis_feat(c, FEAT_SIS_UTIL)) {
		nr = sis_util_nr(lc);
		c->depth_hit = STAT_HIT_SIS_UTIL;
		if (nr == 1) {
			sis_calib(c, target, nr, has_idle_core);
			/* "overloaded LLC is unlikely to have idle cpu/core" */
			sis_inc(c, STAT_SCAN_SKIPPED);
			sis_inc(c, STAT_HIT_SIS_UTIL);
			return -1;
		}
	}
	sis_calib(c, target, nr, has_idle_core);

	start = sis_topo()->llc_start[llc & (MAX_LLCS - 1)];
	nr_cpus = sis_topo()->llc_nr[llc & (MAX_LLCS - 1)];
	pos = sis_topo()->cpu_llc_pos[target & (MAX_CPUS - 1)];

	bpf_for(i, 0, nr_cpus) {
		u32 idx = pos + 1 + i;
		s32 cpu;

		if (idx >= nr_cpus)
			idx -= nr_cpus;
		idx += start;
		cpu = sis_topo()->llc_cpus[idx & (MAX_CPUS - 1)];

		/* cpus = sched_domain_span(sd) & p->cpus_ptr, minus busy cores */
		if (!sis_allowed(c, cpu) || mask_test(removed, cpu))
			continue;

		if (has_idle_core) {
			s32 core = select_idle_core(c, idle_mask, cpu, &idle_cpu, removed);

			if (core >= 0) {
				sis_inc(c, STAT_HIT_SIS_CORE);
				return core;
			}
		} else {
			if (--nr <= 0) {
				sis_count_scans(c, probes);
				sis_inc(c, STAT_DEPTH_LIMITED);
				sis_inc(c, c->depth_hit);
				return -1;
			}
			/* __select_idle_cpu() */
			if (sis_probe(c, idle_mask, cpu, &probes) && sis_take(c, cpu)) {
				idle_cpu = cpu;
				break;
			}
		}
	}
	sis_count_scans(c, probes);	/* select_idle_core() counts its own */

	if (has_idle_core) {
		sis_inc(c, STAT_CORE_FAILED);
		set_idle_cores(llc, false);
		/* the fallback thread found on the way still has to be taken */
		if (idle_cpu >= 0 && !sis_take(c, idle_cpu))
			idle_cpu = -1;
	}

	if (prop)
		sis_prop_account(c, probes);
	return idle_cpu;
}

/*
 * select_idle_sibling() (fair.c): the fast checks (target, prev, the
 * per-CPU kthread stacking, recent_used_cpu), the SMT sibling of prev,
 * then the LLC scan. @recent_used_cpu points to p->recent_used_cpu.
 * @idle_mask is the wake-up's idle mask, fetched and put by the caller
 * (select_task_rq_fair()).
 */
static s32 select_idle_sibling(struct sis_ctx *c, const struct cpumask *idle_mask, s32 prev,
			       s32 target, s32 *recent_used_cpu)
{
	bool has_idle_core = false;
	s32 i, llc, recent;

	sis_inc(c, STAT_SEARCH);
	/*
	 * "Checking if prev, target and recent is treated as one scan. A
	 * perfect hit on one of those is considered 100% efficiency."
	 */
	sis_inc(c, STAT_SCANNED);

	if (sis_allowed(c, target) && sis_fast_claim(c, idle_mask, target)) {
		sis_inc(c, STAT_FAST);
		return target;
	}

	/* "If the previous CPU is cache affine and idle, don't be stupid" */
	if (prev != target && sis_share_cache(prev, target) && sis_allowed(c, prev) &&
	    sis_fast_claim(c, idle_mask, prev)) {
		sis_inc(c, STAT_FAST);
		return prev;
	}

	/*
	 * "Allow a per-cpu kthread to stack with the wakee if the kworker
	 * thread and the tasks previous CPUs are the same. [...] An obvious
	 * example of this pattern is IO completions."
	 *   is_per_cpu_kthread(current) && in_task() && prev == smp_processor_id()
	 *   && this_rq()->nr_running <= 1
	 */
	if (c->pcpu_kthread && prev == c->this_cpu &&
	    sis_nr_running(c, c->this_cpu) <= 1 && sis_allowed(c, prev)) {
		sis_inc(c, STAT_FAST);
		return prev;
	}

	/* "Check a recently used CPU as a potential idle candidate" */
	recent = *recent_used_cpu;
	*recent_used_cpu = prev;
	if (recent >= 0 && recent != prev && recent != target &&
	    sis_share_cache(recent, target) && sis_allowed(c, recent) &&
	    sis_fast_claim(c, idle_mask, recent)) {
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
	if (sis_topo()->smt && sis_feat(c, FEAT_SIS_CORE)) {
		has_idle_core = test_idle_cores(llc);
		if (!has_idle_core && sis_share_cache(prev, target)) {
			i = select_idle_smt(c, idle_mask, prev);
			if (i >= 0) {
				sis_inc(c, STAT_SMT);
				return i;
			}
		}
	}

	i = select_idle_cpu(c, idle_mask, target, has_idle_core);
	if (i >= 0)
		return i;

	sis_inc(c, STAT_FAILED);
	return target;
}

/* ---- select_task_rq_fair() and the wake_affine steps ---- */

/*
 * record_wakee() (fair.c), on current (the waker): "Only decay a single
 * time; tasks that have less then 1 wakeup per jiffy will not have built up
 * many flips."
 */
static void record_wakee(struct sis_ctx *c, struct sis_wake_state *waker)
{
	u64 now = sis_jiffies(c);

	/* time_after(jiffies, current->wakee_flip_decay_ts + HZ) */
	if ((s64)(waker->wakee_flip_decay_ts + sis_hz() - now) < 0) {
		waker->wakee_flips >>= 1;
		waker->wakee_flip_decay_ts = now;
	}
	if (waker->last_wakee != c->wakee_id) {
		waker->last_wakee = c->wakee_id;
		waker->wakee_flips++;
	}
}

/*
 * wake_wide() (fair.c): a waker that flips between many wakees, or a wakee
 * woken by many, should not be pulled to the waker. factor = sd_llc_size of
 * this CPU.
 */
static bool wake_wide(struct sis_ctx *c, struct sis_wake_state *waker,
		      struct sis_wake_state *wakee)
{
	u32 master = waker->wakee_flips, slave = wakee->wakee_flips, tmp;
	s32 llc = sis_cpu_llc(c->this_cpu);
	u32 factor = llc >= 0 ? sis_topo()->llc_nr[llc & (MAX_LLCS - 1)] : 1;

	if (master < slave) {
		tmp = master;
		master = slave;
		slave = tmp;
	}
	if (slave < factor || master < slave * factor)
		return false;
	return true;
}

/*
 * wake_affine_idle() (fair.c) with Julia Lawall's "sched/fair:
 * check for idle core" (2020) as WA_IDLE_PREV: after the interrupt and sync
 * cases, an idle prev_cpu wins. Returns -1 for nr_cpumask_bits.
 */
static s32 wake_affine_idle(struct sis_ctx *c, const struct cpumask *idle_mask, s32 this_cpu,
			    s32 prev, bool sync)
{
	/*
	 * "If this_cpu is idle, it implies the wakeup is from interrupt
	 * context. Only allow the move if cache is shared."
	 */
	if (sis_idle(c, idle_mask, this_cpu) && sis_share_cache(this_cpu, prev))
		return sis_idle(c, idle_mask, prev) ? prev : this_cpu;

	/*
	 * "if (sync) { rq = cpu_rq(this_cpu); if ((rq->nr_running - cfs_h_nr_delayed(rq)) == 1)
	 * return this_cpu; }": only the waker runs here. cfs_h_nr_delayed() (rq->cfs.h_nr_queued -
	 * rq->cfs.h_nr_runnable) discounts tasks DELAY_DEQUEUE keeps queued after they slept
	 * (a fix of 2025 that added cfs_h_nr_delayed(), carried by stable trees too); before
	 * it the test was nr_running == 1. 0 under sched_ext (wake.bpf.h).
	 */
	if (sync && sis_nr_running(c, this_cpu) - sis_nr_delayed(c, this_cpu) == 1)
		return this_cpu;

	if (sis_feat(c, FEAT_WA_IDLE_PREV) && sis_idle(c, idle_mask, prev)) {
		sis_inc(c, STAT_HIT_WA_IDLE_PREV);
		return prev;
	}
	return -1;
}

/*
 * wake_affine_weight() (fair.c). cpu_load() is the loader's per-CPU
 * utilization (cpu_ctx util, 0..1024), task_h_load() the scheduler's
 * PELT-like runnable average of the task (see task_load_update() in wake.bpf.h).
 * capacity_of() is SCHED_CAPACITY on both sides (no asymmetric capacity),
 * imbalance_pct that of the lowest domain spanning both CPUs (110 for SMT
 * siblings, else 117).
 *   this_eff = (load(this) [- load(current) if sync] + load(p)) * 100 * cap(prev)
 *   prev_eff = (load(prev) - load(p)) * (100 + (imbalance_pct - 100) / 2) * cap(this) [+1 if sync]
 */
static s32 wake_affine_weight(struct sis_ctx *c, s32 this_cpu, s32 prev, bool sync)
{
	struct cpu_ctx *tc = sis_cpu_ctx(this_cpu), *pc = sis_cpu_ctx(prev);
	s64 this_eff, prev_eff, task_load;
	u64 pct;

	if (!tc || !pc)
		return -1;
	pct = sis_smt_siblings(this_cpu, prev) ? SMT_IMBALANCE_PCT : sis_imbalance_pct();

	this_eff = READ_ONCE(tc->util);
	if (sync) {
		s64 current_load = c->waker_load;

		if (current_load > this_eff)
			return this_cpu;
		this_eff -= current_load;
	}

	task_load = c->wakee_load;
	this_eff += task_load;
	this_eff *= 100;
	this_eff *= SCHED_CAPACITY;

	prev_eff = READ_ONCE(pc->util);
	prev_eff -= task_load;
	prev_eff *= 100 + (pct - 100) / 2;
	prev_eff *= SCHED_CAPACITY;

	/*
	 * "If sync, adjust the weight of prev_eff_load such that if
	 * prev_eff == this_eff that select_idle_sibling() will consider
	 * stacking the wakee on top of the waker if no other CPU is idle."
	 */
	if (sync)
		prev_eff += 1;

	return this_eff < prev_eff ? this_cpu : -1;
}

/*
 * wake_affine() (fair.c): this_cpu if the checks say so, else prev.
 * wake_affine_idle() reads @idle_mask, the wake-up's (select_task_rq_fair()).
 */
static s32 wake_affine(struct sis_ctx *c, const struct cpumask *idle_mask, s32 this_cpu,
		       s32 prev, bool sync)
{
	s32 target = wake_affine_idle(c, idle_mask, this_cpu, prev, sync);
	bool weight = false;

	if (sis_feat(c, FEAT_WA_WEIGHT) && target < 0) {
		target = wake_affine_weight(c, this_cpu, prev, sync);
		weight = target == this_cpu;
	}
	if (target != this_cpu)
		return prev;
	/* the wake-up goes to this_cpu's LLC: its counters are counted there from here */
	sis_count_in(c, this_cpu);
	if (weight)
		sis_inc(c, STAT_HIT_WA_WEIGHT);
	sis_inc(c, STAT_WAKE_AFFINE);
	return this_cpu;
}

/*
 * select_task_rq_fair() for a wake-up (WF_TTWU): record_wakee, want_affine,
 * wake_affine where a wake-affine domain spans this_cpu and prev (every
 * domain of the topologies here has SD_WAKE_AFFINE: no NUMA distance beyond
 * node_reclaim_distance is modelled), then select_idle_sibling(p, prev,
 * new_cpu). @waker is current's bookkeeping, @wakee p's. The idle mask is
 * fetched once per wake-up, here, passed down to wake_affine() and
 * select_idle_sibling(), and put back on the one exit after it.
 */
static s32 select_task_rq_fair(struct sis_ctx *c, struct sis_wake_state *waker,
			       struct sis_wake_state *wakee, s32 prev, bool sync)
{
	s32 this_cpu = c->this_cpu, new_cpu = prev;
	const struct cpumask *idle_mask;
	bool want_affine;

	if (sis_cpu_llc(this_cpu) < 0 || sis_cpu_llc(prev) < 0)
		return prev;

	idle_mask = sis_idle_get(c);
	record_wakee(c, waker);
	want_affine = !wake_wide(c, waker, wakee) && sis_allowed(c, this_cpu);
	if (want_affine && this_cpu != prev)
		new_cpu = wake_affine(c, idle_mask, this_cpu, prev, sync);

	new_cpu = select_idle_sibling(c, idle_mask, prev, new_cpu, &wakee->recent_used_cpu);
	sis_idle_put(c, idle_mask);
	return new_cpu;
}

/* ---- the wake-up's decisions around select_task_rq_fair(): WF_SYNC, TTWU_QUEUE_DESCHED ---- */

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
 * TTWU_QUEUE_DESCHED's decision as sched_waking evaluates it, on the
 * waking CPU (this CPU, sis_this_cpu()), for a wakee that is descheduling on
 * @wakee_cpu, @allowed there: the feature is on (@feat), the waker is this
 * CPU, the wakee's CPU is the one whose runqueue must be empty.
 */
static __always_inline bool ttwu_waking_cond(u64 feat, s32 wakee_cpu, bool allowed)
{
	return feat_on(feat, FEAT_TTWU_QUEUE_DESCHED) &&
	       ttwu_queue_cond_desched(sis_this_cpu(), wakee_cpu, allowed);
}

/*
 * How the kernel activated a woken task, seen from ops.runnable (the
 * counters wake_on_cpu, wake_spun, wake_list, wake_list_on_cpu).
 * try_to_wake_up() fires sched_waking on the waker's CPU (@waking_cpu) and
 * then, for a wakee still on its CPU (@on_cpu: p->on_cpu, dequeued), either
 *   if (smp_load_acquire(&p->on_cpu) && ttwu_queue_wakelist(p, task_cpu(p), wake_flags))
 *           goto unlock;                  the wake list, no select_task_rq()
 *   smp_cond_load_acquire(&p->on_cpu, !VAL);      the waker waits ("spins")
 * and after select_task_rq() ttwu_queue() may still use the wake list (another
 * LLC, an idle CPU). A wake-list activation runs on the target CPU
 * (sched_ttwu_pending()), any other on the waker's: ops.runnable on another
 * CPU than @waking_cpu (@this_cpu) is a wake-list one. sched_ext's
 * ttwu_queue_cond() refuses its tasks unless SCX_OPS_ALLOW_QUEUED_WAKEUP
 * (6.15+, --allow-queued-wakeup), so without it every on-CPU wake-up spins.
 */
static __always_inline u32 ttwu_wake_path(bool on_cpu, s32 waking_cpu, s32 this_cpu)
{
	bool list = waking_cpu != this_cpu;

	return (list ? WAKE_PATH_LIST : 0) |
	       (on_cpu ? (list ? WAKE_PATH_LIST_ON_CPU : WAKE_PATH_SPUN) : 0);
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

/* ---- the task's load that wake_affine_weight() reads (task_h_load()) ---- */

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
