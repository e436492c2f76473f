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

/* Set by the loader before load. */
const volatile struct sis_topo topo;
const volatile u64 slice_ns = DEFAULT_SLICE_US * NSEC_PER_USEC;
const volatile u64 imbalance_pct = DEFAULT_IMBALANCE_PCT;

/* Shared state; the loader reads and writes parts of it through the skeleton. */
struct llc_ctx llc_ctxs[MAX_LLCS];
struct cpu_ctx cpu_ctxs[MAX_CPUS];
/* seed 002's shared flag word: CPUs asked to come and take queued work */
u64 kick_pending[MAX_CPUS / 64];

/* The live feature word; pinned by the loader so `scx_sisutil features` can switch it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
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
	s32 recent_used_cpu;	/* p->recent_used_cpu */
	s32 last_wakee;		/* current->last_wakee, as a pid */
	u32 wakee_flips;	/* p->wakee_flips */
	u64 wakee_flip_decay_ts; /* jiffies */
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

static struct llc_ctx *llc_ctx(s32 llc)
{
	if (llc < 0 || llc >= MAX_LLCS)
		return NULL;
	return &llc_ctxs[llc & (MAX_LLCS - 1)];
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
 * seed 002 (Tim Chen, "sched/balance: Skip unnecessary updates to idle load
 * balancer's flags", 2024): read a shared word before writing it and skip
 * the write when it would not change. Applied to every shared flag here.
 * Returns true when the write was skipped.
 */
static __always_inline bool skip_redundant_write(u64 feat, u64 cur, u64 want, s32 llc)
{
	if (!(feat & FEAT_KICK_SKIP_REDUNDANT) || cur != want)
		return false;
	stat_inc(llc, STAT_HIT_KICK_SKIP_REDUNDANT);
	return true;
}

static __always_inline bool sis_test_idle_cores(struct sis_ctx *c, s32 llc)
{
	struct llc_ctx *lc = llc_ctx(llc);

	return lc && READ_ONCE(lc->has_idle_cores);
}

static __always_inline void sis_set_idle_cores(struct sis_ctx *c, s32 llc, bool val)
{
	struct llc_ctx *lc = llc_ctx(llc);

	if (!lc || skip_redundant_write(c->feat, READ_ONCE(lc->has_idle_cores), val, llc))
		return;
	WRITE_ONCE(lc->has_idle_cores, val);
}

/* update_avg() (fair.c): avg += (sample - avg) / 8 */
static __always_inline void update_avg(u64 *avg, u64 sample)
{
	s64 diff = (s64)(sample - *avg);

	*avg += diff / 8;
}

/*
 * SIS_PROP, the legacy depth removed in v6.7 (reproduced from v6.6's
 * select_idle_cpu): the scan is proportional to how long this CPU is idle
 * on average compared with what a scan costs:
 *   nr = span_weight * wake_avg_idle / (avg_scan_cost + 1), at least 4
 * wake_avg_idle halves for every jiffy since the last wake-up.
 */
static s64 sis_prop_nr(struct sis_ctx *c, s32 llc)
{
	struct cpu_ctx *this = cpu_ctx(c->this_cpu);
	struct llc_ctx *lc = llc_ctx(llc);
	u64 now = bpf_jiffies64(), avg_cost, span_avg;
	u32 i;

	if (!this || !lc)
		return SIS_INT_MAX;

	if (this->wake_stamp < now) {
		bpf_for(i, 0, 64) {
			if (this->wake_stamp >= now || !this->wake_avg_idle)
				break;
			this->wake_stamp++;
			this->wake_avg_idle >>= 1;
		}
		this->wake_stamp = now;
	}

	avg_cost = lc->avg_scan_cost + 1;
	span_avg = lc->weight * this->wake_avg_idle;
	if (span_avg > SIS_PROP_MIN_NR * avg_cost)
		return span_avg / avg_cost;
	return SIS_PROP_MIN_NR;
}

/* The depth of select_idle_cpu(): SIS_PROP first, SIS_UTIL last, as in v6.6. */
static __always_inline s64 sis_depth_begin(struct sis_ctx *c, s32 target, bool has_idle_core)
{
	s32 llc = sis_cpu_llc(target);
	struct llc_ctx *lc = llc_ctx(llc);
	s64 nr = SIS_INT_MAX;

	if (sis_feat(c, FEAT_SIS_PROP) && !has_idle_core) {
		nr = sis_prop_nr(c, sis_cpu_llc(c->this_cpu));
		c->depth_src = DEPTH_SIS_PROP;
		c->scan_start = bpf_ktime_get_ns();
	}
	if (sis_feat(c, FEAT_SIS_UTIL) && lc) {
		/* because !--nr is the condition to stop scan */
		nr = READ_ONCE(lc->nr_idle_scan) + 1;
		c->depth_src = DEPTH_SIS_UTIL;
	}
	return nr;
}

/* SIS_PROP: account the scan's cost against the average idle time. */
static __always_inline void sis_depth_end(struct sis_ctx *c, bool has_idle_core)
{
	struct cpu_ctx *this = cpu_ctx(c->this_cpu);
	struct llc_ctx *lc = llc_ctx(sis_cpu_llc(c->this_cpu));
	u64 time;

	if (!sis_feat(c, FEAT_SIS_PROP) || has_idle_core || !this || !lc)
		return;
	time = bpf_ktime_get_ns() - c->scan_start;
	this->wake_avg_idle -= this->wake_avg_idle < time ? this->wake_avg_idle : time;
	update_avg(&lc->avg_scan_cost, time);
}

#include "sis.bpf.h"

/* ---- select_task_rq_fair and its helpers ---- */

/*
 * record_wakee() + wake_wide() (fair.c): a waker that flips between many
 * wakees, or a wakee woken by many, should not be pulled to the waker.
 * sched_ext does not keep p->wakee_flips for its tasks, so they live here.
 */
static bool wake_wide(struct task_struct *p, struct task_ctx *tctx, s32 llc_size)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task_ctx *wctx;
	u32 master, slave, tmp;
	u64 now = bpf_jiffies64();

	wctx = bpf_task_storage_get(&task_ctxs, cur, 0, 0);
	if (!wctx)
		return false;

	/* record_wakee(): flips decay by half every second (HZ jiffies) */
	if (now > wctx->wakee_flip_decay_ts + (CONFIG_HZ > 0 ? CONFIG_HZ : 250)) {
		wctx->wakee_flips >>= 1;
		wctx->wakee_flip_decay_ts = now;
	}
	if (wctx->last_wakee != p->pid) {
		wctx->last_wakee = p->pid;
		wctx->wakee_flips++;
	}

	master = wctx->wakee_flips;
	slave = tctx->wakee_flips;
	if (master < slave) {
		tmp = master;
		master = slave;
		slave = tmp;
	}
	if (slave < llc_size || master < slave * llc_size)
		return false;
	return true;
}

/*
 * wake_affine_idle() (fair.c) with seed 003 (Julia Lawall, "sched/fair:
 * check for idle core", 2020): after the interrupt and sync cases, an idle
 * prev_cpu wins, so a task does not migrate away from its idle cache.
 * Returns -1 for nr_cpumask_bits ("no opinion").
 */
static s32 wake_affine_idle(struct sis_ctx *c, s32 this_cpu, s32 prev, bool sync)
{
	if (sis_idle(c, this_cpu) && sis_share_cache(this_cpu, prev))
		return sis_idle(c, prev) ? prev : this_cpu;

	/* "sync && cpu_rq(this_cpu)->nr_running == 1": only the waker runs here */
	if (sync && !scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | this_cpu))
		return this_cpu;

