/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_sisutil: everything shared between the BPF scheduler and the Rust
 * loader (through bindgen). One source of truth for names and sizes.
 */
#ifndef __SISUTIL_INTF_H
#define __SISUTIL_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char s8;
typedef short s16;
typedef int s32;
typedef long long s64;
#endif

enum sis_consts {
	MAX_CPUS		= 512,
	MAX_LLCS		= 64,
	/* hardware threads per core */
	MAX_SMT			= 4,
	SCHED_CAPACITY		= 1024,
	NSEC_PER_USEC		= 1000,
	NSEC_PER_MSEC		= 1000000,
	/* the loader's default util/depth update period, see sis_util_depth.rs */
	DEFAULT_INTERVAL_MS	= 20,
	DEFAULT_SLICE_US	= 5000,
	DEFAULT_IMBALANCE_PCT	= 117,
	/* sd_init(): SD_SHARE_CPUCAPACITY domains */
	SMT_IMBALANCE_PCT	= 110,
	/* SIS_PROP (6.6 fair.c): sysctl_sched_migration_cost, the cap of avg_idle is 2x this */
	SIS_PROP_MAX_IDLE_BALANCE_COST = 500000,
	SIS_PROP_MIN_NR		= 4,
	/*
	 * SIS_PROP's scan cost in kernel units: ns charged per CPU probed by
	 * select_idle_cpu() (sis_prop_account()), in place of the scan's own BPF
	 * time, which pays sched_ext kfuncs per probe and, under emulation, runs
	 * many times slower than the kernel's loop. Measured natively: the slope of
	 * the unbounded full scan at 100 % busy, `scx_sisutil placement-cost
	 * --llc-sizes 8,16,64,256 --busy 100 --policies patched-unbounded` on the AMD EPYC
	 * host of 2026-11-25: (2866.7 - 251.7) ns / (257 - 9) CPUs = 10.5 ns per
	 * probe (64 CPUs: 10.9). docs/DESIGN.md, "SIS_PROP in kernel units".
	 */
	SIS_PROP_PROBE_NS	= 10,
	/*
	 * LLC_SHARDS: the CPUs of a shard of an LLC's queue by default (`--shard-cpus`): a Zen
	 * CCX's 8 cores, 4 of Intel's L2-sharing E-core clusters' pairs; no topology level
	 * sched_ext gives us names the L2 in every kernel. An LLC of n CPUs has ceil(n / k)
	 * shards, at most MAX_LLC_SHARDS (k is raised to ceil(n / MAX_LLC_SHARDS)).
	 */
	DEFAULT_SHARD_CPUS	= 8,
	MAX_LLC_SHARDS		= 16,
	/* wait histograms: log2 buckets, 4 per octave (vtime.bpf.h, waitlat.bpf.c) */
	WAIT_NR_BUCKETS		= 256,
	/* the latency tracer's nice levels: -20..19 */
	WAIT_NR_NICE		= 40,
};

/*
 * The definitions of the features, the statistics and the presets. build.rs derives the
 * loader's tables from these three enums (src/sched/features.rs, src/sched/stats.rs): a name is the
 * member without its prefix (FEAT_, STAT_ lower-cased, PRESET_ lower-cased with '-'), the
 * value comes from clang through bindgen, and the description is the comment ABOVE the
 * member, as the kernel writes it (it may span lines). Every member but the _ALL/_NR bounds
 * has one; build.rs fails on a member without one and on a comment that no member follows.
 */

/*
 * Features: the kernel's sched_feat names. One u64 word, read on every decision; switched
 * live by `scx_sisutil features`. The description is `features`' help column; the order
 * is `features`' (the bits are the ABI: a feature keeps its bit when features are added,
 * so WA_WEIGHT, added after the five patches, is bit 8 while listed beside WA_IDLE_PREV).
 */
