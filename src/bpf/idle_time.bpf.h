/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A CPU's idle period, opened and closed in its cpu_ctx (idle_start, idle_ns): the two
 * writes the loader's util is made of (idle.bpf.h: when the scheduler calls them; the
 * loader's read: loader.rs idle_total()). Apart so that `shadow`'s tracer
 * (tools/shadow.bpf.c) accounts a CPU's idle time with the same code, from the kernel's
 * switches to and from the idle task, for the loader's depth beside the kernel's.
 * Pure functions of a cpu_ctx.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"

/* The CPU goes idle at @now (a period already open is kept). */
static __always_inline void idle_enter(struct cpu_ctx *cc, u64 now)
{
	if (!READ_ONCE(cc->idle_start))
		WRITE_ONCE(cc->idle_start, now);
}

/*
 * The idle period ends at @now (a claim or the CPU's exit): its length, added
 * to idle_ns, or 0 when no period was open (already closed by the other
 * writer, or the CPU was not idle).
 */
static __always_inline u64 idle_exit(struct cpu_ctx *cc, u64 now)
{
	u64 start = READ_ONCE(cc->idle_start), delta;

	if (!start || __sync_val_compare_and_swap(&cc->idle_start, start, 0) != start)
		return 0;
	delta = now > start ? now - start : 0;
	/* after idle_start's clear: the loader reads idle_ns first (idle.bpf.h) */
	__sync_fetch_and_add(&cc->idle_ns, delta);
	return delta;
}
