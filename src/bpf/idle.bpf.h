/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A CPU's idle time, the loader's utilization source (busy = elapsed - idle):
 * cpu_ctx.idle_start is set when the CPU goes idle (ops.update_idle(cpu,
 * true), rq->idle_stamp) and the period is closed into idle_ns by whichever
 * comes first: the wake-up that claims the CPU from the idle mask
 * (select_cpu, wake.bpf.h), or the CPU's own exit from idle
 * (ops.update_idle(cpu, false)). From the claim on, the CPU is busy, as the
 * kernel's is once a wake-up has enqueued a task on its runqueue: its
 * nr_running is 1 and cpu_util() counts the wakee's util_avg at once, where
 * the switch to it comes later (an IPI away, and under TCG only once the
 * emulator gets round to that vCPU).
 *
 * The two writers (the claimer on another CPU, the CPU itself) race: the one
 * whose cmpxchg clears idle_start closes the period. The reader (the loader,
 * UtilUpdate in loader.rs) runs concurrently without a lock; the order of the
 * writes is what it relies on: idle_start is cleared BEFORE idle_ns grows, so
 * its two reads, idle_ns first and then idle_start, never count one period
 * twice (open in idle_start and closed in idle_ns): a period still open at the
 * second read had not been added at the first.
 * Pure functions of a cpu_ctx: the host test (sis_test.bpf.c) runs them too.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"
#include "sis_ctx.bpf.h"
#include "sis.bpf.h"		/* update_idle_core(), sis_prop_idle_exit() */
#include "idle_time.bpf.h"	/* idle_enter(), idle_exit() */

/*
 * ops.update_idle's accounting at @now (ns) and @jiffies: going idle opens
 * an idle period (idle_enter(), idle.bpf.h: idle_start, the first transition
 * of a run of them) and updates has_idle_cores (__update_idle_core(),
 * sis.bpf.h); leaving idle closes the period unless a wake-up's claim closed
 * it already (idle_exit(): the loader's busy time = elapsed - idle_ns) and
 * feeds SIS_PROP's avg_idle (sis_prop_idle_exit()). "Idle" is the
 * scheduler's own view, so the hint does not depend on when sched_ext
 * updates its idle masks (on 6.12 update_idle runs before they change).
 */
static __always_inline void idle_update(u64 feat, s32 cpu, bool idle, u64 now, u64 jiffies)
{
	struct cpu_ctx *cc = sis_cpu_ctx(cpu);
	u64 delta;

	if (!cc)
		return;
	if (idle) {
		idle_enter(cc, now);
		update_idle_core(feat, cpu);
		return;
	}
	delta = idle_exit(cc, now);
	if (delta)
		sis_prop_idle_exit(cc, delta, jiffies);
}
