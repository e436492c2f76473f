/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_sisutil: the CFS wake-up placement (select_task_rq_fair ->
 * select_idle_sibling -> select_idle_cpu) and five kernel patches as
 * live-switchable sched_ext policies. Per-LLC vruntime DSQs underneath.
 */
#include <scx/common.bpf.h>
#include <scx/compat.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/* jiffies per second, for record_wakee()'s decay (250 on Debian, 1000 on defconfig) */
extern const int CONFIG_HZ __kconfig __weak;

#ifndef PF_KTHREAD
#define PF_KTHREAD	0x00200000	/* include/linux/sched.h */
#endif

/* Set by the loader before load. */
const volatile struct sis_topo topo;
const volatile u64 slice_ns = DEFAULT_SLICE_US * NSEC_PER_USEC;
const volatile u64 imbalance_pct = DEFAULT_IMBALANCE_PCT;

/* Shared state; the loader reads and writes parts of it through the skeleton. */
struct llc_ctx llc_ctxs[MAX_LLCS];
struct cpu_ctx cpu_ctxs[MAX_CPUS];
/* KICK_SKIP_REDUNDANT's shared flag word: CPUs asked to come and take queued work */
u64 kick_pending[MAX_CPUS / 64];

/* The live feature word; pinned by the loader so `scx_sisutil features` can switch it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);	/* the loader reads it without a syscall */
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} sis_features SEC(".maps");

struct sis_counters {
	u64 cnt[STAT_NR];
};

/* Counters per LLC, per CPU: no shared atomics on the hot paths. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_LLCS);
	__type(key, u32);
	__type(value, struct sis_counters);
} sis_stats SEC(".maps");

#include "sis_ctx.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sis_ctx);
} sis_scratch SEC(".maps");

struct task_ctx {
	struct sis_wake_state ws; /* recent_used_cpu, last_wakee, wakee_flips (fair.c) */
	u32 desched_wakeup;	/* sched_waking saw TTWU_QUEUE_DESCHED's condition */
	u32 __pad;
	u64 load_avg;		/* task_h_load(): PELT-like runnable average (see task_load_update) */
	u64 runnable_at;	/* ops.runnable */
	u64 quiescent_at;	/* ops.quiescent, 0: never slept */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

/* vruntime, lag, deadlines and the LLC clocks: the fairness rules */
#include "vtime.bpf.h"

static u64 features(void)
{
	u32 zero = 0;
	u64 *f = bpf_map_lookup_elem(&sis_features, &zero);

	return f ? *f : 0;
}

static struct sis_counters *llc_counters(s32 llc)
{
	u32 key = llc < 0 ? 0 : llc;

	return bpf_map_lookup_elem(&sis_stats, &key);
}

static void stat_inc(s32 llc, u32 stat)
{
	struct sis_counters *sc = llc_counters(llc);

	if (sc && stat < STAT_NR)
		sc->cnt[stat]++;
}

static struct cpu_ctx *cpu_ctx(s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return NULL;
	return &cpu_ctxs[cpu & (MAX_CPUS - 1)];
}

/* ---- the primitives sis.bpf.h runs on: sched_ext's idle tracking ---- */

static __always_inline bool sis_idle(struct sis_ctx *c, s32 cpu)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	bool ret = cpu >= 0 && bpf_cpumask_test_cpu(cpu, idle);

	scx_bpf_put_idle_cpumask(idle);
	return ret;
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

	if (cpu < 0 || cpu >= topo.nr_cpu_ids)
		return 0;
	rq = bpf_per_cpu_ptr(&runqueues, cpu);
	return rq ? rq->nr_running : 0;
}

static __always_inline u64 sis_jiffies(struct sis_ctx *c)
{
	return bpf_jiffies64();
}

/* cpu_clock(this_cpu) */
static __always_inline u64 sis_clock(struct sis_ctx *c)
{
	return bpf_ktime_get_ns();
}

static __always_inline u32 sis_hz(void)
{
	return CONFIG_HZ > 0 ? CONFIG_HZ : 250;
}

/*
 * Tim Chen, "sched/balance: Skip unnecessary updates to idle load
 * balancer's flags" (2024): read a shared word before writing it and skip
 * the write when it would not change. Returns true when it was skipped.
 */