enum sis_feature {
	/* Chen Yu 2022, SIS_UTIL: bound the LLC scan by nr_idle_scan, from the LLC's util sum */
	FEAT_SIS_UTIL		= 1ULL << 0,
	/* 6.6 fair.c: legacy scan depth from avg_idle / avg_scan_cost (min 4) */
	FEAT_SIS_PROP		= 1ULL << 1,
	/* fair.c: has_idle_cores hint, idle-core scan and idle SMT sibling of prev */
	FEAT_SIS_CORE		= 1ULL << 2,
	/* Julia Lawall 2020, check for idle core: wake_affine_idle returns prev when it is idle */
	FEAT_WA_IDLE_PREV	= 1ULL << 3,
	/* fair.c: wake_affine_weight compares this_cpu's and prev's utilization */
	FEAT_WA_WEIGHT		= 1ULL << 8,
	/* Mel Gorman 2020, offload wakee activation: the wakee is still on its CPU when woken
	 * (seen at sched_waking) and that CPU, in the waker's LLC, has nothing running: placed
	 * there without a search */
	FEAT_TTWU_QUEUE_DESCHED	= 1ULL << 4,
	/* K Prateek Nayak 2024, skip newidle_balance() on IPI: an idle CPU woken without being
	 * asked to take work does not steal from other LLCs (its own LLC queue is still
	 * served; the kernel skips the whole newidle balance) */
	FEAT_NEWIDLE_SKIP_IPI	= 1ULL << 5,
	/* Tim Chen 2024, skip unnecessary ILB flag updates: a CPU's kick-pending bit is read
	 * before the atomic that sets it, and a CPU already asked is not asked again */
	FEAT_KICK_SKIP_REDUNDANT = 1ULL << 6,
	/* SIS_UTIL review (K Prateek Nayak): for LLCs of <= 16 CPUs, depth * 32 / llc_weight */
	FEAT_SIS_SMALL_LLC	= 1ULL << 7,
	/* with SIS_UTIL: each LLC's depth is the measured depth_p95 of its utilization
	 * (calibrate) */
	FEAT_SIS_FIT		= 1ULL << 9,
	/* Chen Yu's review of the ILB flag patch, not in the merged commit (off in every
	 * preset): the kick search of the enqueuer's LLC starts at this_cpu+1, not at its
	 * first CPU */
	FEAT_KICK_WRAP_NEXT	= 1ULL << 10,
	/* not the kernel's (off in every preset): a task queued without an idle CPU found has
	 * any idle CPU of the machine kicked at once to come and take it; off, only its CPU is
	 * kicked and a busy CPU's tick kicks an idle one, as nohz_balancer_kick() does */
	FEAT_WAKE_RESCUE	= 1ULL << 11,
	/* not the kernel's (off in every preset): the LLC's queue in shards of k CPUs
	 * (--shard-cpus), one LLC clock; a task queues in its CPU's shard and a CPU serves its
	 * own shard, then the LLC's others in rotation, then steals (docs/DESIGN.md) */
	FEAT_LLC_SHARDS		= 1ULL << 12,
	FEAT_ALL		= (1ULL << 13) - 1,
};

/*
 * Presets, in `--preset`'s order: feature words. PATCHED and VANILLA, then one pair per
 * kernel patch: PRESET_X_BASE is the kernel the patch's own numbers were measured on,
 * PRESET_X that kernel with the patch (feature X), so the two differ by it alone (and by
 * the features the patch turned off). Chronology: each base holds the patches merged
 * before it (the newidle IPI patch was posted in 2024-01 but not merged in that form, so
 * the 2024-06 kick patch's v6.8 base does not have it). SIS_CORE and WA_WEIGHT are the
 * kernel's defaults throughout. An _BASE's description is "KERNEL | PATCH". Last, the two
 * unbounded presets: a preset with its depth bound removed, the full-scan reference.
 */
