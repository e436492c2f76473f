/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host test object: the scheduler's wake-up path (sis.bpf.h, from
 * select_task_rq_fair down) on a synthetic topology and state, driven
 * through BPF_PROG_TEST_RUN by the Rust tests (src/testing/sis_test.rs; the
 * decisions outside it, below: src/testing/decide_test.rs). The per-LLC and per-CPU state
 * (llc_ctxs, cpu_ctxs) and the runqueue lengths are this object's .bss
 * (synth.bpf.h), written by the test; the idle mask, the tasks and the clocks come in the
 * argument. It has no struct_ops and calls no sched_ext kfunc, so it loads
 * on any kernel that allows bpf() - the verifier is the real one.
 */
#include "sis_ctx.bpf.h"
#include "tools/synth.bpf.h"
#include "sis.bpf.h"
#include "idle.bpf.h"
#include "shards.bpf.h"
#include "kick.bpf.h"
#include "steal.bpf.h"
#include "queue.bpf.h"
#include "wait_hist.bpf.h"

char _license[] SEC("license") = "GPL";

static struct sis_ctx test_ctx;
/*
 * Global, not static: clang may split a static struct whose every use it
 * inlined into one variable per field, whose BTF the kernel refuses
 * ("VAR test_waker.0 ... Invalid size").
 */
struct sis_wake_state test_waker, test_wakee;

/*
 * The counters, counted in place (sis_ctx.bpf.h) into this CPU's rows of
 * sis_stats: every row is cleared before a call; after it, stats_row gets
 * the row of the LLC of @cpu (where the scheduler's statistics put the
 * wake-up) and stats_misplaced the sum of every other row, which must stay 0.
 */
u64 stats_misplaced;
u64 stats_row[STAT_NR];

u64 stats_others[STAT_NR];

static void stats_take(s32 cpu)
{
	u32 i;

	__builtin_memset(stats_row, 0, sizeof(stats_row));
	__builtin_memset(stats_others, 0, sizeof(stats_others));
	synth_stats_take(sis_cpu_llc(cpu), stats_row, stats_others);
	stats_misplaced = 0;
	bpf_for(i, 0, STAT_NR)
		stats_misplaced += stats_others[i];
}

SEC("syscall")
int sis_test(struct sis_test_args *a)
{
	struct sis_ctx *c = &test_ctx;

	synth_wake_setup(a, c, &test_waker, &test_wakee);

	a->cpu = select_task_rq_fair(c, &test_waker, &test_wakee, a->prev, a->sync);
	a->recent_out = test_wakee.recent_used_cpu;
	a->waker_last_wakee_out = test_waker.last_wakee;
	a->waker_flips_out = test_waker.wakee_flips;
	a->waker_decay_ts_out = test_waker.wakee_flip_decay_ts;
	stats_take(a->cpu);
	__builtin_memcpy(a->cnt, stats_row, sizeof(a->cnt));
	return 0;
}

/*
 * The depth calibration's record of the wake-up sis_test just ran, as the
 * scheduler makes it in ops.runnable: a program of its own, as there (calling
 * it at the end of sis_test made that program too complex to verify).
 */
SEC("syscall")
int calib_test_flush(void *a)
{
	calib_flush(&test_ctx, test_ctx.wakee_id);
	return 0;
}

/*
 * The idle-time accounting (idle.bpf.h) on cpu_ctxs[idle_test_cpu], as the
 * scheduler runs it: idle_test_op 0 is ops.update_idle(cpu, true) at
 * idle_test_now, 1 a wake-up's claim or the CPU's exit at idle_test_now (the
 * period's length in idle_test_ret).
 */
u32 idle_test_op, idle_test_cpu;
u64 idle_test_now, idle_test_ret;

SEC("syscall")
int idle_test(void *a)
{
	struct cpu_ctx *cc = &cpu_ctxs[idle_test_cpu & (MAX_CPUS - 1)];

	if (idle_test_op == 0) {
		idle_enter(cc, idle_test_now);
		idle_test_ret = 0;
	} else {
		idle_test_ret = idle_exit(cc, idle_test_now);
	}
	return 0;
}

/*
 * The decisions outside select_task_rq_fair (sis.bpf.h, idle.bpf.h, queue.bpf.h, kick.bpf.h), one
 * program each, on the same synthetic machine (topo, nr_running, synth_idle,
 * cpu_ctxs, llc_ctxs in .bss); inputs and outputs in dec_io.
 */
