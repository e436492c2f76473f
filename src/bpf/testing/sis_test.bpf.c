/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Host test object: the scheduler's wake-up path (sis.bpf.h, from
 * select_task_rq_fair down) on a synthetic topology and state, driven
 * through BPF_PROG_TEST_RUN by the Rust tests (src/testing/sis_test.rs; the
 * decisions outside it, below: src/testing/decide_test.rs). The per-LLC and per-CPU state
 * (llc_ctxs, cpu_ctxs) and the runqueue lengths are this object's .bss
 * (synth.bpf.h), written by the test; the idle mask, the tasks and the clocks come in the
 * argument. Every program takes its inputs and gives its outputs in its argument
 * (test_intf.h: one idiom). It has no struct_ops and calls no sched_ext kfunc, so it loads
 * on any kernel that allows bpf() - the verifier is the real one.
 */
#include "test_intf.h"
#include "tools/tool_intf.h"
#include "sis_ctx.bpf.h"
#include "tools/synth.bpf.h"
#include "sis.bpf.h"
#include "idle.bpf.h"
#include "shards.bpf.h"
#include "kick.bpf.h"
#include "steal.bpf.h"
#include "queue.bpf.h"
#include "wait_hist.bpf.h"
/* vtime.bpf.h's callbacks are sched_ext's, never run here (unused): its clock is */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#include "vtime.bpf.h"
#pragma clang diagnostic pop

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
 * wake-up) and stats_misplaced the sum of every other row, which must stay 0
 * (sis_test returns 1 when it did not). The program's scratch, not read by the tests.
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
	return stats_misplaced != 0;
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
 * The decisions outside select_task_rq_fair (sis.bpf.h, idle.bpf.h, queue.bpf.h, kick.bpf.h), one
 * program each, on the same synthetic machine (topo, nr_running, synth_idle,
 * cpu_ctxs, llc_ctxs in .bss); inputs and outputs in the argument, struct dec_io
 * (test_intf.h).
 */

/*
 * The decisions' programs work on a copy of their argument, dec: the verifier lets a
 * program read its context only at fixed offsets, and the decisions take pointers into it
 * and index its arrays. dec_in() copies the argument in, dec_out() the copy back out.
 * Global, as test_waker.
 */
struct dec_io dec;

static __always_inline struct dec_io *dec_in(const struct dec_io *arg)
{
	__builtin_memcpy(&dec, arg, sizeof(dec));
	return &dec;
}

static __always_inline int dec_out(struct dec_io *arg)
{
	__builtin_memcpy(arg, &dec, sizeof(dec));
	return 0;
}

/*
 * A decision of one answer, one line: DEC_OUT(NAME, EXPR) is the program NAME, whose
 * io->out is EXPR over its argument io.
 */
#define DEC_OUT(name, expr)				\
	SEC("syscall")					\
	int name(struct dec_io *arg)			\
	{						\
		struct dec_io *io = dec_in(arg);	\
							\
		io->out = (expr);			\
		return dec_out(arg);			\
	}

/* take_kick() on the flag word kick_pending (.bss, as the test set it): the CPU's bit was set */
DEC_OUT(test_take_kick, take_kick(io->cpu))
/* WF_SYNC unless the waker exits */
DEC_OUT(test_wake_sync, wake_sync(io->flag, io->current_flags))
/* TTWU_QUEUE_DESCHED's condition (sis.bpf.h) */
DEC_OUT(test_ttwu_cond, ttwu_queue_cond_desched(io->this_cpu, io->cpu, io->flag))
/* how a woken task was activated: on_cpu, the waking CPU, the activating CPU (sis.bpf.h) */
DEC_OUT(test_wake_path, ttwu_wake_path(io->flag, io->cpu, io->this_cpu))
/* the queue's decisions (queue.bpf.h) */
DEC_OUT(test_newidle, newidle_skip_ipi(io->feat, io->cpu, io->flag))
DEC_OUT(test_enqueue_rescue, enqueue_rescue(io->feat, io->flag))
DEC_OUT(test_tick_kicks, tick_kicks(io->feat, io->flag))

/*
 * The idle-time accounting (idle.bpf.h) on cpu_ctxs[io->cpu], as the scheduler runs it:
 * io->flag 0 is ops.update_idle(cpu, true) at io->now, 1 a wake-up's claim or the CPU's
 * exit at io->now (the period's length in io->out_ns).
 */
