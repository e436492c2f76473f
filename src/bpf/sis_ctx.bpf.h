/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The state of one wake-up decision and the small helpers every step uses.
 * Included after the topology (struct sis_topo topo) is declared and before
 * the includer's primitives; sis.bpf.h holds the steps themselves.
 */
#ifndef __SIS_CTX_BPF_H
#define __SIS_CTX_BPF_H

#define SIS_INT_MAX	0x7fffffffLL

/* Where a depth came from, for the per-feature hit counters. */
enum sis_depth_src {
	DEPTH_NONE,
	DEPTH_SIS_UTIL,
	DEPTH_SIS_PROP,
};

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

/* One wake-up's state: inputs, and the counters it produced. */
struct sis_ctx {
	u64 feat;
	s32 this_cpu;		/* smp_processor_id() of the waker */
	s32 prev;
	u32 depth_src;		/* enum sis_depth_src of the current scan */
	s32 claimed;		/* the CPU this wake-up took from the idle mask, or -1 */
	s32 wakee_id;		/* p, as last_wakee records it */
	u32 pcpu_kthread;	/* is_per_cpu_kthread(current) && in_task() */
	u64 waker_load;		/* task_h_load(current) */
	u64 wakee_load;		/* task_h_load(p) */
	u64 allowed[MAX_CPUS / 64];	/* p->cpus_ptr */
	u64 scan_start;		/* SIS_PROP: cpu_clock(this) at scan start */
	s32 calib_target;	/* calib.bpf.h: the scan's target, -1 no scan */
	s32 __calib_pad;
	s64 calib_nr;		/* calib.bpf.h: the scan's nr (depth + 1) */
	u64 cnt[STAT_NR];
};

static __always_inline bool sis_feat(struct sis_ctx *c, u64 f)
{
	return c->feat & f;
}

static __always_inline void sis_inc(struct sis_ctx *c, u32 stat)
{
	if (stat < STAT_NR)
		c->cnt[stat]++;
}

static __always_inline bool mask_test(const u64 *mask, s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return false;
	return mask[((u32)cpu / 64) & (MAX_CPUS / 64 - 1)] & (1ULL << ((u32)cpu % 64));
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
	return topo.cpu_llc[cpu & (MAX_CPUS - 1)];
}

/* cpus_share_cache() */
static __always_inline bool sis_share_cache(s32 a, s32 b)
{
	s32 la = sis_cpu_llc(a);

	return la >= 0 && la == sis_cpu_llc(b);
}

#endif /* __SIS_CTX_BPF_H */
