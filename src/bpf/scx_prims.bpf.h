/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The seam's implementation over sched_ext (the interface: sis_ctx.bpf.h):
 * the knobs the loader sets before load, and the primitives the components
 * run on, backed by sched_ext's idle tracking and DSQs and the kernel's
 * runqueues. Only the scheduler's object (main.bpf.c) includes it; its
 * synthetic twin for the host objects is tools/synth.bpf.h.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"
#include "sis_ctx.bpf.h"
#include "knobs.bpf.h"

/* ---- the knobs: set by the loader before load (scheduler.rs), read-only once loaded ---- */

SIS_KNOBS(const volatile)

/* ---- the primitives: sched_ext's idle tracking, the kernel's runqueues ---- */

/* jiffies per second, for record_wakee()'s decay (250 on Debian, 1000 on defconfig) */
extern const int CONFIG_HZ __kconfig __weak;

/* the idle mask: a reference, taken once per wake-up (select_task_rq_fair()) and put on its exit */
static __always_inline const struct cpumask *sis_idle_get(struct sis_ctx *c)
{
	return scx_bpf_get_idle_cpumask();
}

static __always_inline void sis_idle_put(struct sis_ctx *c, const struct cpumask *idle_mask)
{
	scx_bpf_put_idle_cpumask(idle_mask);
}

static __always_inline bool sis_idle(struct sis_ctx *c, const struct cpumask *idle_mask, s32 cpu)
{
	return cpu >= 0 && bpf_cpumask_test_cpu(cpu, idle_mask);
}

static __always_inline bool sis_claim(struct sis_ctx *c, s32 cpu)
{
	return cpu >= 0 && scx_bpf_test_and_clear_cpu_idle(cpu);
}

/*
 * cpu_rq(cpu)->nr_running, read from the kernel's per-CPU runqueue (a
 * typed per-CPU ksym: the same on 6.12 and 7.x). It counts the task
 * running there and every sched_ext task queued on that rq, as the kernel's.
 */

static __always_inline u32 sis_nr_running(struct sis_ctx *c, s32 cpu)
{
	struct rq *rq;

	if (cpu < 0 || cpu >= sis_topo()->nr_cpu_ids)
		return 0;
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	return rq ? rq->nr_running : 0;
}

/*
 * cfs_h_nr_delayed(cpu_rq(cpu)): sched_ext tasks are never delay-dequeued (that is fair.c's
 * EEVDF), so none of the tasks nr_running counts here are: 0. The shadow replay supplies the
 * kernel's (synth.bpf.h).
 */
static __always_inline u32 sis_nr_delayed(struct sis_ctx *c, s32 cpu)
{
	return 0;
}

static __always_inline u64 sis_jiffies(struct sis_ctx *c)
{
	return bpf_jiffies64();
}

static __always_inline u32 sis_hz(void)
{
	return CONFIG_HZ > 0 ? CONFIG_HZ : 250;
}

static __always_inline s32 sis_this_cpu(void)
{
	return bpf_get_smp_processor_id();
}

/* The idle mask's first @nr words, for the depth calibration (calib.bpf.h). */
static __always_inline void calib_idle_words(struct sis_ctx *c, u64 *dst, u32 nr)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	u32 i;

	bpf_for(i, 0, nr)
		dst[i & (MAX_CPUS / 64 - 1)] = BPF_CORE_READ(idle, bits[i & (MAX_CPUS / 64 - 1)]);
	scx_bpf_put_idle_cpumask(idle);
}

/* the head of DSQ @dsq (an LLC queue's shard) to this CPU's local DSQ (queue.bpf.h, steal.bpf.h) */
static __always_inline bool sis_dsq_move(u64 dsq)
{
	return scx_bpf_dsq_move_to_local(dsq, 0);
}

/* the tasks queued in DSQ @dsq (an LLC queue's shard) */
static __always_inline u64 sis_dsq_nr(u64 dsq)
{
	return scx_bpf_dsq_nr_queued(dsq);
}

/* ---- the kick's search (kick.bpf.h): the idle mask and the task's cpus_ptr, by word ---- */

/* word @w of a kernel cpumask (struct cpumask's size is NR_CPUS: read, not indexed) */
static __always_inline u64 cpumask_word(const struct cpumask *m, u32 w)
{
	return BPF_CORE_READ(m, bits[w & (MAX_CPUS / 64 - 1)]);
}

/* word w of the idle mask */
static __always_inline u64 kick_idle_word(struct kick_env *e, u32 w)
{
	return cpumask_word(e->idle, w);
}

/* word w of the task's cpus_ptr */
static __always_inline u64 kick_allowed_word(struct kick_env *e, u32 w)
{
	return cpumask_word(e->p->cpus_ptr, w);
}

/* the IPI of kick_ilb(): an idle CPU asked to come and take work */
static __always_inline void sis_kick_idle(s32 cpu)
{
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}