	if (sis_feat(c, FEAT_WA_IDLE_PREV) && sis_idle(c, prev)) {
		sis_inc(c, STAT_HIT_WA_IDLE_PREV);
		return prev;
	}
	return -1;
}

/*
 * wake_affine_weight() (fair.c), on the loader's per-CPU utilization:
 * sched_ext does not keep cpu_load()/task_h_load() for its tasks, so the
 * task's own load is not subtracted/added (documented approximation).
 *   this_eff = load(this) * 100 * cap(prev)
 *   prev_eff = load(prev) * (100 + (imbalance_pct - 100) / 2) * cap(this) (+1 if sync)
 */
static s32 wake_affine_weight(struct sis_ctx *c, s32 this_cpu, s32 prev, bool sync)
{
	struct cpu_ctx *tc = cpu_ctx(this_cpu), *pc = cpu_ctx(prev);
	u64 this_eff, prev_eff;

	if (!tc || !pc)
		return -1;
	this_eff = READ_ONCE(tc->util) * 100;
	prev_eff = READ_ONCE(pc->util) * (100 + (imbalance_pct - 100) / 2);
	if (sync)
		prev_eff += 1;
	if (this_eff < prev_eff) {
		sis_inc(c, STAT_HIT_WA_WEIGHT);
		return this_cpu;
	}
	return -1;
}

