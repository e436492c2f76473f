/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The host test object's arguments (testing/sis_test.bpf.c), bindgen'd by build.rs into
 * crate::testing::test_intf, as intf.h is for the scheduler and tools/tool_intf.h for the
 * tools. Nothing of the scheduler includes it.
 *
 * One idiom for a test's inputs: a test program's inputs and outputs are its argument,
 * passed in and read back through BPF_PROG_TEST_RUN's context (the wake-up's:
 * tools/tool_intf.h's struct sis_test_args, the synthetic machine's, which shadow's replay
 * shares; every other decision's: struct
 * dec_io; the wait histogram's: struct wait_bucket_io). The .bss holds the synthetic
 * machine (tools/synth.bpf.h: topology, knobs, per-LLC and per-CPU state, runqueues, DSQs,
 * the kick word, and the task state the scheduler keeps in task storage), written between
 * runs as the loader and BPF write the scheduler's.
 */
#ifndef __SISUTIL_TEST_INTF_H
#define __SISUTIL_TEST_INTF_H

#include "../intf.h"

/*
 * The argument of the decisions outside select_task_rq_fair (sis.bpf.h, idle.bpf.h,
 * queue.bpf.h, kick.bpf.h, shards.bpf.h, steal.bpf.h), one program each: what each reads
 * and writes is said beside it in sis_test.bpf.c.
 */
struct dec_io {
	/* in */
	u64 feat;
	s32 this_cpu;
	s32 cpu;		/* the decision's CPU (prev, the woken CPU, the idle one) */
	s32 llc;		/* kick_search: the enqueue's LLC */
	u32 flag;		/* allowed / kicked / idle / asked / WF_SYNC / idle op, per program */
	u32 desched;		/* ttwu_desched_select: what sched_waking saw; out: after */
	u32 current_flags;	/* wake_sync: current->flags */
	u64 now;		/* idle_update, idle_test: ns */
	u64 jiffies;
	u64 delta;		/* test_vt_advance: the run's length (ns) */
	u64 allowed[MAX_CPUS / 64];	/* kick_search: p->cpus_ptr */
	/* out */
	s32 out_cpu;
	u32 out;
	u32 probed;		/* kick_search: CPUs tested */
	u32 first;		/* kick_search_first() of @llc */
	u64 out_ns;		/* idle_test: the idle period's length */
	u64 cnt[STAT_NR];
	u64 shard_ids[MAX_LLC_SHARDS];	/* test_shard: shard j's DSQ id */
};

/* wait_bucket() of each of ns[] into idx[] */
struct wait_bucket_io {
	u64 ns[64];
	u32 idx[64];
};

#endif /* __SISUTIL_TEST_INTF_H */
