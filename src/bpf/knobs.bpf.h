/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The knobs, defined once for both implementations of the seam (sis_ctx.bpf.h declares
 * their accessors): each knob's global, with its comment and default, and its accessor.
 * SIS_KNOBS(q) defines them with qualifier @q, the one difference between the two:
 *   scx_prims.bpf.h      SIS_KNOBS(const volatile): read-only data the loader sets before
 *                        load (scheduler.rs); the verifier sees them as constants
 *   tools/synth.bpf.h    SIS_KNOBS(): writable .bss/.data a host program rewrites between runs
 * The globals keep their names (topo, imbalance_pct, shard_cpus, slice_ns): they are the
 * skeletons' fields the Rust side writes.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"
#include "sis_ctx.bpf.h"

#define SIS_KNOBS(q)								\
	/* the machine's topology (topology.rs): cpu -> LLC, each LLC's CPUs in id	\
	 * order, SMT, steal order */							\
	q struct sis_topo topo;								\
	/* imbalance_pct of the domains above SMT (wake_affine_weight(); 117,		\
	 * --imbalance-pct) */								\
	q u64 imbalance_pct = DEFAULT_IMBALANCE_PCT;					\
	/* LLC_SHARDS: CPUs per shard of an LLC's queue (llc_shard_cpus();		\
	 * --shard-cpus) */								\
	q u32 shard_cpus = DEFAULT_SHARD_CPUS;						\
	/* the time slice of every task, ns (--slice-us) */				\
	q u64 slice_ns = DEFAULT_SLICE_US * NSEC_PER_USEC;				\
											\
	static __always_inline const volatile struct sis_topo *sis_topo(void)		\
	{										\
		return &topo;								\
	}										\
	static __always_inline u64 sis_imbalance_pct(void)				\
	{										\
		return imbalance_pct;							\
	}										\
	static __always_inline u32 sis_shard_cpus(void)					\
	{										\
		return shard_cpus;							\
	}										\
	static __always_inline u64 sis_slice_ns(void)					\
	{										\
		return slice_ns;							\
	}