struct dec_io {
	/* in */
	u64 feat;
	s32 this_cpu;
	s32 cpu;		/* the decision's CPU (prev, the woken CPU, the idle one) */
	s32 llc;		/* kick_search: the enqueue's LLC */
	u32 flag;		/* allowed / kicked / idle / asked / WF_SYNC, per program */
	u32 desched;		/* ttwu_desched_select: what sched_waking saw; out: after */
	u32 current_flags;	/* wake_sync: current->flags */
	u64 now;		/* idle_update: ns */
	u64 jiffies;
	u64 allowed[MAX_CPUS / 64];	/* kick_search: p->cpus_ptr */
	/* out */
	s32 out_cpu;
	u32 out;
	u32 probed;		/* kick_search: CPUs tested */
	u32 first;		/* kick_search_first() of @llc */
	u64 cnt[STAT_NR];
} dec_io;

/* take_kick(dec_io.cpu) on the flag word kick_pending (.bss, as the test set it): out whether
 * the CPU's bit was set */
SEC("syscall")
int test_take_kick(void *a)
{
	dec_io.out = take_kick(dec_io.cpu);
	return 0;
}

/* TTWU_QUEUE_DESCHED's decision at sched_waking on CPU dec_io.this_cpu under dec_io.feat,
 * for a wakee descheduling on dec_io.cpu (allowed there: dec_io.flag) */
SEC("syscall")
int test_ttwu_waking(void *a)
{
	synth_this_cpu = dec_io.this_cpu;
	dec_io.out = ttwu_waking_cond(dec_io.feat, dec_io.cpu, dec_io.flag);
	return 0;
}

/* task_load_update() of task_load_io (.bss) for a task of weight dec_io.flag at dec_io.now */
struct task_load task_load_io;

SEC("syscall")
int test_task_load(void *a)
{
	task_load_update(&task_load_io, dec_io.flag, dec_io.now);
	return 0;
}

SEC("syscall")
int test_wake_sync(void *a)
{
	dec_io.out = wake_sync(dec_io.flag, dec_io.current_flags);
	return 0;
}

SEC("syscall")
int test_ttwu_cond(void *a)
{
	dec_io.out = ttwu_queue_cond_desched(dec_io.this_cpu, dec_io.cpu, dec_io.flag);
	return 0;
}

SEC("syscall")
int test_ttwu_select(void *a)
{
	struct sis_ctx *c = &test_ctx;

	synth_stats_clear();
	c->feat = dec_io.feat;
	c->this_cpu = dec_io.this_cpu;
	c->prev = dec_io.cpu;
	c->claimed = -1;
	sis_count_in(c, c->prev);
	dec_io.out_cpu = ttwu_desched_select(c, &dec_io.desched);
	dec_io.out = c->claimed;
	stats_take(c->prev);
	__builtin_memcpy(dec_io.cnt, stats_row, sizeof(dec_io.cnt));
	return 0;
}

SEC("syscall")
int test_newidle(void *a)
{
	dec_io.out = newidle_skip_ipi(dec_io.feat, dec_io.cpu, dec_io.flag);
	return 0;
}

SEC("syscall")
int test_enqueue_rescue(void *a)
{
	dec_io.out = enqueue_rescue(dec_io.feat, dec_io.flag);
	return 0;
}

SEC("syscall")
int test_tick_kicks(void *a)
{
	dec_io.out = tick_kicks(dec_io.feat, dec_io.flag);
	return 0;
}

SEC("syscall")
int test_idle_update(void *a)
{
	idle_update(dec_io.feat, dec_io.cpu, dec_io.flag, dec_io.now, dec_io.jiffies);
	return 0;
}

SEC("syscall")
int test_kick(void *a)
{
	struct kick_env e = {};

	synth_stats_clear();
	__builtin_memcpy(synth_allowed, dec_io.allowed, sizeof(synth_allowed));
	kick_llc_words_init();
	dec_io.probed = 0;
	dec_io.first = kick_search_first(dec_io.feat, dec_io.llc, dec_io.this_cpu);
	dec_io.out_cpu = kick_search(&e, dec_io.llc, dec_io.this_cpu, dec_io.feat, &dec_io.probed);
	dec_io.out = kick_already_asked(dec_io.feat, dec_io.flag, dec_io.llc);
	__builtin_memset(dec_io.cnt, 0, sizeof(dec_io.cnt));
	synth_stats_take(dec_io.llc, dec_io.cnt, stats_others);
	return 0;
}

/*
 * LLC_SHARDS' geometry and decisions (shards.bpf.h): for
 * dec_io.cpu of LLC dec_io.llc under dec_io.feat, out_cpu the enqueue's
 * shard, out the LLC's shards, first its CPUs per shard, shard_ids[j] shard
 * j's DSQ id; then the CPU's dispatch from its LLC (dispatch_llc()) over
 * the synthetic DSQs the test set (synth.bpf.h): flag whether a task moved,
 * probed the moves tried, synth_dsq_tried their DSQs in order. The test sets
 * shard_cpus and llc_shards_used (.bss here).
 */