static __always_inline bool skip_redundant_write(u64 feat, u64 cur, u64 want, s32 llc)
{
	if (!(feat & FEAT_KICK_SKIP_REDUNDANT) || cur != want)
		return false;
	stat_inc(llc, STAT_HIT_KICK_SKIP_REDUNDANT);
	return true;
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

#include "calib.bpf.h"
#include "sis.bpf.h"

/* ---- the wake-up: select_cpu and the state it reads ---- */

/* record_wakee() of each CPU's idle task: interrupt wake-ups from idle */
struct sis_wake_state idle_wake_state[MAX_CPUS];

/*
 * PELT's decay_load(): val * y^n, y^32 = 1/2, n in 1024 us periods.
 * runnable_avg_yN_inv[i] = y^i * 2^32.
 */
static const u32 yN_inv[32] = {
	0xffffffff, 0xfa83b2db, 0xf5257d15, 0xefe4b99b, 0xeac0c6e7, 0xe5b906e7,
	0xe0ccdeec, 0xdbfbb797, 0xd744fcca, 0xd2a81d91, 0xce248c15, 0xc9b9bd86,
	0xc5672a11, 0xc12c4cca, 0xbd08a39f, 0xb8fbaf47, 0xb504f333, 0xb123f581,
	0xad583eea, 0xa9a15ab4, 0xa5fed6a9, 0xa2704303, 0x9ef53260, 0x9b8d39b9,
	0x9837f051, 0x94f4efa8, 0x91c3d373, 0x8ea4398b, 0x8b95c1e3, 0x88980e80,
	0x85aac367, 0x82cd8698,
};

static __always_inline u64 decay_load(u64 val, u64 ns)
{
	u64 n = ns >> 20;	/* ~1024 us periods */

	if (n > 63 * 32)
		return 0;
	val >>= n / 32;
	return (val * yN_inv[n % 32 & 31]) >> 32;
}

/*
 * The task's load for wake_affine_weight(): sched_ext keeps no se.avg for
 * its tasks, so a PELT-like runnable average is kept here, updated when the
 * task stops being runnable (ops.quiescent), as the kernel updates a
 * blocked task's load at dequeue and task_h_load() reads it unchanged:
 *   load = decay(load, slept) ; load = decay(load, runnable) + w * (1 - y^runnable)
 * w = 1024 * weight / 100 (NICE_0 -> 1024). A new task starts at w
 * (init_entity_runnable_average()).
 */
static void task_load_update(struct task_ctx *tctx, const struct task_struct *p, u64 now)
{
	u64 w = 1024ULL * p->scx.weight / 100, r;

	if (tctx->quiescent_at && tctx->runnable_at > tctx->quiescent_at)
		tctx->load_avg = decay_load(tctx->load_avg, tctx->runnable_at - tctx->quiescent_at);
	r = tctx->runnable_at && now > tctx->runnable_at ? now - tctx->runnable_at : 0;
	tctx->load_avg = decay_load(tctx->load_avg, r) + w - decay_load(w, r);
	tctx->quiescent_at = now;
}

/* from ops.runnable */
static void wake_load_runnable(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tctx)
		tctx->runnable_at = bpf_ktime_get_ns();
	if (READ_ONCE(calib_on)) {
		u32 zero = 0;
		struct sis_ctx *c = bpf_map_lookup_elem(&sis_scratch, &zero);

		if (c)
			calib_flush(c, p->pid);
	}
}

/* from ops.quiescent */
static void wake_load_quiescent(struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tctx)
		task_load_update(tctx, p, bpf_ktime_get_ns());
}

/*
 * TTWU_QUEUE_DESCHED, Mel Gorman's "sched/core: Offload wakee task
 * activation if the wakee is descheduling" (2020, 2ebb17717550), lives in try_to_wake_up(), before
 * select_task_rq():
 *   if (READ_ONCE(p->on_cpu) && ttwu_queue_wakelist(p, task_cpu(p), wake_flags | WF_ON_CPU))
 * with ttwu_queue_cond(): cpu active, in p->cpus_ptr, shares cache with the
 * waker (else the older cross-LLC rule, not this patch's), not the waker's CPU, and
 * "(wake_flags & WF_ON_CPU) && cpu_rq(cpu)->nr_running <= 1" - the wakee,
 * already dequeued, is not counted, so it is the later kernel's
 * !nr_running. sched_ext on 6.12 never takes this path for its tasks (it
 * waits for on_cpu and calls select_cpu), so the condition is evaluated at
 * the same point of the same wake-up: the sched_waking tracepoint, which
 * try_to_wake_up() fires just before it reads p->on_rq and p->on_cpu.
 * select_cpu then places the task on that CPU without the search.
 */