enum sis_preset {
	/* every patch on (the default) */
	PRESET_PATCHED = FEAT_SIS_UTIL | FEAT_SIS_CORE | FEAT_WA_WEIGHT | FEAT_WA_IDLE_PREV |
			 FEAT_TTWU_QUEUE_DESCHED | FEAT_NEWIDLE_SKIP_IPI | FEAT_KICK_SKIP_REDUNDANT,
	/* every patch off: the oldest baseline */
	PRESET_VANILLA = FEAT_SIS_PROP | FEAT_SIS_CORE | FEAT_WA_WEIGHT,
	/* v5.7-rc6 | Mel Gorman, "sched/core: Offload wakee task activation if the wakee is
	 * descheduling" (2020-05, commit 2ebb17717550) */
	PRESET_TTWU_QUEUE_DESCHED_BASE = PRESET_VANILLA,
	PRESET_TTWU_QUEUE_DESCHED = PRESET_TTWU_QUEUE_DESCHED_BASE | FEAT_TTWU_QUEUE_DESCHED,
	/* v5.9 | Julia Lawall, "sched/fair: check for idle core" (2020-10) */
	PRESET_WA_IDLE_PREV_BASE = PRESET_TTWU_QUEUE_DESCHED,
	PRESET_WA_IDLE_PREV = PRESET_WA_IDLE_PREV_BASE | FEAT_WA_IDLE_PREV,
	/* v5.19-rc1 | Chen Yu, "sched/fair: Introduce SIS_UTIL to search idle CPU based on sum
	 * of util_avg" (2022-06) */
	PRESET_SIS_UTIL_BASE = PRESET_WA_IDLE_PREV,
	PRESET_SIS_UTIL = (PRESET_SIS_UTIL_BASE | FEAT_SIS_UTIL) & ~FEAT_SIS_PROP,
	/* tip:sched/core sched-core-2024-01-08 (v6.8-rc; SIS_PROP removed in v6.7) | K Prateek
	 * Nayak, "sched/fair: Skip newidle_balance() when an idle CPU is woken up to process
	 * an IPI" (2024-01) */
	PRESET_NEWIDLE_SKIP_IPI_BASE = PRESET_SIS_UTIL,
	PRESET_NEWIDLE_SKIP_IPI = PRESET_NEWIDLE_SKIP_IPI_BASE | FEAT_NEWIDLE_SKIP_IPI,
	/* v6.8 | Tim Chen / Chen Yu, "sched/balance: Skip unnecessary updates to idle load
	 * balancer's flags" (2024-06) */
	PRESET_KICK_SKIP_REDUNDANT_BASE = PRESET_SIS_UTIL,
	PRESET_KICK_SKIP_REDUNDANT = PRESET_KICK_SKIP_REDUNDANT_BASE | FEAT_KICK_SKIP_REDUNDANT,
	/* vanilla with no scan depth: select_idle_cpu scans the whole LLC */
	PRESET_UNBOUNDED = PRESET_VANILLA & ~FEAT_SIS_PROP,
	/* patched with no scan depth: the same wake path (the same wake-ups reach
	 * select_idle_sibling), the whole LLC scanned */
	PRESET_PATCHED_UNBOUNDED = PRESET_PATCHED & ~FEAT_SIS_UTIL,
};

/*
 * Per-LLC counters (PERCPU_ARRAY, key = LLC index), Mel Gorman's SIS statistics and the
 * features' hits. The name is the counter's in `monitor` and its JSON; the description is
 * `--help-stats`'.
 */
enum sis_stat {
	/* select_cpu wake-up placements (select_idle_sibling calls) */
	STAT_SEARCH,
	/* placed on target, prev or recent_used_cpu without a domain scan */
	STAT_FAST,
	/* searches past target/prev/recent: SMT sibling check + LLC scan (skipped ones included) */
	STAT_DOMAIN_SEARCH,
	/* CPUs examined by domain searches (SMT siblings, LLC scan) = scanned - search */
	STAT_DOMAIN_SCANNED,
	/* runqueues scanned: 1 per search for target/prev/recent together, + domain_scanned */
	STAT_SCANNED,
	/* LLC scans that found no idle CPU (incl. skipped ones) */
	STAT_FAILED,
	/* scans for a whole idle core (has_idle_cores set) */
	STAT_CORE_SEARCH,
	/* idle-core scans that found none (hint cleared) */
	STAT_CORE_FAILED,
	/* scans not started: SIS_UTIL depth 0 (LLC overloaded) */
	STAT_SCAN_SKIPPED,
	/* scans cut short by the depth (SIS_UTIL or SIS_PROP) */
	STAT_DEPTH_LIMITED,
	/* wake_affine moved the target to the waker's CPU */
	STAT_WAKE_AFFINE,
	/* recent_used_cpu chosen */
	STAT_RECENT,
	/* idle SMT sibling of prev chosen (select_idle_smt) */
	STAT_SMT,
	/* SIS_UTIL hits: scans skipped or cut by nr_idle_scan */
	STAT_HIT_SIS_UTIL,
	/* SIS_PROP hits: scans cut by the proportional depth */
	STAT_HIT_SIS_PROP,
	/* SIS_CORE hits: whole idle cores found */
	STAT_HIT_SIS_CORE,
	/* WA_IDLE_PREV hits: idle prev kept */
	STAT_HIT_WA_IDLE_PREV,
	/* WA_WEIGHT hits: waker's CPU less loaded, chosen */
	STAT_HIT_WA_WEIGHT,
	/* TTWU_QUEUE_DESCHED hits: wakee placed on its descheduling CPU */
	STAT_HIT_TTWU_QUEUE_DESCHED,
	/* NEWIDLE_SKIP_IPI hits: idle CPU woken for nothing did not pull */
	STAT_HIT_NEWIDLE_SKIP_IPI,
	/* KICK_SKIP_REDUNDANT hits: kick-pending atomics skipped (the CPU was already asked) */
	STAT_HIT_KICK_SKIP_REDUNDANT,
	/* tasks queued on an LLC DSQ */
	STAT_ENQUEUE,
	/* tasks inserted straight into a CPU's local DSQ */
	STAT_DIRECT,
	/* dispatches from the CPU's own LLC DSQ */
	STAT_DISPATCH_LLC,
	/* dispatches pulled from another LLC */
	STAT_STEAL,
	/* idle CPUs kicked for queued work */
	STAT_KICK,
	/* atomic writes to the kick-pending word */
	STAT_KICK_ATOMIC,
	/* CPUs probed by the enqueue path's search for an idle CPU to kick */
	STAT_KICK_SCANNED,
	/* wake-ups whose wakee was still on its CPU (in schedule(), dequeued) at sched_waking: TTWU_QUEUE_DESCHED's case */
	STAT_WAKE_ON_CPU,
	/* of wake_on_cpu: activated by the waker after it waited for p->on_cpu to clear (try_to_wake_up's smp_cond_load_acquire), not from a wake list */
	STAT_WAKE_SPUN,
	/* wake-ups activated from a CPU's wake list (the kernel's ttwu_queue_wakelist: activated on another CPU than the waker's; --allow-queued-wakeup only) */
	STAT_WAKE_LIST,
	/* of wake_list: the wakee was on its CPU and was queued there without ops.select_cpu (TTWU_QUEUE_DESCHED's mechanism) */
	STAT_WAKE_LIST_ON_CPU,
	STAT_NR,
};

