/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Calibration of the LLC scan depth: how far the scan of select_idle_cpu()
 * would have to walk to find an idle CPU, against the depth the policy
 * allowed. SIS_UTIL ("sched/fair: Introduce SIS_UTIL to search idle CPU
 * based on sum of util_avg") wishes for "a crystal ball" that knows this
 * distance and estimates it from the LLC's utilization sum; this records
 * the real one for every wake-up that reaches the scan, per LLC and per
 * 10 % utilization bucket (util_sum / (weight * 1024)).
 *
 * The distance is computed from the idle bitmap with word operations, never
 * a second scan: cpus = sched_domain_span(sd_llc) & p->cpus_ptr, the scan
 * order is for_each_cpu_wrap(cpu, cpus, target + 1), so the nearest idle CPU
 * is the first set bit of cpus & idle at or after target + 1, else the first
 * one from 0 (the wrap), and its distance is the number of bits of cpus
 * passed on the way, itself included: a scan allowed d CPUs finds it.
 *
 * The idle mask is read right after the wake-up's decision, with the CPU it
 * took (c->claimed) put back: the state the scan started from, up to the
 * CPUs that other wakers or idle transitions changed meanwhile. The outcome
 * is judged on that snapshot:
 *   found_within_depth  an idle CPU at distance <= the allowed depth
 *   missed_idle         an idle CPU existed beyond the depth, or the scan was skipped
 *   wasted_scan         no idle CPU: the allowed depth, in CPUs examined
 *
 * Recording is off unless `scx_sisutil calibrate` runs or SIS_FIT is on
 * (calib_on, written by the loader): the wake-up pays one load and one
 * predictable branch otherwise. Records are per CPU (PERCPU_ARRAY, key =
 * llc * CALIB_BUCKETS + bucket): no shared atomics.
 *
 * It reads the idle mask through the primitive calib_idle_words()
 * (sis_ctx.bpf.h). sis.bpf.h's select_idle_cpu() calls sis_calib() (nr, the
 * depth the scan is allowed + 1); calib_flush() after the wake-up records it.
 */
#pragma once

#include "sis_ctx.bpf.h"

/* Set by the loader: record (1) or not (0). */
volatile u64 calib_on;

/*
 * Pinned with the feature map, for `scx_sisutil calibrate`: CALIB_CTL_LEASE
 * the CLOCK_MONOTONIC ns until which calibrate wants records (renewed by
 * each of its reads), the rest written by the loader for it. BPF never reads it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);	/* the loader reads the lease without a syscall */
	__uint(max_entries, CALIB_CTL_NR);
	__type(key, u32);
	__type(value, u64);
} calib_ctl SEC(".maps");

/* Each LLC's CPUs as a mask (sched_domain_span(sd_llc)), written by the loader. */
u64 calib_span[MAX_LLCS][MAX_CPUS / 64];

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	/* the loader sizes it to nr_llcs * CALIB_BUCKETS before load */
	__uint(max_entries, MAX_LLCS * CALIB_BUCKETS);
	__type(key, u32);
	__type(value, struct calib_rec);
} calib_recs SEC(".maps");

/* hist[] bin of distance @d (1..MAX_CPUS): exact below CALIB_EXACT, then by octave */
static __always_inline u32 calib_bin(u32 d)
{
	if (d < CALIB_EXACT)
		return d;
	if (d < 2 * CALIB_EXACT)
		return CALIB_EXACT;
	if (d < 4 * CALIB_EXACT)
		return CALIB_EXACT + 1;
	if (d < 8 * CALIB_EXACT)
		return CALIB_EXACT + 2;
	return CALIB_EXACT + 3;
}

/* __builtin_popcountll, spelled out (BPF has no popcount instruction) */
static __always_inline u32 calib_popcount(u64 x)
{
	x = x - ((x >> 1) & 0x5555555555555555ULL);
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (x * 0x0101010101010101ULL) >> 56;
}

/*
 * Record the scan of this wake-up (c->calib_target's LLC, c->calib_nr). A
 * global function: the verifier checks it once, on its own.
 */