/* p->on_cpu / p->on_rq: int on 6.12, u8 since 6.17 */
struct task_struct___on_u8 {
	u8 on_cpu;
	u8 on_rq;
} __attribute__((preserve_access_index));

struct task_struct___on_int {
	int on_cpu;
	int on_rq;
} __attribute__((preserve_access_index));

/* the wakee is still on its CPU (in schedule()) and dequeued */
static __always_inline bool task_descheduling(struct task_struct *p)
{
	if (bpf_core_type_matches(struct task_struct___on_u8)) {
		struct task_struct___on_u8 *t = (void *)p;

		return BPF_CORE_READ(t, on_cpu) && !BPF_CORE_READ(t, on_rq);
	} else {
		struct task_struct___on_int *t = (void *)p;

		return BPF_CORE_READ(t, on_cpu) && !BPF_CORE_READ(t, on_rq);
	}
}

SEC("tp_btf/sched_waking")
int BPF_PROG(sisutil_waking, struct task_struct *p)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	s32 this_cpu, cpu;
	u32 cond = 0;

	if (!tctx)
		return 0;
	if ((features() & FEAT_TTWU_QUEUE_DESCHED) && task_descheduling(p)) {
		this_cpu = bpf_get_smp_processor_id();
		cpu = p->thread_info.cpu;
		cond = cpu != this_cpu && sis_share_cache(cpu, this_cpu) &&
		       bpf_cpumask_test_cpu(cpu, p->cpus_ptr) && !sis_nr_running(NULL, cpu);
	}
	tctx->desched_wakeup = cond;
	return 0;
}

static void copy_allowed(struct sis_ctx *c, const struct task_struct *p)
{
	const struct cpumask *mask = p->cpus_ptr;
	u32 i;

	bpf_for(i, 0, MAX_CPUS / 64) {
		if (i * 64 >= topo.nr_cpu_ids) {
			c->allowed[i & (MAX_CPUS / 64 - 1)] = 0;
			continue;
		}
		c->allowed[i & (MAX_CPUS / 64 - 1)] = BPF_CORE_READ(mask, bits[i & (MAX_CPUS / 64 - 1)]);
	}
}

static void flush_counters(struct sis_ctx *c, s32 cpu)
{
	struct sis_counters *sc = llc_counters(sis_cpu_llc(cpu));
	u32 i;

	if (!sc)
		return;
	bpf_for(i, 0, STAT_NR)
		sc->cnt[i] += c->cnt[i];
}

/*
 * current's record_wakee() state: its task storage, created for tasks the
 * scheduler does not manage; the idle task (interrupt wake-ups) has a
 * per-CPU slot.
 */
static struct sis_wake_state *waker_state(struct task_struct *cur, s32 this_cpu, u64 *load)
{
	struct task_ctx init = { .ws = { .recent_used_cpu = -1, .last_wakee = -1 } };
	struct task_ctx *wctx;

	*load = 0;
	if (!cur->pid) {
		if (this_cpu < 0 || this_cpu >= MAX_CPUS)
			return NULL;
		return &idle_wake_state[this_cpu & (MAX_CPUS - 1)];
	}
	wctx = bpf_task_storage_get(&task_ctxs, cur, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!wctx)
		return NULL;
	*load = wctx->load_avg;
	return &wctx->ws;
}