/*
 * Per-LLC shared context, two cache lines. The first is read on every
 * wake-up and written only when a value changes: nr_idle_scan by the loader
 * (update_idle_cpu_scan()'s "if ((int)y != sd_share->nr_idle_scan)
 * WRITE_ONCE(...)", commit 70fb5ccf2ebb), has_idle_cores by BPF, weight once
 * at start. The second is the loader's own, rewritten every interval
 * (util_sum, which calibrate's scans and the statistics read), so that its
 * writes do not invalidate the first line on every CPU.
 */
/* how the kernel activated a woken task (ttwu_wake_path(), sis.bpf.h): bits */
enum wake_path {
	/* from a CPU's wake list (ttwu_queue_wakelist()), not by the waker */
	WAKE_PATH_LIST = 1 << 0,
	/* the wakee was on its CPU and went on its wake list: no select_task_rq() */
	WAKE_PATH_LIST_ON_CPU = 1 << 1,
	/* the wakee was on its CPU and the waker waited for p->on_cpu to clear */
	WAKE_PATH_SPUN = 1 << 2,
};

/* ops.dispatch's step (dispatch_order(), queue.bpf.h), in the order they are tried */
enum dispatch_step {
	/* no LLC (a CPU outside the topology), or nothing to take anywhere */
	DISPATCH_NONE,
	/* a task from this LLC's queue */
	DISPATCH_LLC,
	/* nothing queued here: prev goes on */
	DISPATCH_PREV,
	/* NEWIDLE_SKIP_IPI: an idle CPU woken for no work goes back to idle, no steal */
	DISPATCH_SKIP_IDLE,
	/* a task stolen from another LLC */
	DISPATCH_STEAL,
};

struct llc_ctx {
	u64 nr_idle_scan;	/* SIS_UTIL depth, 0..weight */
	u64 has_idle_cores;	/* sd_llc_shared->has_idle_cores */
	u64 weight;		/* CPUs in the LLC */
	u64 __pad0[5];
	u64 util_sum;		/* sum of the LLC's CPU util (0..1024 each) */
	u64 __pad1[7];
} __attribute__((aligned(64)));

/*
 * Per-CPU state, two cache lines. The first is written only on (or for) that
 * CPU, at its idle transitions (idle_ns, idle_start), wake-ups (SIS_PROP)
 * and switches (last_pid). The SIS_PROP fields are the runqueue's
 * (rq->avg_idle, ...) and this CPU's copy of its LLC domain
 * (per_cpu(sd_llc)->avg_scan_cost): each CPU has its own sched_domain struct.
 * The second is the loader's, rewritten every interval (util, which
 * wake_affine_weight reads), so that its writes do not invalidate the first
 * line under the CPU's next idle transition.
 */
