/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host test object: the wake-up steps of sis.bpf.h on a synthetic topology
 * and idle mask, driven through BPF_PROG_TEST_RUN by the Rust tests. It has
 * no struct_ops and calls no sched_ext kfunc, so it loads on any kernel that
 * allows bpf() - the verifier is the real one.
 */
#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

struct sis_topo topo;		/* filled by the test through the skeleton's bss */

static u64 test_idle[MAX_CPUS / 64];
static u32 test_idle_cores;
static u32 test_depth;
#include "sis_ctx.bpf.h"

static struct sis_ctx test_ctx;

static __always_inline bool sis_idle(struct sis_ctx *c, s32 cpu)
{
	return mask_test(test_idle, cpu);
}

static __always_inline bool sis_claim(struct sis_ctx *c, s32 cpu)
{
	if (!mask_test(test_idle, cpu))
		return false;
	test_idle[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)] &= ~(1ULL << ((u32)cpu % 64));
	return true;
}

static __always_inline bool sis_test_idle_cores(struct sis_ctx *c, s32 llc)
{
	return test_idle_cores;
}

static __always_inline void sis_set_idle_cores(struct sis_ctx *c, s32 llc, bool val)
{
	test_idle_cores = val;
}

/* The depth is an input here: SIS_UTIL's form (nr = depth + 1), ~0 = unbounded. */
static __always_inline s64 sis_depth_begin(struct sis_ctx *c, s32 target, bool has_idle_core)
{
	if (test_depth == ~0U)
		return SIS_INT_MAX;
	c->depth_src = DEPTH_SIS_UTIL;
	return (s64)test_depth + 1;
}

static __always_inline void sis_depth_end(struct sis_ctx *c, bool has_idle_core)
{
}

#include "sis.bpf.h"

SEC("syscall")
int sis_test(struct sis_test_args *a)
{
	struct sis_ctx *c = &test_ctx;
	s32 recent = a->recent;

	/*
	 * The context may only be read at constant offsets ("dereference of
	 * modified ctx ptr"): whole-array copies, which clang emits as
	 * fixed-offset loads, instead of an indexed loop.
	 */
	__builtin_memcpy(test_idle, a->idle, sizeof(test_idle));
	__builtin_memcpy(c->allowed, a->allowed, sizeof(c->allowed));
	__builtin_memset(c->cnt, 0, sizeof(c->cnt));
	c->feat = a->features;
	c->this_cpu = a->target;
	c->prev = a->prev;
	c->claimed = -1;
	c->depth_src = DEPTH_NONE;
	test_idle_cores = a->has_idle_cores;
	test_depth = a->depth;

	a->cpu = select_idle_sibling(c, a->prev, a->target, &recent);
	a->has_idle_cores_out = test_idle_cores;
	a->recent_out = recent;
	__builtin_memcpy(a->cnt, c->cnt, sizeof(a->cnt));
	return 0;
}