s32 BPF_STRUCT_OPS(sisutil_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct sis_wake_state *waker;
	struct task_ctx *tctx;
	struct sis_ctx *c;
	u32 zero = 0;
	s32 cpu;

	/* fork/exec balancing is the kernel's slow path: just any idle CPU */
	if (!(wake_flags & SCX_WAKE_TTWU)) {
		cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
		if (cpu >= 0) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
			return cpu;
		}
		return prev_cpu;
	}

	c = bpf_map_lookup_elem(&sis_scratch, &zero);
	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (!c || !tctx)
		return prev_cpu;
	c->feat = features();
	c->this_cpu = bpf_get_smp_processor_id();
	c->prev = prev_cpu;
	c->claimed = -1;
	c->depth_src = DEPTH_NONE;
	c->calib_target = -1;
	c->wakee_id = p->pid;
	c->wakee_load = tctx->load_avg;
	/* is_per_cpu_kthread(current); in_task() is taken as true (DESIGN.md) */
	c->pcpu_kthread = (cur->flags & PF_KTHREAD) && cur->nr_cpus_allowed == 1;
	__builtin_memset(c->cnt, 0, sizeof(c->cnt));
	copy_allowed(c, p);

	if (tctx->desched_wakeup && sis_feat(c, FEAT_TTWU_QUEUE_DESCHED)) {
		/* the activation happens on prev: no select_task_rq() at all */
		tctx->desched_wakeup = 0;
		sis_inc(c, STAT_HIT_TTWU_QUEUE_DESCHED);
		cpu = prev_cpu;
		if (sis_claim(c, cpu))
			c->claimed = cpu;
	} else {
		waker = waker_state(cur, c->this_cpu, &c->waker_load);
		if (!waker)
			return prev_cpu;
		cpu = select_task_rq_fair(c, waker, &tctx->ws, prev_cpu, wake_flags & SCX_WAKE_SYNC);
	}

	if (c->claimed >= 0 && c->claimed == cpu) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
		sis_inc(c, STAT_DIRECT);
	}
	flush_counters(c, cpu);
	return cpu;
}

/* ---- queueing, kicking and dispatching ---- */

static bool kick_test(s32 cpu)
{
	return kick_pending[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)] & (1ULL << ((u32)cpu % 64));
}

/* ---- the enqueue's search for an idle CPU to kick (kick.bpf.h) over sched_ext ---- */

struct kick_env {
	const struct cpumask *idle;
	const struct task_struct *p;
};

static __always_inline bool kick_candidate(struct kick_env *e, s32 cpu)
{
	return bpf_cpumask_test_cpu(cpu, e->idle) && bpf_cpumask_test_cpu(cpu, e->p->cpus_ptr);
}

/* word @w of a kernel cpumask (struct cpumask's size is NR_CPUS: read, not indexed) */
static __always_inline u64 cpumask_word(const struct cpumask *m, u32 w)
{
	return BPF_CORE_READ(m, bits[w & (MAX_CPUS / 64 - 1)]);
}

static __always_inline u64 kick_idle_word(struct kick_env *e, u32 w)
{
	return cpumask_word(e->idle, w);
}

static __always_inline u64 kick_allowed_word(struct kick_env *e, u32 w)
{
	return cpumask_word(e->p->cpus_ptr, w);
}

#include "kick.bpf.h"

/*
 * Ask an idle CPU to come and take the work just queued on @llc (its own
 * LLC first, then the nearest LLC that has one: that CPU will steal), as
 * kick_ilb() asks the idle load balancer:
 *   flags = atomic_fetch_or(flags, nohz_flags(ilb_cpu));
 *   if (flags & NOHZ_KICK_MASK) return;       already asked: no second IPI
 *   smp_call_function_single_async(ilb_cpu, ...);
 * Tim Chen's patch adds only the read before the atomic ("if ((atomic_read(
 * nohz_flags(ilb_cpu)) & flags) == flags) return;") and, from its review,
 * the search from this_cpu + 1 (kick.bpf.h). Every CPU the search tests is
 * counted (KICK_SCANNED), against the enqueue's LLC.
 */
static void kick_for_work(s32 llc, const struct task_struct *p, u64 feat)
{
	struct kick_env e = { .p = p };
	s32 cpu, kllc;
	u32 probed = 0;
	u64 bit, old;
	u64 *word;

	if (llc < 0 || llc >= MAX_LLCS)
		return;
	e.idle = scx_bpf_get_idle_cpumask();
	cpu = kick_search(&e, llc, bpf_get_smp_processor_id(), feat, &probed);
	scx_bpf_put_idle_cpumask(e.idle);
	{
		struct sis_counters *sc = llc_counters(llc);

		if (sc)
			sc->cnt[STAT_KICK_SCANNED] += probed;
	}
	if (cpu < 0 || cpu >= MAX_CPUS)
		return;
	kllc = sis_cpu_llc(cpu);

	if (skip_redundant_write(feat, kick_test(cpu), true, kllc))
		return;
	bit = 1ULL << ((u32)cpu % 64);
	word = &kick_pending[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)];
	old = __sync_fetch_and_or(word, bit);
	stat_inc(kllc, STAT_KICK_ATOMIC);
	if (old & bit)
		return;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_inc(kllc, STAT_KICK);
}

