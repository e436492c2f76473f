/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The log2 wait histogram's buckets, shared by the scheduler's own wait
 * histogram (vtime.bpf.h) and the scheduler-independent wake-up latency
 * tracer (waitlat.bpf.c), so that their figures compare bucket for bucket.
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"

/* log2 buckets, 4 per octave: ns < 4 -> ns; else 4 * (msb - 1) + the next two bits */
static __always_inline u32 wait_bucket(u64 ns)
{
	u32 msb = 0, idx;
	u64 v = ns;

	if (ns < 4)
		return ns;
	if (v >> 32) { msb += 32; v >>= 32; }
	if (v >> 16) { msb += 16; v >>= 16; }
	if (v >> 8) { msb += 8; v >>= 8; }
	if (v >> 4) { msb += 4; v >>= 4; }
	if (v >> 2) { msb += 2; v >>= 2; }
	if (v >> 1) { msb += 1; }
	idx = (msb - 1) * 4 + ((ns >> (msb - 2)) & 3);
	return idx < WAIT_NR_BUCKETS ? idx : WAIT_NR_BUCKETS - 1;
}