u64 shard_ids[MAX_LLC_SHARDS];

SEC("syscall")
int test_shard(void *a)
{
	u32 nr = llc_nr_shards(dec_io.llc), j;

	dec_io.out_cpu = enqueue_shard(dec_io.feat, dec_io.cpu, dec_io.llc);
	dec_io.out = nr;
	dec_io.first = llc_shard_cpus(dec_io.llc);
	for (j = 0; j < MAX_LLC_SHARDS; j++)
		shard_ids[j] = j < nr ? shard_dsq(dec_io.llc, j) : 0;
	synth_dsq_nr_tried = 0;
	dec_io.flag = dispatch_llc(dec_io.cpu, dec_io.llc);
	dec_io.probed = synth_dsq_nr_tried;
	return 0;
}

/*
 * The steal (steal.bpf.h) over synthetic DSQs (synth_dsq_nr[id] tasks in
 * DSQ id, synth.bpf.h; LLC l's shard 0 is DSQ l), llc_queued,
 * steal_uncounted and llc_shards_used as the test sets them. dec_io.llc is
 * the stealer's LLC; out_cpu the LLC stolen from (-1 none), probed the LLCs
 * tried, first the LLCs walked.
 */
SEC("syscall")
int test_steal(void *a)
{
	dec_io.probed = 0;
	dec_io.first = 0;
	synth_dsq_nr_tried = 0;
	dec_io.out_cpu = steal_search(dec_io.llc, &dec_io.probed, &dec_io.first);
	return 0;
}

/*
 * The summary's bookkeeping: dec_io.flag 0 is ops.enqueue into LLC
 * dec_io.llc (queued_enter), 1 ops.running / ops.quiescent (queued_leave),
 * on the task whose queued_in is dec_io.desched.
 */
SEC("syscall")
int test_queued(void *a)
{
	if (dec_io.flag == 0)
		queued_enter(&dec_io.desched, dec_io.llc);
	else
		queued_leave(&dec_io.desched);
	return 0;
}

/*
 * wait_bucket() (wait_hist.bpf.h: the bucket of a wait in the scheduler's histogram and
 * the latency tracer's) of each of wait_ns[], into wait_idx[].
 */
u64 wait_ns[64];
u32 wait_idx[64];

SEC("syscall")
int test_wait_bucket(void *a)
{
	u32 i;

	bpf_for(i, 0, 64)
		wait_idx[i & 63] = wait_bucket(wait_ns[i & 63]);
	return 0;
}

/*
 * The tick's kick (queue.bpf.h): tick_kick_shard() of LLC dec_io.llc under
 * dec_io.feat over the synthetic DSQs (synth_dsq_nr, llc_shards_used and
 * shard_cpus as the test sets them) into out_cpu (-1: no kick); then, when it
 * kicks, kick_for_work() (kick.bpf.h) from CPU dec_io.this_cpu with
 * dec_io.allowed as the head's affinity: out whether a CPU was kicked,
 * synth_kicked the CPUs sis_kick_idle() was called for, cnt the counters of
 * the LLC's row.
 */
SEC("syscall")
int test_tick(void *a)
{
	s32 s;

	synth_stats_clear();
	__builtin_memcpy(synth_allowed, dec_io.allowed, sizeof(synth_allowed));
	__builtin_memset(synth_kicked, 0, sizeof(synth_kicked));
	synth_this_cpu = dec_io.this_cpu;
	kick_llc_words_init();
	s = tick_kick_shard(dec_io.feat, dec_io.llc);
	dec_io.out_cpu = s;
	dec_io.out = s >= 0 ? kick_for_work(dec_io.llc, NULL, dec_io.feat) : 0;
	__builtin_memset(dec_io.cnt, 0, sizeof(dec_io.cnt));
	synth_stats_take(dec_io.llc, dec_io.cnt, stats_others);
	return 0;
}

/*
 * ops.dispatch's order (dispatch_order(), queue.bpf.h) on CPU dec_io.cpu,
 * prev still queued when dec_io.flag: out the step taken (enum
 * dispatch_step), probed the DSQ moves tried, synth_dsq_tried their DSQs in
 * order; the machine (synth_dsq_nr, llc_queued, kick_pending, cpu_ctxs'
 * idle_start) as the test sets it.
 */
SEC("syscall")
int test_dispatch(void *a)
{
	synth_dsq_nr_tried = 0;
	dec_io.out = dispatch_order(dec_io.feat, dec_io.cpu, dec_io.flag);
	dec_io.probed = synth_dsq_nr_tried;
	return 0;
}
