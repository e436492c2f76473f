/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The scheduler's context: its knobs, the live feature word, the per-task
 * context (task storage) and the helpers every callback reads them through. The
 * per-CPU and per-LLC context and the SIS statistics (sis_stats) are in
 * sis_ctx.bpf.h, with their accessors.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"
#include "sis_ctx.bpf.h"
#include "sis.bpf.h"	/* sis_prop_init() */

#ifndef PF_KTHREAD
#define PF_KTHREAD	0x00200000	/* include/linux/sched.h */
#endif

/* The live feature word; pinned by the loader so `scx_sisutil features` can switch it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);	/* the loader reads it without a syscall */
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} sis_features SEC(".maps");

/* One wake-up's state (struct sis_ctx is too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sis_ctx);
} sis_scratch SEC(".maps");

struct task_ctx {
	struct sis_wake_state ws; /* recent_used_cpu, last_wakee, wakee_flips (fair.c) */
	u32 desched_wakeup;	/* sched_waking saw TTWU_QUEUE_DESCHED's condition */
	s32 waking_cpu;		/* 1 + the CPU sched_waking ran on (the waker's), 0: none since */
	u32 waking_on_cpu;	/* sched_waking saw the wakee on its CPU, dequeued */
	u32 queued_in;		/* 1 + the LLC whose queued count holds the task, 0 none (steal.bpf.h) */
	struct task_load load;	/* task_h_load(): PELT-like runnable average (task_load_update) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

static u64 features(void)
{
	u32 zero = 0;
	u64 *f = bpf_map_lookup_elem(&sis_features, &zero);

	return f ? *f : 0;
}

/* cpu_possible_mask and its weight (ops.init, cpu_ctx_init; the cost harness sets its own) */
u64 possible_cpus[MAX_CPUS / 64];
u32 nr_possible_cpus;

/* p->cpus_ptr (@mask) into the wake-up's context (a probe read per word) */
static void copy_allowed(struct sis_ctx *c, const struct cpumask *mask)
{
	u32 i;

	bpf_for(i, 0, MAX_CPUS / 64) {
		if (i * 64 >= sis_topo()->nr_cpu_ids) {
			c->allowed[i & (MAX_CPUS / 64 - 1)] = 0;
			continue;
		}
		c->allowed[i & (MAX_CPUS / 64 - 1)] = BPF_CORE_READ(mask, bits[i & (MAX_CPUS / 64 - 1)]);
	}
}

/* ops.init_task: the task's context, fair.c's initial values */
static s32 task_ctx_init(struct task_struct *p)
{
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->ws.recent_used_cpu = -1;
	tctx->ws.last_wakee = -1;
	tctx->load.avg = 1024ULL * p->scx.weight / 100;
	return 0;
}

/*
 * p->cpus_ptr into the wake-up's context. A task allowed everywhere has
 * cpus_ptr == cpu_possible_mask (its weight is the possible CPUs' and it is a
 * subset of them): copied from the mask kept at ops.init, no probe read.
 */
static void wake_allowed(struct sis_ctx *c, const struct cpumask *mask, u32 nr_allowed)
{
	if (nr_allowed && nr_allowed == nr_possible_cpus) {
		__builtin_memcpy(c->allowed, possible_cpus, sizeof(c->allowed));
		return;
	}
	copy_allowed(c, mask);
}

/* ops.init: the possible CPUs; each CPU's SIS_PROP state as sched_init() sets it */
static void cpu_ctx_init(void)
{
	const struct cpumask *possible = scx_bpf_get_possible_cpumask();
	u32 l;

	bpf_for(l, 0, MAX_CPUS) {
		if (l >= sis_topo()->nr_cpu_ids)
			break;
		if (!bpf_cpumask_test_cpu(l, possible))
			continue;
		mask_set(possible_cpus, l);
		nr_possible_cpus++;
	}
	scx_bpf_put_cpumask(possible);

	bpf_for(l, 0, MAX_CPUS) {
		struct cpu_ctx *cc = sis_cpu_ctx(l);

		if (l >= sis_topo()->nr_cpu_ids || !cc)
			break;
		sis_prop_init(cc, bpf_jiffies64());
	}
}

/* ops.running: cpu_ctx.last_pid, the last task that ran on the CPU */
static void cpu_note_running(struct task_struct *p)
{
	struct cpu_ctx *cc = sis_cpu_ctx(scx_bpf_task_cpu(p));

	if (cc)
		WRITE_ONCE(cc->last_pid, p->pid);
}
