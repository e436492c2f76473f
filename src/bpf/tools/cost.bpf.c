/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Placement cost on the host's CPU: what the scheduler ships, run many
 * times in one BPF_PROG_TEST_RUN (a loop inside the program) on a synthetic
 * machine of one or more LLCs whose idle mask, utilization and SIS_PROP
 * averages the caller sets through .bss (src/tools/cost.rs). Two paths,
 * each the production functions in the order the callbacks call them:
 *
 * - the wake-up (cost_cfg.tick 0): ops.select_cpu's work (wake.bpf.h's
 *   wake_select_cpu(): the feature word's map lookup, p->cpus_ptr into the
 *   context (wake_allowed), select_task_rq_fair() of sis.bpf.h with its
 *   counters counted in place), then, when the task was not placed on a CPU
 *   it claimed, ops.enqueue's (main.bpf.c's queue_enqueue(): the LLC's
 *   queued count (queued_enter), the shard (enqueue_shard), the counter, the
 *   rescue decision (enqueue_rescue) and, only where WAKE_RESCUE is on, the
 *   kick search of kick.bpf.h and its flag word (kick_search_counted,
 *   kick_ask)); every shipped preset has WAKE_RESCUE off, so its wake-up
 *   kicks only the task's own CPU (a kfunc, not timed);
 * - the tick (cost_cfg.tick 1): ops.tick on a busy CPU (queue_tick(): the
 *   feature word, the CPU's LLC, the kick decision tick_kicks() with one
 *   task queued in the LLC, and, when it kicks, the search and the flag
 *   word, as the enqueue's rescue).
 *
 * Not timed, because a syscall program cannot call them: sched_ext's kfuncs
 * (the idle mask's get and put, the claim's test-and-clear, the DSQ insert
 * and its vtime key's task-storage work (vtime.bpf.h), the queue length
 * scx_bpf_dsq_nr_queued and the DSQ iterator of the tick, the kick
 * scx_bpf_kick_cpu), the task-storage lookups of select_cpu and enqueue,
 * and TTWU_QUEUE_DESCHED's test at sched_waking. What a claim, an enqueue's
 * count or a kick changed is put back after the timed region, so each
 * wake-up and tick sees the machine the caller set. The same loop with
 * cost_cfg.harness_only set times an empty region: the clock's own share,
 * which the caller subtracts. No struct_ops, no sched_ext kfunc: loads on
 * any kernel that allows bpf().
 */
#include "sis_ctx.bpf.h"
#include "synth.bpf.h"
#include "sis.bpf.h"
#pragma clang diagnostic ignored "-Wunused-function"	/* ctx.bpf.h's scheduler-only helpers */
#include "ctx.bpf.h"
#include "shards.bpf.h"
#include "kick.bpf.h"
#include "steal.bpf.h"
#include "queue.bpf.h"
#include "tool_intf.h"

char _license[] SEC("license") = "GPL";

/* filled by the caller through the skeleton's bss (the machine: synth.bpf.h) */
/* the CPUs a waker may run on (the busy ones, or all when none is busy) */
u16 wakers[MAX_CPUS];
/* each LLC's has_idle_cores, restored before each placement */
u8 llc_idle_cores[MAX_LLCS];

struct cost_cfg {
	u32 nr_wakers;
	u32 nr_placements;
	u32 seed;
	u32 harness_only;	/* time an empty region: the clock's own share */
	u32 cold;		/* write COST_EVICT_LINES lines between placements */
	u32 omit;		/* COST_OMIT_*: steps left out of the timed region */
	u32 tick;		/* time the tick of a busy CPU, not the wake-up */
};

struct cost_out {
	u64 ns;			/* the sum of the timed regions */
	u64 placements;
	u64 direct;		/* placed on a claimed idle CPU (no enqueue) */
	u64 enqueued;		/* queued on an LLC */
	u64 searched;		/* the kick search ran (the rescue's or the tick's) */
	u64 kicked;		/* ... and a CPU is to be kicked (kick_ask) */
	u64 word_tests;		/* the kick search's word tests (idle & allowed & the LLC's CPUs) */
	u32 hist[COST_HIST];	/* timed regions by ns */
};

struct cost_cfg cost_cfg;
struct cost_out cost_out;
u64 cost_evict[COST_EVICT_LINES * 8];
/* the wakee's cpus_ptr: every CPU (the caller's own mask would hold the host's CPUs only) */
u64 cost_allowed[MAX_CPUS / 64] = { ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL };

/*
 * The scheduler's feature word is ctx.bpf.h's sis_features: the loader's
 * per-interval work is measured against it (`placement-cost --loader`), read
 * through its mmap as the loader reads the scheduler's.
 */

/* the wake-up's context and the two tasks' bookkeeping */
static struct sis_ctx cost_ctx;
struct sis_wake_state cost_waker, cost_wakee;	/* global: clang would split a static one (no BTF) */

static __always_inline u32 xorshift(u32 *s)
{
	u32 x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

/* @v & @mask where the verifier sees it (clang drops a mask it can prove redundant) */
static __always_inline u32 masked(u32 v, u32 mask)
{
	barrier_var(v);
	return v & mask;
}

struct loop_state {
	u32 rng;
	u64 jiffies;
};

struct loop_state cost_st;

/* the wakee's task_ctx.queued_in (steal.bpf.h): 1 + the LLC whose count holds it */
u32 cost_queued_in;

/*
 * The search and the flag word, as kick_for_work() runs them (kick.bpf.h),
 * for the work queued on @llc; --omit kick leaves them out.
 */
static __always_inline void kick_timed(s32 llc, s32 this_cpu, u64 feat)
{
	struct kick_env e = {};
	s32 cpu;

	if (cost_cfg.omit & COST_OMIT_KICK)
		return;
	cost_out.searched++;
	cpu = kick_search_counted(&e, llc, this_cpu, feat);
	if (kick_ask(cpu, feat))
		cost_out.kicked++;
}

/* ops.select_cpu's and ops.enqueue's work for one wake-up, as wake.bpf.h and main.bpf.c do it */
static __noinline void place_timed(struct loop_state *st, s32 this_cpu, s32 prev)
{
	struct sis_ctx *c = &cost_ctx;
	u32 omit = cost_cfg.omit, shard;
	s32 cpu, llc;

	/* wake_select_cpu(): the context */
	c->feat = omit & COST_OMIT_FEATURES ? c->feat : features();
	c->this_cpu = this_cpu;
	c->prev = prev;
	c->claimed = -1;
	c->calib_target = -1;
	sis_count_in(c, prev);
	if (!(omit & COST_OMIT_ALLOWED))
		wake_allowed(c, (const struct cpumask *)cost_allowed, MAX_CPUS);

	cpu = select_task_rq_fair(c, &cost_waker, &cost_wakee, prev, false);
	if (c->claimed >= 0 && c->claimed == cpu) {
		/* select_cpu's direct insert: no enqueue */
		sis_inc(c, STAT_DIRECT);
		cost_out.direct++;
		return;
	}
	/* queue_enqueue(): the task's CPU's LLC (scx_bpf_task_cpu() is the CPU returned) */
	llc = sis_cpu_llc(cpu);
	if (llc < 0)
		return;
	queued_enter(&cost_queued_in, llc);
	shard = enqueue_shard(c->feat, cpu, llc);
	if (shard && !READ_ONCE(llc_shards_used))
		WRITE_ONCE(llc_shards_used, 1);
	/* the insert into shard_dsq(llc, shard) with vt_enqueue_key(): kfunc and task storage */
	stat_inc(llc, STAT_ENQUEUE);
	cost_out.enqueued++;
	/* the wakee is allowed everywhere: not pinned */
	if (enqueue_rescue(c->feat, false))
		kick_timed(llc, this_cpu, c->feat);
	/* else scx_bpf_kick_cpu(cpu): a kfunc */
}

/*
 * queue_tick() on busy CPU @this_cpu whose LLC queue holds a task
 * (llc_queue_nr() and the iterator to the head are kfuncs: the head is the
 * wakee, allowed everywhere).
 */
static __noinline void tick_timed(s32 this_cpu)
{
	u64 feat = cost_cfg.omit & COST_OMIT_FEATURES ? cost_ctx.feat : features();
	s32 llc = sis_cpu_llc(this_cpu);

	if (llc < 0 || !tick_kicks(feat, 1))
		return;
	llc_shards_live(llc);
	kick_timed(llc, this_cpu, feat);
}

/* --cold: write a line in each of COST_EVICT_LINES, pushing the wake-up's data out of the caches */
static __noinline void evict_caches(u32 salt)
{
	u32 k;

	bpf_for(k, 0, COST_EVICT_LINES)
		cost_evict[(k & (COST_EVICT_LINES - 1)) * 8] += salt;
}

/* a global function: verified once, not once per state of the caller's loop */
__noinline int place_one(u32 i)
{
	struct loop_state *st = &cost_st;
	struct sis_ctx *c = &cost_ctx;
	struct cpu_ctx *tc;
	u32 nw = cost_cfg.nr_wakers, nr = topo.nr_cpu_ids, r, start, n;
	s32 this_cpu, prev, recent, l;
	u64 t0, t1, d;

	if (!nw || nw > MAX_CPUS || !nr || nr > MAX_CPUS)
		return 1;
	r = xorshift(&st->rng);
	this_cpu = wakers[masked(r % nw, MAX_CPUS - 1)];
	r = xorshift(&st->rng);
	prev = masked(r % nr, MAX_CPUS - 1);
	l = sis_cpu_llc(prev);
	if (l < 0 || l >= MAX_LLCS)
		return 1;
	start = topo.llc_start[l & (MAX_LLCS - 1)];
	n = topo.llc_nr[l & (MAX_LLCS - 1)];
	if (!n)
		return 1;
	r = xorshift(&st->rng);
	recent = topo.llc_cpus[masked(start + r % n, MAX_CPUS - 1)];

	/* the state this placement sees: what the previous one changed, put back */
	llc_ctxs[l & (MAX_LLCS - 1)].has_idle_cores = llc_idle_cores[l & (MAX_LLCS - 1)];
	l = sis_cpu_llc(this_cpu);
	if (l >= 0 && l < MAX_LLCS)
		llc_ctxs[l & (MAX_LLCS - 1)].has_idle_cores = llc_idle_cores[l & (MAX_LLCS - 1)];
	tc = &cpu_ctxs[masked(this_cpu, MAX_CPUS - 1)];
	tc->wake_avg_idle = tc->avg_idle / 2;
	tc->wake_stamp = st->jiffies;
	c->wakee_id = i;
	cost_waker.last_wakee = -1;
	cost_waker.wakee_flips = 0;
	cost_waker.wakee_flip_decay_ts = st->jiffies;
	cost_wakee.recent_used_cpu = recent;
	cost_wakee.wakee_flips = 0;
	if (cost_cfg.cold)
		evict_caches(i);

	t0 = bpf_ktime_get_ns();
	if (!cost_cfg.harness_only) {
		if (cost_cfg.tick)
			tick_timed(this_cpu);
		else
			place_timed(st, this_cpu, prev);
	}
	t1 = bpf_ktime_get_ns();

	d = t1 - t0;
	cost_out.ns += d;
	cost_out.hist[d < COST_HIST ? d : COST_HIST - 1]++;
	/* put back what the wake-up or the tick changed: the claim, the queued count, the kick */
	if (c->claimed >= 0)
		mask_set(synth_idle, c->claimed);
	c->claimed = -1;
	queued_leave(&cost_queued_in);
	bpf_for(r, 0, MAX_CPUS / 64)
		kick_pending[r & (MAX_CPUS / 64 - 1)] = 0;
	return 0;
}

SEC("syscall")
int placement_cost(void *ctx)
{
	struct loop_state *st = &cost_st;
	u32 i;

	if (cost_cfg.nr_placements > (1 << 23))
		return 1;
	st->rng = cost_cfg.seed | 1;
	st->jiffies = bpf_jiffies64();
	/* the host's jiffies (SIS_PROP ages wake_avg_idle by them) */
	synth_real_time = 1;

	kick_llc_words_init();
	cost_ctx.pcpu_kthread = 0;
	cost_ctx.waker_load = 512;
	cost_ctx.wakee_load = 256;
	cost_ctx.claimed = -1;
	cost_ctx.feat = features();
	/* the wakee is allowed everywhere: cost_allowed is the harness's cpu_possible_mask */
	bpf_for(i, 0, MAX_CPUS / 64) {
		cost_ctx.allowed[i & (MAX_CPUS / 64 - 1)] = ~0ULL;
		synth_allowed[i & (MAX_CPUS / 64 - 1)] = ~0ULL;	/* the kick's view of the wakee */
		possible_cpus[i & (MAX_CPUS / 64 - 1)] = cost_allowed[i & (MAX_CPUS / 64 - 1)];
	}
	nr_possible_cpus = MAX_CPUS;
	cost_out.ns = 0;
	cost_out.direct = 0;
	cost_out.enqueued = 0;
	cost_out.searched = 0;
	cost_out.kicked = 0;
	synth_kick_word_tests = 0;
	bpf_for(i, 0, COST_HIST)
		cost_out.hist[i & (COST_HIST - 1)] = 0;

	/* an open-coded loop: 6.18's verifier rejects iterators inside bpf_loop's callback here */
	bpf_for(i, 0, cost_cfg.nr_placements)
		if (place_one(i))
			break;

	cost_out.placements = cost_cfg.nr_placements;
	/* the kick search's idle-word reads (synth.bpf.h's kick_idle_word()) */
	cost_out.word_tests = synth_kick_word_tests;
	return 0;
}

/*
 * `placement-cost --contention`: what a word written by every CPU on every
 * wake-up costs when several CPUs write it at once. Each
 * thread of the caller, pinned to its own CPU, runs this program at the
 * same time; it times cont_cfg.iters updates (16 per iterator step) of
 *   CONT_SHARED  one word, an atomic add from every CPU (the LLC clock, the
 *                vtime words, one DSQ's lock word)
 *   CONT_PACKED  a word per CPU, atomic, 8 to a cache line (llc_queued)
 *   CONT_LINES   a word per CPU on a line of its own, atomic
 *   CONT_LOCAL   a word per CPU on a line of its own, plain add (the per-CPU
 *                counters)
 *   CONT_WAKE_QUEUE  a wake-up's shared-line writes with the LLC's one queue:
 *                an atomic each on four lines every CPU writes (the DSQ's
 *                lock and rbtree root, V, W, the steal count), cont_wake[0..3]
 *   CONT_WAKE_SHARDS the same with LLC_SHARDS, each CPU in a shard of its own:
 *                the DSQ's line is the CPU's shard's (cont_wake[4 + cpu]), V, W
 *                and the steal count stay shared
 * (the DSQ's lock and rbtree are sched_ext's, not callable from a syscall
 * program: its line is an atomic here, as the lock's acquire is) and writes its clock before and after into cont_t0[cpu], cont_t1[cpu],
 * and, every 2^cont_cfg.ts_shift steps of 16 updates, into cont_ts[cpu][step
 * >> ts_shift] (CPUs 0..CONT_TS_CPUS-1, CONT_TS stamps each): from them the
 * caller sees when each thread was running, and accepts a round only if the
 * threads ran at the same time (not merely within overlapping windows, as
 * two threads sharing one CPU do). One clock read per 256 updates or more.
 */
struct cont_cfg {
	u32 mode;
	u32 iters;		/* updates, a multiple of 16 */
	u32 ts_shift;		/* a stamp every 2^ts_shift steps */
};

struct cont_cfg cont_cfg;
u64 cont_t0[MAX_CPUS], cont_t1[MAX_CPUS];
u64 cont_ts[CONT_TS_CPUS][CONT_TS];

/* the per-iteration stamp of step @i of the thread on @cpu */
static __always_inline void cont_stamp(u32 cpu, u32 i, u32 shift)
{
	u32 k = i >> shift;

	if (i & ((1U << shift) - 1) || k >= CONT_TS || cpu >= CONT_TS_CPUS)
		return;
	/* masked() where the verifier sees it: clang drops the masks the tests make redundant */
	cont_ts[masked(cpu, CONT_TS_CPUS - 1)][masked(k, CONT_TS - 1)] = bpf_ktime_get_ns();
}
u64 cont_words[MAX_CPUS * 8] __attribute__((aligned(64)));
/* the wake-up modes' lines: 0-3 shared, 4 + cpu a shard's */
u64 cont_wake[(4 + MAX_CPUS) * 8] __attribute__((aligned(64)));

SEC("syscall")
int contention(void *ctx)
{
	u32 cpu = bpf_get_smp_processor_id() & (MAX_CPUS - 1), mode = cont_cfg.mode, i, j;
	u32 shift = cont_cfg.ts_shift;
	u64 *w, t0;

	if (mode >= CONT_NR || !cont_cfg.iters || cont_cfg.iters > (1 << 24) || shift > 20)
		return 1;
	w = &cont_words[mode == CONT_SHARED ? 0 : mode == CONT_PACKED ? cpu : (cpu * 8) & (MAX_CPUS * 8 - 1)];
	t0 = bpf_ktime_get_ns();
	if (mode == CONT_WAKE_QUEUE || mode == CONT_WAKE_SHARDS) {
		u64 *q = mode == CONT_WAKE_QUEUE ? &cont_wake[0] : &cont_wake[(4 + cpu) * 8];

		/* 4 wake-ups of 4 writes per step: the queue's line, V, W, the steal count */
		bpf_for(i, 0, cont_cfg.iters / 16) {
			cont_stamp(cpu, i, shift);
#pragma unroll
			for (j = 0; j < 4; j++) {
				__sync_fetch_and_add(q, 1);
				__sync_fetch_and_add(&cont_wake[8], 1);
				__sync_fetch_and_add(&cont_wake[16], 1);
				__sync_fetch_and_add(&cont_wake[24], 1);
			}
		}
	} else if (mode == CONT_LOCAL) {
		bpf_for(i, 0, cont_cfg.iters / 16) {
			cont_stamp(cpu, i, shift);
#pragma unroll
			for (j = 0; j < 16; j++)
				WRITE_ONCE(*w, READ_ONCE(*w) + 1);
		}
	} else {
		bpf_for(i, 0, cont_cfg.iters / 16) {
			cont_stamp(cpu, i, shift);
#pragma unroll
			for (j = 0; j < 16; j++)
				__sync_fetch_and_add(w, 1);
		}
	}
	cont_t1[cpu] = bpf_ktime_get_ns();
	cont_t0[cpu] = t0;
	return 0;
}

/*
 * wake_allowed (ctx.bpf.h), for the host test: p->cpus_ptr is wa_mask,
 * p->nr_cpus_allowed wa_weight, possible_cpus / nr_possible_cpus as the test
 * sets them (the scheduler's ops.init); the wake-up's words into wa_out.
 */
u64 wa_mask[MAX_CPUS / 64], wa_out[MAX_CPUS / 64];
u32 wa_weight;

SEC("syscall")
int wake_allowed_test(void *ctx)
{
	wake_allowed(&cost_ctx, (const struct cpumask *)wa_mask, wa_weight);
	__builtin_memcpy(wa_out, cost_ctx.allowed, sizeof(wa_out));
	return 0;
}