__noinline int calib_record(struct sis_ctx *c)
{
	s32 target = c ? c->calib_target : -1;
	s64 depth;
	u64 idle[MAX_CPUS / 64] = {};
	s32 llc = sis_cpu_llc(target);
	struct llc_ctx *lc;
	struct calib_rec *r;
	u32 nw, w, start, nr_allowed = 0, dist, bucket, key;
	u32 passed_hi = 0, passed_lo = 0, dist_hi = 0, dist_lo = 0;
	u64 weight, allowed_depth;

	if (!c || llc < 0 || llc >= MAX_LLCS || target < 0 || target >= MAX_CPUS)
		return 0;
	/*
	 * "!--nr is the condition to stop scan": nr - 1 CPUs probed, 0 when
	 * SIS_UTIL skipped (nr 1); the idle-core scan is not bounded by nr.
	 */
	depth = c->calib_core ? SIS_INT_MAX : c->calib_nr - 1;
	lc = sis_llc_ctx(llc);
	if (!lc)
		return 0;
	weight = READ_ONCE(lc->weight);
	bucket = weight ? READ_ONCE(lc->util_sum) * 10 / (weight * SCHED_CAPACITY) : 0;
	if (bucket >= CALIB_BUCKETS)
		bucket = CALIB_BUCKETS - 1;
	key = llc * CALIB_BUCKETS + bucket;
	r = bpf_map_lookup_elem(&calib_recs, &key);
	if (!r)
		return 0;

	nw = (sis_topo()->nr_cpu_ids + 63) / 64;
	if (nw > MAX_CPUS / 64)
		nw = MAX_CPUS / 64;
	calib_idle_words(c, idle, nw);
	/* the CPU this wake-up took was idle when the scan started */
	mask_set(idle, c->claimed);

	/*
	 * for_each_cpu_wrap(cpu, cpus, target + 1): the bits at or after
	 * target + 1 (hi), then the wrap (lo, from 0). One unrolled pass over
	 * the words at constant offsets, no early exit: the verifier walks it
	 * once (an iterator loop with a second pass made it explode).
	 */
	start = target + 1;
#pragma unroll
	for (w = 0; w < MAX_CPUS / 64; w++) {
		s64 k = (s64)start - (s64)w * 64;
		u64 cpus, idle_w, hi, lo, h;

		if (w >= nw)
			break;
		cpus = calib_span[llc & (MAX_LLCS - 1)][w] & c->allowed[w];
		idle_w = cpus & idle[w];
		hi = k <= 0 ? ~0ULL : k >= 64 ? 0 : ~0ULL << k;
		lo = ~hi;
		nr_allowed += calib_popcount(cpus);
		if (!dist_hi) {
			h = idle_w & hi;
			if (h)	/* the allowed CPUs up to the lowest idle one, itself included */
				dist_hi = passed_hi + calib_popcount(cpus & hi & ((h & -h) | ((h & -h) - 1)));
			else
				passed_hi += calib_popcount(cpus & hi);
		}
		if (!dist_lo) {
			h = idle_w & lo;
			if (h)
				dist_lo = passed_lo + calib_popcount(cpus & lo & ((h & -h) | ((h & -h) - 1)));
			else
				passed_lo += calib_popcount(cpus & lo);
		}
	}
	/* no idle CPU after target: all the hi CPUs are passed before the wrap */
	dist = dist_hi ? dist_hi : dist_lo ? passed_hi + dist_lo : 0;

	allowed_depth = depth < 0 ? 0 : depth > nr_allowed ? nr_allowed : depth;
	r->wakeups++;
	r->depth_sum += allowed_depth;
	if (!depth)
		r->skipped++;
	if (dist) {
		u32 bin = calib_bin(dist);

		if (bin < CALIB_HIST)
			r->hist[bin]++;
		if (dist <= allowed_depth)
			r->found++;
		else
			r->missed++;
	} else {
		r->no_idle++;
		r->wasted += allowed_depth;
	}
	return 0;
}

/*
 * The hook of select_idle_cpu(): remember the scan's nr (the depth + 1) and
 * whether it looks for idle cores, three stores and no branch (a call there
 * made the wake path too complex to verify).
 */
static __always_inline void sis_calib(struct sis_ctx *c, s32 target, s64 nr, bool core)
{
	c->calib_target = target;
	c->calib_nr = nr;
	c->calib_core = core;
}

/*
 * Record wake-up of task @pid if it reached the scan, from ops.runnable,
 * which try_to_wake_up() runs after select_cpu on the same CPU with the
 * same per-CPU scratch (unless the activation is queued to a remote CPU's
 * wake list: then the scratch there is another wake-up's and @pid tells).
 * The record could not be made in select_cpu: one more call there made the
 * wake path too complex to verify. While nobody calibrates: one load and
 * one predictable branch.
 */
static __always_inline void calib_flush(struct sis_ctx *c, s32 pid)
{
	if (READ_ONCE(calib_on) && c->calib_target >= 0 && c->wakee_id == pid) {
		calib_record(c);
		c->calib_target = -1;
	}
}