void BPF_STRUCT_OPS(sisutil_enqueue, struct task_struct *p, u64 enq_flags)
{
	s32 cpu = scx_bpf_task_cpu(p), llc = sis_cpu_llc(cpu);
	struct vt_ctx *vt;
	u64 key;

	if (llc < 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags);
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_inc(llc, STAT_DIRECT);
		return;
	}

	/*
	 * The EEVDF order (vtime.bpf.h): the virtual deadline, lag within two of
	 * the task's own slices, the key within the wait guard of the LLC clock.
	 * The old rules (a sleeper's slice of credit, 8 slices of debt) let a
	 * stream of waking hackbench tasks overtake a nice-0 task queued behind
	 * nice -20 hogs for 30 s ("runnable task stall (scx_sisutil[227] failed
	 * to run for 29.764s)").
	 */
	vt = vt_get(p, false);
	if (vt) {
		vt_migrate(p, vt, llc);
		key = vt_key(p, vt, llc);
		vt->queued = 1;
	} else {
		struct llc_vtime *lv = llc_vt(llc);

		key = lv ? READ_ONCE(lv->vclock) : 0;
	}
	scx_bpf_dsq_insert_vtime(p, llc, slice_ns, key, enq_flags);
	stat_inc(llc, STAT_ENQUEUE);

	/*
	 * Pinned and migration-disabled tasks can only run where they are, but
	 * they queue in the LLC's vtime DSQ like everyone else: only their CPU
	 * can take them off it (consuming a DSQ skips tasks that cannot run on
	 * the consuming CPU). Straight into the local DSQ, they had strict
	 * priority over the LLC DSQ: stress-ng --affinity kept the local DSQs
	 * of an LLC's CPUs non-empty and the unbound kworker of sched_ext's
	 * own watchdog never ran ("watchdog failed to check in for 5.024s").
	 */
	if (p->nr_cpus_allowed == 1 || is_migration_disabled(p))
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	else
		kick_for_work(llc, p, features());
}

/* Clear this CPU's kick-pending bit; true if it was set (woken for work). */
static bool take_kick(s32 cpu)
{
	u64 bit = 1ULL << ((u32)cpu % 64);
	u64 *word = &kick_pending[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)];

	if (!(READ_ONCE(*word) & bit))
		return false;
	__sync_fetch_and_and(word, ~bit);
	return true;
}

void BPF_STRUCT_OPS(sisutil_dispatch, s32 cpu, struct task_struct *prev)
{
	s32 llc = sis_cpu_llc(cpu);
	struct cpu_ctx *cc = cpu_ctx(cpu);
	bool kicked = take_kick(cpu);
	u64 feat = features();
	u32 k;

	if (llc < 0)
		return;
	if (scx_bpf_dsq_move_to_local(llc, 0)) {
		stat_inc(llc, STAT_DISPATCH_LLC);
		return;
	}
	/* nothing else to run here: let prev go on */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		prev->scx.slice = slice_ns;
		return;
	}

	/*
	 * seed 000 (K Prateek Nayak, "sched/fair: Skip newidle_balance() when
	 * an idle CPU is woken up to process an IPI", 2024): "if (prev ==
	 * rq->idle) return NULL;" - a CPU that was idle and was not asked to
	 * take work goes back to idle at once instead of pulling from others.
	 */
	if ((feat & FEAT_NEWIDLE_SKIP_IPI) && cc && READ_ONCE(cc->idle_start) && !kicked) {
		stat_inc(llc, STAT_HIT_NEWIDLE_SKIP_IPI);
		return;
	}

	/* the newidle balance analog: other LLCs, nearest first */
	bpf_for(k, 0, topo.nr_llcs - 1) {
		if (k >= MAX_LLCS)
			break;
		if (scx_bpf_dsq_move_to_local(topo.llc_steal[llc & (MAX_LLCS - 1)][k & (MAX_LLCS - 1)], 0)) {
			stat_inc(llc, STAT_STEAL);
			return;
		}
	}
}