SEC("syscall")
int idle_test(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);
	struct cpu_ctx *cc = &cpu_ctxs[io->cpu & (MAX_CPUS - 1)];

	if (io->flag == 0) {
		idle_enter(cc, io->now);
		io->out_ns = 0;
	} else {
		io->out_ns = idle_exit(cc, io->now);
	}
	return dec_out(arg);
}

/* sched_init()'s SIS_PROP state (sis_prop_init()) in cpu_ctxs[io->cpu] at io->jiffies */
SEC("syscall")
int test_prop_init(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	sis_prop_init(&cpu_ctxs[io->cpu & (MAX_CPUS - 1)], io->jiffies);
	return dec_out(arg);
}

/* TTWU_QUEUE_DESCHED's decision at sched_waking on CPU io->this_cpu under io->feat,
 * for a wakee descheduling on io->cpu (allowed there: io->flag) */
SEC("syscall")
int test_ttwu_waking(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	synth_this_cpu = io->this_cpu;
	io->out = ttwu_waking_cond(io->feat, io->cpu, io->flag);
	return dec_out(arg);
}

/* task_load_update() of task_load_io (.bss: the task's state, the scheduler's task storage)
 * for a task of weight io->flag at io->now */
struct task_load task_load_io;

SEC("syscall")
int test_task_load(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	task_load_update(&task_load_io, io->flag, io->now);
	return dec_out(arg);
}

SEC("syscall")
int test_ttwu_select(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);
	struct sis_ctx *c = &test_ctx;

	synth_stats_clear();
	c->feat = io->feat;
	c->this_cpu = io->this_cpu;
	c->prev = io->cpu;
	sis_wake_fresh(c);
	sis_count_in(c, c->prev);
	io->out_cpu = ttwu_desched_select(c, &io->desched);
	io->out = c->claimed;
	stats_take(c->prev);
	__builtin_memcpy(io->cnt, stats_row, sizeof(io->cnt));
	return dec_out(arg);
}

SEC("syscall")
int test_idle_update(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	idle_update(io->feat, io->cpu, io->flag, io->now, io->jiffies);
	return dec_out(arg);
}

/*
 * The kick's programs (test_kick, test_tick) on LLC io->llc: kick_begin() clears the
 * counters, takes io->allowed as the task's affinity and sets up the LLCs' words;
 * kick_end() gives the counters of the LLC's row in io->cnt.
 */
static __always_inline void kick_begin(struct dec_io *io)
{
	synth_stats_clear();
	__builtin_memcpy(synth_allowed, io->allowed, sizeof(synth_allowed));
	kick_llc_words_init();
}

static __always_inline int kick_end(struct dec_io *arg, struct dec_io *io)
{
	__builtin_memset(io->cnt, 0, sizeof(io->cnt));
	synth_stats_take(io->llc, io->cnt, stats_others);
	return dec_out(arg);
}

SEC("syscall")
int test_kick(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);
	struct kick_env e = {};

	kick_begin(io);
	io->probed = 0;
	io->first = kick_search_first(io->feat, io->llc, io->this_cpu);
	io->out_cpu = kick_search(&e, io->llc, io->this_cpu, io->feat, &io->probed);
	io->out = kick_already_asked(io->feat, io->flag, io->llc);
	return kick_end(arg, io);
}

/*
 * LLC_SHARDS' geometry and decisions (shards.bpf.h): for
 * io->cpu of LLC io->llc under io->feat, out_cpu the enqueue's
 * shard, out the LLC's shards, first its CPUs per shard, shard_ids[j] shard
 * j's DSQ id; then the CPU's dispatch from its LLC (dispatch_llc()) over
 * the synthetic DSQs the test set (synth.bpf.h): flag whether a task moved,
 * probed the moves tried, synth_dsq_tried their DSQs in order. The test sets
 * shard_cpus and llc_shards_used (.bss here).
 */