/* wake_affine() (fair.c): this_cpu if the checks say so, else prev. */
static s32 wake_affine(struct sis_ctx *c, s32 this_cpu, s32 prev, bool sync)
{
	s32 target = wake_affine_idle(c, this_cpu, prev, sync);

	if (sis_feat(c, FEAT_WA_WEIGHT) && target < 0)
		target = wake_affine_weight(c, this_cpu, prev, sync);
	if (target != this_cpu)
		return prev;
	sis_inc(c, STAT_WAKE_AFFINE);
	return this_cpu;
}

/*
 * seed 001 (Mel Gorman, "sched/core: Offload wakee task activation if the
 * wakee is descheduling", 2020; ttwu_queue_cond()): the wakee was the last
 * task on prev, prev now runs its idle task and has nothing queued
 * ("nr_running <= 1" counted the wakee itself, which sched_ext has already
 * dequeued here): activate it there rather than search.
 */
static bool ttwu_queue_desched(struct sis_ctx *c, struct task_struct *p, s32 prev)
{
	struct cpu_ctx *pc = cpu_ctx(prev);
	struct task_struct *curr;

	if (!pc || !sis_allowed(c, prev) || READ_ONCE(pc->last_pid) != p->pid)
		return false;
	curr = __COMPAT_scx_bpf_cpu_curr(prev);
	if (!curr || curr->pid != 0)
		return false;
	if (scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | prev))
		return false;
	/* it may already be in the idle mask: take it so nobody else does */
	sis_claim(c, prev);
	c->claimed = prev;
	sis_inc(c, STAT_HIT_TTWU_QUEUE_DESCHED);
	return true;
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
 * select_task_rq_fair() for a wake-up (WF_TTWU): want_affine, wake_affine,
 * then the fast path select_idle_sibling(p, prev, new_cpu).
 */
static s32 select_task_rq_fair(struct sis_ctx *c, struct task_struct *p, s32 prev, u64 wake_flags)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	s32 this_cpu = c->this_cpu, new_cpu = prev, llc = sis_cpu_llc(this_cpu);
	bool want_affine;

	if (!tctx || llc < 0 || sis_cpu_llc(prev) < 0)
		return prev;

	want_affine = !wake_wide(p, tctx, topo.llc_nr[llc & (MAX_LLCS - 1)]) &&
		      sis_allowed(c, this_cpu);
	if (want_affine && this_cpu != prev)
		new_cpu = wake_affine(c, this_cpu, prev, wake_flags & SCX_WAKE_SYNC);

	return select_idle_sibling(c, prev, new_cpu, &tctx->recent_used_cpu);
}