void BPF_STRUCT_OPS(sisutil_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p), llc = sis_cpu_llc(cpu);
	struct vt_ctx *vt = vt_get(p, false);
	struct cpu_ctx *cc = cpu_ctx(cpu);
	u64 now = bpf_ktime_get_ns();

	if (cc)
		WRITE_ONCE(cc->last_pid, p->pid);
	if (!vt)
		return;
	vt->exec_start = now;
	if (vt->runnable_at) {
		wait_record(now - vt->runnable_at);
		vt->runnable_at = 0;
	}
	/* steals and direct dispatches run tasks charged to another clock */
	if (llc >= 0)
		vt_migrate(p, vt, llc);
	/*
	 * A direct dispatch (select_cpu's insert into an idle CPU's local DSQ)
	 * skips the LLC queue. While that queue holds tasks it gets a quarter
	 * slice, then queues by its deadline like everyone else: direct
	 * dispatches cannot keep the LLC queue waiting.
	 */
	if (!vt->queued && llc >= 0 && scx_bpf_dsq_nr_queued(llc) &&
	    p->scx.slice > slice_ns / 4)
		p->scx.slice = slice_ns / 4;
	vt->queued = 0;
}

void BPF_STRUCT_OPS(sisutil_stopping, struct task_struct *p, bool runnable)
{
	struct vt_ctx *vt = vt_get(p, false);
	u64 now = bpf_ktime_get_ns(), delta;
	u32 w = vt_weight(p);

	if (!vt || !vt->exec_start)
		return;
	delta = now - vt->exec_start;
	vt->exec_start = 0;
	/* v += delta * 100 / w (update_curr: calc_delta_fair) */
	vt->vruntime += vt_scale(delta, w);
	/* V += delta * 100 / W (the LLC clock, see vt_advance) */
	vt_advance(vt->llc, delta, w, now);
	if (runnable)
		vt->runnable_at = now;
}

/*
 * A task becomes runnable (wake-up, new task, class change): EEVDF's
 * place_entity() on this LLC's clock, v = V - vlag, with the lag it had when
 * it stopped being runnable, and its weight joins W.
 */
void BPF_STRUCT_OPS(sisutil_runnable, struct task_struct *p, u64 enq_flags)
{
	s32 llc = sis_cpu_llc(scx_bpf_task_cpu(p));
	struct vt_ctx *vt = vt_get(p, true);
	struct llc_vtime *lv = llc_vt(llc);

	wake_load_runnable(p);
	if (!vt)
		return;
	vt->runnable_at = bpf_ktime_get_ns();
	vt->queued = 0;
	if (!lv)
		return;
	vt_attach(p, vt, llc);
	vt->vruntime = READ_ONCE(lv->vclock) - vt->vlag;
}

/*
 * A task stops being runnable (sleep, exit, class change): update_entity_lag(),
 * vlag = V - v clamped to two of its own slices, and its weight leaves W.
 * Kernel threads keep no debt (negative lag) across sleeps: under soak load a
 * nice-19 khugepaged preempted inside collapse_huge_page()'s RCU section waited
 * out its debt again and again, the grace period stalled for 21 s and 7.3.4
 * ejected the scheduler. A departure from fair.c.
 */
void BPF_STRUCT_OPS(sisutil_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct vt_ctx *vt = vt_get(p, false);
	struct llc_vtime *lv;
	s64 lim;

	wake_load_quiescent(p);
	if (!vt)
		return;
	vt->runnable_at = 0;
	lv = llc_vt(vt->llc);
	if (lv) {
		lim = vt_lag_limit(vt_weight(p));
		vt->vlag = (s64)(READ_ONCE(lv->vclock) - vt->vruntime);
		if (vt->vlag > lim)
			vt->vlag = lim;
		if (vt->vlag < -lim)
			vt->vlag = -lim;
		if ((p->flags & PF_KTHREAD) && vt->vlag < 0)
			vt->vlag = 0;
	}
	vt_detach(vt);
}

/*
 * reweight_entity(): a runnable task's lag is kept in real-time terms,
 * vlag' = vlag * w / w', and W follows the new weight.
 */
void BPF_STRUCT_OPS(sisutil_set_weight, struct task_struct *p, u32 weight)
{
	struct vt_ctx *vt = vt_get(p, false);
	struct llc_vtime *lv;
	s64 lag;

	if (!vt || vt->llc < 0 || !weight || !vt->weight)
		return;
	lv = llc_vt(vt->llc);
	if (lv) {
		lag = (s64)(READ_ONCE(lv->vclock) - vt->vruntime);
		lag = lag * (s64)vt->weight / (s64)weight;
		vt->vruntime = READ_ONCE(lv->vclock) - lag;
	}
	vt_load_add(vt->llc, (s64)weight - (s64)vt->weight);
	vt->weight = weight;
}