SEC("syscall")
int test_shard(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);
	u32 nr = llc_nr_shards(io->llc), j;

	io->out_cpu = enqueue_shard(io->feat, io->cpu, io->llc);
	io->out = nr;
	io->first = llc_shard_cpus(io->llc);
	for (j = 0; j < MAX_LLC_SHARDS; j++)
		io->shard_ids[j] = j < nr ? shard_dsq(io->llc, j) : 0;
	synth_dsq_nr_tried = 0;
	io->flag = dispatch_llc(io->cpu, io->llc);
	io->probed = synth_dsq_nr_tried;
	return dec_out(arg);
}

/*
 * The steal (steal.bpf.h) over synthetic DSQs (synth_dsq_nr[id] tasks in
 * DSQ id, synth.bpf.h; LLC l's shard 0 is DSQ l), llc_queued,
 * steal_uncounted and llc_shards_used as the test sets them. io->llc is
 * the stealer's LLC; out_cpu the LLC stolen from (-1 none), probed the LLCs
 * tried, first the LLCs walked.
 */
SEC("syscall")
int test_steal(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	io->probed = 0;
	io->first = 0;
	synth_dsq_nr_tried = 0;
	io->out_cpu = steal_search(io->llc, &io->probed, &io->first);
	return dec_out(arg);
}

/*
 * The summary's bookkeeping: io->flag 0 is ops.enqueue into LLC
 * io->llc (queued_enter), 1 ops.running / ops.quiescent (queued_leave),
 * on the task whose queued_in is io->desched.
 */
SEC("syscall")
int test_queued(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	if (io->flag == 0)
		queued_enter(&io->desched, io->llc);
	else
		queued_leave(&io->desched);
	return dec_out(arg);
}

/*
 * wait_bucket() (wait_hist.bpf.h: the bucket of a wait in the scheduler's histogram and
 * the latency tracer's) of each of io->ns[], into io->idx[].
 */
struct wait_bucket_io wait_io;	/* the argument's copy, as dec */

SEC("syscall")
int test_wait_bucket(struct wait_bucket_io *arg)
{
	struct wait_bucket_io *io = &wait_io;
	u32 i;

	__builtin_memcpy(io, arg, sizeof(*io));
	bpf_for(i, 0, 64)
		io->idx[i & 63] = wait_bucket(io->ns[i & 63]);
	__builtin_memcpy(arg, io, sizeof(*io));
	return 0;
}

/*
 * The LLC clock (vtime.bpf.h): vt_advance() of LLC io->llc for a run of io->delta ns by a
 * task of weight io->flag, ending at io->now, on llc_vtimes as the test set it (the
 * scheduler's per-LLC state, .bss here as there).
 */
SEC("syscall")
int test_vt_advance(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	vt_advance(io->llc, io->delta, io->flag, io->now);
	return dec_out(arg);
}

/*
 * The tick's kick (queue.bpf.h): tick_kick_shard() of LLC io->llc under
 * io->feat over the synthetic DSQs (synth_dsq_nr, llc_shards_used and
 * shard_cpus as the test sets them) into out_cpu (-1: no kick); then, when it
 * kicks, kick_for_work() (kick.bpf.h) from CPU io->this_cpu with
 * io->allowed as the head's affinity: out whether a CPU was kicked,
 * synth_kicked the CPUs sis_kick_idle() was called for, cnt the counters of
 * the LLC's row.
 */
SEC("syscall")
int test_tick(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);
	s32 s;

	kick_begin(io);
	__builtin_memset(synth_kicked, 0, sizeof(synth_kicked));
	synth_this_cpu = io->this_cpu;
	s = tick_kick_shard(io->feat, io->llc);
	io->out_cpu = s;
	io->out = s >= 0 ? kick_for_work(io->llc, NULL, io->feat) : 0;
	return kick_end(arg, io);
}

/*
 * ops.dispatch's order (dispatch_order(), queue.bpf.h) on CPU io->cpu,
 * prev still queued when io->flag: out the step taken (enum
 * dispatch_step), probed the DSQ moves tried, synth_dsq_tried their DSQs in
 * order; the machine (synth_dsq_nr, llc_queued, kick_pending, cpu_ctxs'
 * idle_start) as the test sets it.
 */
SEC("syscall")
int test_dispatch(struct dec_io *arg)
{
	struct dec_io *io = dec_in(arg);

	synth_dsq_nr_tried = 0;
	io->out = dispatch_order(io->feat, io->cpu, io->flag);
	io->probed = synth_dsq_nr_tried;
	return dec_out(arg);
}