s32 BPF_STRUCT_OPS(sisutil_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
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
	if (!c)
		return prev_cpu;
	c->feat = features();
	c->this_cpu = bpf_get_smp_processor_id();
	c->prev = prev_cpu;
	c->claimed = -1;
	c->depth_src = DEPTH_NONE;
	__builtin_memset(c->cnt, 0, sizeof(c->cnt));
	copy_allowed(c, p);

	if (sis_feat(c, FEAT_TTWU_QUEUE_DESCHED) && ttwu_queue_desched(c, p, prev_cpu))
		cpu = prev_cpu;
	else
		cpu = select_task_rq_fair(c, p, prev_cpu, wake_flags);

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

/*
 * Ask an idle CPU of @llc to come and take the work just queued there.
 * seed 002: the kick-pending word is shared by all wakers; with
 * KICK_SKIP_REDUNDANT it is read before the atomic OR and nothing is done
 * when the CPU is already asked, and the candidate is searched from
 * this_cpu + 1 (for_each_cpu_wrap) so wakers do not all pick the first one.
 */
static bool kick_idle_cpu(s32 llc, const struct task_struct *p, u64 feat)
{
	s32 this_cpu = bpf_get_smp_processor_id();
	u32 i, start, nr, first = 0;
	const struct cpumask *idle;
	s32 cpu = -1;

	if (llc < 0 || llc >= MAX_LLCS)
		return false;
	start = topo.llc_start[llc & (MAX_LLCS - 1)];
	nr = topo.llc_nr[llc & (MAX_LLCS - 1)];
	if ((feat & FEAT_KICK_SKIP_REDUNDANT) && sis_cpu_llc(this_cpu) == llc)
		first = topo.cpu_llc_pos[this_cpu & (MAX_CPUS - 1)] + 1;

	idle = scx_bpf_get_idle_cpumask();
	bpf_for(i, 0, nr) {
		u32 idx = first + i;
		s32 cand;

		if (idx >= nr)
			idx -= nr;
		idx += start;
		cand = topo.llc_cpus[idx & (MAX_CPUS - 1)];
		if (bpf_cpumask_test_cpu(cand, idle) && bpf_cpumask_test_cpu(cand, p->cpus_ptr)) {
			cpu = cand;
			break;
		}
	}
	scx_bpf_put_idle_cpumask(idle);
	if (cpu < 0)
		return false;

	if (skip_redundant_write(feat, kick_test(cpu), true, llc))
		return true;
	__sync_fetch_and_or(&kick_pending[(u32)cpu / 64 & (MAX_CPUS / 64 - 1)], 1ULL << ((u32)cpu % 64));
	stat_inc(llc, STAT_KICK_ATOMIC);
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_inc(llc, STAT_KICK);
	return true;
}

/* Kick a CPU of @llc, else of the nearest LLC that has an idle one (it will steal). */
static void kick_for_work(s32 llc, const struct task_struct *p, u64 feat)
{
	u32 k;

	if (kick_idle_cpu(llc, p, feat) || llc < 0 || llc >= MAX_LLCS)
		return;
	bpf_for(k, 0, topo.nr_llcs - 1) {
		if (k >= MAX_LLCS)
			break;
		if (kick_idle_cpu(topo.llc_steal[llc & (MAX_LLCS - 1)][k & (MAX_LLCS - 1)], p, feat))
			return;
	}
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
 * avg_idle, and the has_idle_cores hint (__update_idle_core()).
 */
void BPF_STRUCT_OPS(sisutil_update_idle, s32 cpu, bool idle)
{
	struct cpu_ctx *cc = cpu_ctx(cpu);
	u64 now = bpf_ktime_get_ns(), delta;
	s32 llc = sis_cpu_llc(cpu);

	if (!cc)
		return;
	if (idle) {
		if (!cc->idle_start)
			WRITE_ONCE(cc->idle_start, now);
		if (topo.smt && (features() & FEAT_SIS_CORE)) {
			const struct cpumask *smt = scx_bpf_get_idle_smtmask();
			struct sis_ctx c = { .feat = features() };

			/* the whole core is idle now */
			if (bpf_cpumask_test_cpu(cpu, smt))
				sis_set_idle_cores(&c, llc, true);
			scx_bpf_put_idle_cpumask(smt);
		}
		return;
	}
	if (!cc->idle_start)
		return;
	delta = now - cc->idle_start;
	WRITE_ONCE(cc->idle_ns, cc->idle_ns + delta);
	WRITE_ONCE(cc->idle_start, 0);
	/* ttwu_do_activate(): rq->avg_idle, capped at 2 * max_idle_balance_cost */
	update_avg(&cc->avg_idle, delta);
	if (cc->avg_idle > 2 * SIS_PROP_MAX_IDLE_BALANCE_COST)
		cc->avg_idle = 2 * SIS_PROP_MAX_IDLE_BALANCE_COST;
	cc->wake_avg_idle = cc->avg_idle / 2;
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
	tctx->recent_used_cpu = -1;
	tctx->last_wakee = -1;
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