/*
 * Idle transitions: per-CPU busy time for the loader's utilization
 * (busy = elapsed - idle_ns, whatever ran: any class, IRQs), SIS_PROP's
 * avg_idle (ttwu_do_activate()), and the has_idle_cores hint
 * (__update_idle_core(), from the scheduler's own idle_start: on 6.12
 * update_idle runs before the builtin idle masks change).
 */
void BPF_STRUCT_OPS(sisutil_update_idle, s32 cpu, bool idle)
{
	struct cpu_ctx *cc = cpu_ctx(cpu);
	u64 now = bpf_ktime_get_ns(), delta;

	if (!cc)
		return;
	if (idle) {
		struct sis_ctx c = { .feat = features() };

		if (!cc->idle_start)
			WRITE_ONCE(cc->idle_start, now);
		update_idle_core(&c, cpu);
		if (c.cnt[STAT_HIT_KICK_SKIP_REDUNDANT])
			stat_inc(sis_cpu_llc(cpu), STAT_HIT_KICK_SKIP_REDUNDANT);
		return;
	}
	if (!cc->idle_start)
		return;
	delta = now - cc->idle_start;
	WRITE_ONCE(cc->idle_ns, cc->idle_ns + delta);
	WRITE_ONCE(cc->idle_start, 0);
	sis_prop_idle_exit(cc, delta, bpf_jiffies64());
}

void BPF_STRUCT_OPS(sisutil_enable, struct task_struct *p)
{
	struct llc_vtime *lv = llc_vt(sis_cpu_llc(scx_bpf_task_cpu(p)));
	struct vt_ctx *vt = vt_get(p, true);

	/* a new task starts at the clock with zero lag */
	if (vt) {
		vt->vruntime = lv ? READ_ONCE(lv->vclock) : 0;
		vt->vlag = 0;
	}
}

/* the task leaves sched_ext: its weight must not stay in W */
void BPF_STRUCT_OPS(sisutil_disable, struct task_struct *p)
{
	struct vt_ctx *vt = vt_get(p, false);

	if (vt)
		vt_detach(vt);
}

s32 BPF_STRUCT_OPS(sisutil_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->ws.recent_used_cpu = -1;
	tctx->ws.last_wakee = -1;
	tctx->load_avg = 1024ULL * p->scx.weight / 100;
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(sisutil_init)
{
	u32 l;
	s32 ret;

	if (!topo.nr_llcs || topo.nr_llcs > MAX_LLCS) {
		scx_bpf_error("bad topology: %u LLCs", topo.nr_llcs);
		return -EINVAL;
	}
	/* sched_init(): avg_idle = 2 * migration cost, wake_avg_idle = avg_idle */
	bpf_for(l, 0, MAX_CPUS) {
		struct cpu_ctx *cc = cpu_ctx(l);

		if (l >= topo.nr_cpu_ids || !cc)
			break;
		cc->max_idle_balance_cost = SIS_PROP_MAX_IDLE_BALANCE_COST;
		cc->avg_idle = 2 * SIS_PROP_MAX_IDLE_BALANCE_COST;
		cc->wake_avg_idle = cc->avg_idle;
		cc->wake_stamp = bpf_jiffies64();
	}
	kick_llc_words_init();
	bpf_for(l, 0, topo.nr_llcs) {
		ret = scx_bpf_create_dsq(l, -1);
		if (ret) {
			scx_bpf_error("failed to create DSQ %u: %d", l, ret);
			return ret;
		}
	}
	return 0;
}

void BPF_STRUCT_OPS(sisutil_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(sisutil_ops,
	       .select_cpu	= (void *)sisutil_select_cpu,
	       .enqueue		= (void *)sisutil_enqueue,
	       .dispatch	= (void *)sisutil_dispatch,
	       .running		= (void *)sisutil_running,
	       .stopping	= (void *)sisutil_stopping,
	       .update_idle	= (void *)sisutil_update_idle,
	       .enable		= (void *)sisutil_enable,
	       .disable		= (void *)sisutil_disable,
	       .runnable	= (void *)sisutil_runnable,
	       .quiescent	= (void *)sisutil_quiescent,
	       .set_weight	= (void *)sisutil_set_weight,
	       .init_task	= (void *)sisutil_init_task,
	       .init		= (void *)sisutil_init,
	       .exit		= (void *)sisutil_exit,
	       .timeout_ms	= 5000,
	       .name		= "sisutil");