struct cpu_ctx {
	u64 idle_ns;		/* total time idle, ns (busy time = elapsed - this) */
	u64 idle_start;		/* when it went idle, 0 while busy (rq->idle_stamp) */
	u64 avg_idle;		/* SIS_PROP: rq->avg_idle */
	u64 wake_avg_idle;	/* SIS_PROP: rq->wake_avg_idle */
	u64 wake_stamp;		/* SIS_PROP: rq->wake_stamp (jiffies) */
	u64 avg_scan_cost;	/* SIS_PROP: per_cpu(sd_llc)->avg_scan_cost (ns) */
	s32 last_pid;		/* last task that ran here */
	u32 nr_queued;		/* tasks we inserted to its local DSQ not yet running */
	u64 max_idle_balance_cost; /* SIS_PROP: rq->max_idle_balance_cost (ns) */
	u64 util;		/* loader's PELT-like util (0..1024): cpu_load() */
	u64 __pad[7];
} __attribute__((aligned(64)));

/*
 * Topology, filled by the loader before load (rodata) and by the host tests
 * (bss of the test object). CPUs of an LLC are listed in ascending id order
 * in llc_cpus[llc_start[l] .. llc_start[l] + llc_nr[l]) so a scan can wrap
 * from target + 1 like for_each_cpu_wrap().
 */
struct sis_topo {
	u32 nr_cpu_ids;
	u32 nr_llcs;
	u32 smt;			/* any core has more than one thread */
	u32 __pad;
	s16 cpu_llc[MAX_CPUS];		/* -1: CPU not present (offline, hole) */
	u16 cpu_llc_pos[MAX_CPUS];	/* index of the CPU within its LLC */
	u16 cpu_nr_smt[MAX_CPUS];	/* threads of the CPU's core (>= 1) */
	u16 cpu_smt[MAX_CPUS][MAX_SMT];	/* the core's threads, the CPU included */
	u16 llc_start[MAX_LLCS];
	u16 llc_nr[MAX_LLCS];
	u16 llc_cpus[MAX_CPUS];
	/* other LLCs, nearest first (same NUMA node first), for stealing */
	u8 llc_steal[MAX_LLCS][MAX_LLCS];
};

/*
 * Scan-depth calibration (calib.bpf.h): one record per LLC and utilization
 * bucket, per CPU. hist[d] counts the wake-ups whose nearest idle CPU was d
 * CPUs away in scan order, exactly for d < CALIB_EXACT; hist[CALIB_EXACT + k]
 * counts d in [CALIB_EXACT << k, CALIB_EXACT << (k + 1)).
 */
enum calib_consts {
	/* utilization 0-10 %, ..., 90-100 % */
	CALIB_BUCKETS		= 10,
	CALIB_EXACT		= 64,
	CALIB_HIST		= CALIB_EXACT + 4,
	/* calib_ctl: lease, the loader's imbalance_pct, then each LLC's weight */
	CALIB_CTL_LEASE		= 0,
	CALIB_CTL_IMBALANCE_PCT	= 1,
	CALIB_CTL_WEIGHT	= 2,
	CALIB_CTL_NR		= CALIB_CTL_WEIGHT + MAX_LLCS,
};

struct calib_rec {
	u64 wakeups;		/* scans of the LLC (skipped ones included) */
	u64 depth_sum;		/* allowed depths, summed (capped at the allowed CPUs) */
	u64 found;		/* an idle CPU within the allowed depth */
	u64 missed;		/* an idle CPU beyond it (or the scan skipped) */
	u64 wasted;		/* CPUs the scan may examine when none is idle */
	u64 no_idle;		/* wake-ups with no idle allowed CPU in the LLC */
	u64 skipped;		/* depth 0: SIS_UTIL skipped the scan */
	u64 hist[CALIB_HIST];	/* distance to the nearest idle CPU */
};

/*
 * The wait histograms (runnable -> running), log2 buckets with 4 sub-buckets
 * each (wait_hist.bpf.h's wait_bucket()): the scheduler's own, per CPU
 * (vtime.bpf.h), and `latency`'s, per CPU and nice level (waitlat.bpf.c).
 */
struct wait_hist {
	u64 bucket[WAIT_NR_BUCKETS];
	u64 count;
	u64 sum_ns;
};

struct lat_hist {
	u64 bucket[WAIT_NR_BUCKETS];
	u64 count;
	u64 sum_ns;
	u64 max_ns;
	u64 max_pid;
};

#endif /* __SISUTIL_INTF_H */
