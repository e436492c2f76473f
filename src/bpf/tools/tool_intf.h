/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The shipped tools' BPF interface: the numbers src/bpf/tools/shadow.bpf.c and
 * src/bpf/tools/cost.bpf.c share with their Rust halves (src/tools/shadow.rs, cost.rs),
 * and the synthetic machine's wake-up (struct sis_test_args: the host test's and shadow's
 * replay's), bindgen'd by build.rs into crate::tools::tool_intf, as intf.h is for the
 * scheduler. Nothing of the scheduler includes it.
 */
#ifndef __SISUTIL_TOOL_INTF_H
#define __SISUTIL_TOOL_INTF_H

#include "../intf.h"

/* shadow.bpf.c */

/*
 * shadow_rec.pc_layout: where include/linux/preempt.h puts the hardirq and NMI counts.
 * Legacy: hardirq 16-19, NMI 20-23. With counted interrupt disabling (the per-CPU
 * local_interrupt_disable_state exists; 7.x): bits 16-23 count hardirq *disabling*, hardirq
 * 24-27, NMI bit 28 (nesting in the per-CPU nmi_nesting) or, with a 64-bit preempt count
 * (HAS_SEPARATE_PREEMPT_RESCHED_BITS, no nmi_nesting), bits 28-31.
 */
enum shadow_pc_layout {
	SHADOW_PC_LEGACY		= 1,
	SHADOW_PC_IRQ_DISABLE_NMI_BIT	= 2,
	SHADOW_PC_IRQ_DISABLE		= 3,
};

/* shadow_rec.unknown: inputs the tracepoints cannot read (src/tools/shadow.rs replays both values) */
enum shadow_unknown {
	/* wake_flags: WF_SYNC is not an argument of sched_waking */
	SHADOW_UNK_SYNC		= 1,
	/* in_task(): preempt_count's place not in the kernel's BTF */
	SHADOW_UNK_IN_TASK	= 2,
};

/* the tracer's per-CPU counters (map `counters`), by index */
enum shadow_cnt {
	/* entries seen */
	SHADOW_CALLS,
	/* records the perf ring refused (full) */
	SHADOW_OUT_FAILED,
	/* exits without an entry */
	SHADOW_UNMATCHED,
	/* the next six: the wake-ups the tracepoints did not output, by why (src/tools/shadow.rs
	 * names them) */

	/* prio < MAX_RT_PRIO: RT/DL class, not select_task_rq_fair */
	SHADOW_TP_NOT_FAIR,
	/* one allowed CPU or migration disabled: select_task_rq() skips the class */
	SHADOW_TP_NO_SELECT,
	/* p->on_rq: ttwu_runnable() (delayed dequeue too), no selection */
	SHADOW_TP_ON_RQ,
	/* wakelist while p->on_cpu (TTWU_QUEUE), no selection */
	SHADOW_TP_ON_CPU,
	/* p->on_cpu at sched_waking, no migration, wakelist: either path */
	SHADOW_TP_AMBIGUOUS,
	/* a sched_waking before the previous one closed (that one lost) */
	SHADOW_TP_NESTED,
	/* tracepoints: a CPU's rq not learned yet, or rq->cpu != cpu */
	SHADOW_RQ_MISMATCH,
	/* fentry/kprobe: the stack's WF_SYNC == wake_flags' */
	SHADOW_SYNC_INFER_OK,
	/* fentry/kprobe: they differ */
	SHADOW_SYNC_INFER_BAD,
	/*
	 * records handed to the perf ring, by class (shadow_out_class()): the reader counts
	 * what it received per class, the difference is what the ring lost of each (JSON
	 * dropped_by_class), so a loss that favours one kind of wake-up shows
	 */
	SHADOW_OUT_CLASS0,
	SHADOW_NR_CNT = SHADOW_OUT_CLASS0 + 4,
};

/* cost.bpf.c */

enum cost_consts {
	/* per-placement histogram: 1 ns buckets, the last one open */
	COST_HIST		= 4096,
	/* --cold: 64 B lines written between placements (4 MiB) */
	COST_EVICT_LINES	= 1 << 16,
	/* --omit: the feature word's lookup, wake_allowed, the kick search (wake-up and tick) */
	COST_OMIT_FEATURES	= 1,
	COST_OMIT_ALLOWED	= 4,
	COST_OMIT_KICK		= 16,
};

/* contention's modes (cont_cfg.mode), in the order src/tools/cost.rs names them */
enum cont_modes {
	CONT_SHARED,
	CONT_PACKED,
	CONT_LINES,
	CONT_LOCAL,
	CONT_WAKE_QUEUE,
	CONT_WAKE_SHARDS,
	CONT_NR,
};

enum cont_consts {
	/* stamps per thread */
	CONT_TS		= 4096,
	/* CPUs whose threads stamp */
	CONT_TS_CPUS	= 8,
};

/* synth.bpf.h */

/*
 * The synthetic machine's wake-up (synth.bpf.h's synth_wake_setup()): one
 * select_task_rq_fair() on a synthetic state, the argument of the host test's
 * program (testing/sis_test.bpf.c, BPF_PROG_TEST_RUN) and of each of shadow's
 * replay jobs (shadow_replay.bpf.c). The per-LLC and per-CPU state (llc_ctxs,
 * cpu_ctxs: SIS_UTIL depth, has_idle_cores, SIS_PROP averages, loads) and the
 * runqueue lengths are the object's .bss, written by its Rust half like the
 * scheduler's are by the loader and BPF.
 */
struct sis_test_args {
	/* in */
	u64 features;
	s32 prev;
	s32 this_cpu;		/* the waker's CPU */
	u32 sync;		/* WF_SYNC */
	s32 recent;		/* p->recent_used_cpu, -1 none */
	u32 wakee_id;		/* p, as current->last_wakee sees it */
	u32 pcpu_kthread;	/* is_per_cpu_kthread(current) && in_task() */
	s32 waker_last_wakee;	/* current->last_wakee */
	u32 waker_flips;	/* current->wakee_flips */
	u64 waker_decay_ts;	/* current->wakee_flip_decay_ts */
	u32 wakee_flips;	/* p->wakee_flips */
	u32 hz;
	u64 jiffies;
	u64 waker_load;		/* task_h_load(current) */
	u64 wakee_load;		/* task_h_load(p) */
	u64 imbalance_pct;	/* of a non-SMT domain */
	u64 idle[MAX_CPUS / 64];	/* idle CPUs */
	u64 allowed[MAX_CPUS / 64];	/* p->cpus_ptr */
	/* out */
	s32 cpu;		/* chosen CPU */
	s32 recent_out;		/* recent_used_cpu after the call */
	s32 waker_last_wakee_out;
	u32 waker_flips_out;
	u64 waker_decay_ts_out;
	u64 cnt[STAT_NR];
};

#endif /* __SISUTIL_TOOL_INTF_H */
