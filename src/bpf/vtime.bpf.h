/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fairness inside an LLC: EEVDF's rules (fair.c: avg_vruntime, update_entity_lag,
 * place_entity, the virtual deadline) on one vtime-ordered DSQ per LLC, plus a wait
 * guard that bounds every runnable task's wait in real time. docs/DESIGN.md, section
 * "Fairness", states the rules, their bound and where they depart from fair.c.
 *
 * Units: a vtime unit is 1/VT_SCALE ns of a weight-100 (nice 0) task's runtime; a task
 * of weight w advances its vruntime by delta * 100 * VT_SCALE / w. All comparisons are
 * of differences (s64), so the clocks may wrap.
 *
 * The ops callbacks' vtime part is at the end (vt_running() ... vt_disable()); the
 * enqueue takes its key from vt_enqueue_key().
 */
#pragma once

#include <scx/common.bpf.h>
#include "intf.h"
#include "ctx.bpf.h"
#include "shards.bpf.h"	/* llc_queue_nr() */
#include "wait_hist.bpf.h"

#define VT_SCALE	256ULL		/* fixed-point fraction: V advances by tiny steps */
#define VT_NICE0	100ULL		/* sched_ext's weight of nice 0 */
/*
 * The wait guard: no queued task's deadline lies further from the LLC clock than the
 * clock advances in VT_GUARD_NS of real time (see vt_guard()), so a task waits at most
 * about 2 * VT_GUARD_NS + the queue drain (DESIGN.md). Well under sched_ext's watchdog
 * (timeout_ms 5000).
 */
#define VT_GUARD_NS	(200ULL * 1000 * 1000)
/* The clock's rate is measured over windows of this length. */
#define VT_RATE_NS	(50ULL * 1000 * 1000)

/*
 * Per LLC, shared by its CPUs (one cache line). vclock is V, the LLC's virtual time;
 * load is W, the summed weight of the runnable tasks charged to the LLC (fair.c's
 * cfs_rq->avg_load, here for a queue served by several CPUs).
 */
struct llc_vtime {
	u64 vclock;		/* V, in vtime units */
	s64 load;		/* W: sum of p->scx.weight of runnable tasks here */
	u64 rate_t;		/* start of the current rate window (ns) */
	u64 rate_v;		/* V at rate_t */
	u64 guard;		/* V's advance over VT_GUARD_NS, last window */
	u64 __pad[3];
} __attribute__((aligned(64)));

struct llc_vtime llc_vtimes[MAX_LLCS];

/* Per task. Separate from task_ctx: the wake-up path's state lives there. */
struct vt_ctx {
	u64 vruntime;		/* v, against the clock of llc */
	s64 vlag;		/* V - v captured when the task stopped being runnable */
	u64 exec_start;		/* ns, while running */
	u64 runnable_at;	/* ns, while runnable and not running (0 otherwise) */
	s32 llc;		/* the LLC whose W holds this task's weight, -1 none */
	u32 weight;		/* the weight added to W */
	u32 queued;		/* went through ops.enqueue since it became runnable */
	u32 placed;		/* vruntime initialised (ops.enable) */
	u32 lag_weight;		/* the weight vlag is in units of (set at ops.quiescent) */
	u32 __pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct vt_ctx);
} vt_ctxs SEC(".maps");

/* The scheduler's own wait histogram (intf.h), per CPU: no shared atomics. */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct wait_hist);
} wait_hists SEC(".maps");

static __always_inline struct llc_vtime *llc_vt(s32 llc)
{
	if (llc < 0 || llc >= MAX_LLCS)
		return NULL;
	return &llc_vtimes[llc & (MAX_LLCS - 1)];
}

static __always_inline u32 vt_weight(const struct task_struct *p)
{
	return p->scx.weight ? p->scx.weight : 1;
}

/* calc_delta_fair(): real time -> vtime of weight w */
static __always_inline u64 vt_scale(u64 ns, u32 w)
{
	return ns * VT_NICE0 * VT_SCALE / w;
}

/*
 * update_entity_lag()'s limit: a task's lag is bounded by two of its own slices,
 * converted to vtime by its weight (fair.c: max(2 * slice, TICK_NSEC) scaled).
 */
static __always_inline s64 vt_lag_limit(u32 w)
{
	return vt_scale(2 * sis_slice_ns(), w);
}

/*
 * The guard: how far V advances in VT_GUARD_NS. Two estimates, the smaller wins:
 * the rate measured over the last window, and the rate the current load allows,
 * nr_cpus * 100 / W per ns (W can grow much faster than a window shows).
 */
static __always_inline u64 vt_guard(struct llc_vtime *lv, s32 llc)
{
	s64 w = READ_ONCE(lv->load);
	u64 nr = sis_topo()->llc_nr[llc & (MAX_LLCS - 1)], g = READ_ONCE(lv->guard), est;

	if (w < (s64)VT_NICE0)
		w = VT_NICE0;
	est = VT_GUARD_NS / 1000 * nr * VT_NICE0 * VT_SCALE / (u64)w * 1000;
	return est < g ? est : g;
}

/* W += delta, shared by the LLC's CPUs */
static __always_inline void vt_load_add(s32 llc, s64 delta)
{
	struct llc_vtime *lv = llc_vt(llc);

	if (lv && delta)
		__sync_fetch_and_add(&lv->load, delta);
}

/* Charge the task's weight to @llc's W (moving it from where it was). */
static __always_inline void vt_attach(struct task_struct *p, struct vt_ctx *vt, s32 llc)
{
	u32 w = vt_weight(p);

	if (vt->llc == llc && vt->weight == w)
		return;
	if (vt->llc >= 0)
		vt_load_add(vt->llc, -(s64)vt->weight);
	vt->llc = llc;
	vt->weight = w;
	if (llc >= 0)
		vt_load_add(llc, w);
}

static __always_inline void vt_detach(struct vt_ctx *vt)
{
	if (vt->llc >= 0)
		vt_load_add(vt->llc, -(s64)vt->weight);
	vt->llc = -1;
	vt->weight = 0;
}

/*
 * A runnable task moves to another LLC (a steal, a wake-up elsewhere): it keeps its
 * lag and takes the new clock as base, as migrate_task_rq_fair() does. The clocks of
 * two LLCs drift apart by seconds under load; without this a task from a faster LLC
 * was queued "in the future" behind every hog of the slower one ("runnable task stall
 * (rcu_preempt[15] failed to run for 7.180s)" on 7.3.4).
 */
static __always_inline void vt_migrate(struct task_struct *p, struct vt_ctx *vt, s32 llc)
{
	struct llc_vtime *from = llc_vt(vt->llc), *to = llc_vt(llc);

	if (vt->llc == llc || !to)
		return;
	if (from)
		vt->vruntime = vt->vruntime - READ_ONCE(from->vclock) + READ_ONCE(to->vclock);
	else
		vt->vruntime = READ_ONCE(to->vclock);
	vt_attach(p, vt, llc);
}

/* clamp v - V into [-lo, hi] */
static __always_inline u64 vt_clamp(u64 v, u64 V, s64 lo, s64 hi)
{
	s64 d = (s64)(v - V);

	if (d < -lo)
		return V - lo;
	if (d > hi)
		return V + hi;
	return v;
}

/*
 * The DSQ key: EEVDF's virtual deadline, vd = v + slice * 100 / w, kept within the
 * guard of the LLC clock: V - G <= key <= V + G. Kernel threads' deadlines are at most
 * a nice-0 task's (V + one slice): they hold state other tasks wait for (RCU read
 * sections, locks), and an RCU stall makes the kernel eject the scheduler.
 */
static __always_inline u64 vt_key(struct task_struct *p, struct vt_ctx *vt, s32 llc)
{
	struct llc_vtime *lv = llc_vt(llc);
	u32 w = vt_weight(p);
	u64 V, g, key;

	if (!lv)
		return vt->vruntime;
	V = READ_ONCE(lv->vclock);
	/* lag stays within its own bound while queued: |V - v| <= 2 slices of w */
	vt->vruntime = vt_clamp(vt->vruntime, V, vt_lag_limit(w), vt_lag_limit(w));
	key = vt->vruntime + vt_scale(sis_slice_ns(), w);
	g = vt_guard(lv, llc);
	key = vt_clamp(key, V, g, g);
	if ((p->flags & PF_KTHREAD) && (s64)(key - (V + vt_scale(sis_slice_ns(), VT_NICE0))) > 0)
		key = V + vt_scale(sis_slice_ns(), VT_NICE0);
	return key;
}

/*
 * V advances with the weighted work done: dV = delta * 100 / W for every delta of
 * runtime on any CPU of the LLC, so with n CPUs busy dV/dt = n * 100 / W, the rate at
 * which a task receiving its weighted share w / W of n CPUs advances its own v. That
 * keeps V the load-weighted average of the runnable tasks' v (fair.c's avg_vruntime)
 * as long as shares are feasible; lag clamping handles the rest.
 */
static __always_inline void vt_advance(s32 llc, u64 delta, u32 w_running, u64 now)
{
	struct llc_vtime *lv = llc_vt(llc);
	s64 W;
	u64 t0, dv;

	if (!lv)
		return;
	W = READ_ONCE(lv->load);
	if (W < (s64)w_running)
		W = w_running;
	if (W <= 0)
		W = VT_NICE0;
	dv = delta * VT_NICE0 * VT_SCALE / (u64)W;
	__sync_fetch_and_add(&lv->vclock, dv);

	/* one CPU closes the rate window: it wins the cmpxchg on rate_t */
	t0 = READ_ONCE(lv->rate_t);
	if (now - t0 >= VT_RATE_NS &&
	    __sync_bool_compare_and_swap(&lv->rate_t, t0, now)) {
		u64 V = READ_ONCE(lv->vclock), v0 = lv->rate_v;

		if (t0 && now - t0 < 64 * VT_RATE_NS)
			WRITE_ONCE(lv->guard, (V - v0) / ((now - t0) / 1000 + 1) * (VT_GUARD_NS / 1000));
		lv->rate_v = V;
	}
}

static __always_inline void wait_record(u64 ns)
{
	u32 zero = 0;
	struct wait_hist *h = bpf_map_lookup_elem(&wait_hists, &zero);

	if (!h)
		return;
	h->bucket[wait_bucket(ns) & (WAIT_NR_BUCKETS - 1)]++;
	h->count++;
	h->sum_ns += ns;
}

static __always_inline struct vt_ctx *vt_get(struct task_struct *p, bool create)
{
	struct vt_ctx *vt = bpf_task_storage_get(&vt_ctxs, p, 0,
						 create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);

	if (vt && create && !vt->placed) {
		vt->llc = -1;
		vt->placed = 1;
	}
	return vt;
}


/* ---- the ops callbacks' vtime part ---- */

/*
 * The enqueue's DSQ key on @llc: the EEVDF order, the virtual deadline, lag
 * within two of the task's own slices, the key within the wait guard of the
 * LLC clock. The old rules (a sleeper's slice of credit, 8 slices of debt)
 * let a stream of waking hackbench tasks overtake a nice-0 task queued
 * behind nice -20 hogs for 30 s ("runnable task stall (scx_sisutil[227]
 * failed to run for 29.764s)").
 */
static u64 vt_enqueue_key(struct task_struct *p, s32 llc)
{
	struct vt_ctx *vt = vt_get(p, false);
	struct llc_vtime *lv;
	u64 key;

	if (vt) {
		vt_migrate(p, vt, llc);
		key = vt_key(p, vt, llc);
		vt->queued = 1;
		return key;
	}
	lv = llc_vt(llc);
	return lv ? READ_ONCE(lv->vclock) : 0;
}

/* ops.running: the wait ends (histogram), the run starts on this LLC's clock */
static void vt_running(struct task_struct *p)
{
	s32 llc = sis_cpu_llc(scx_bpf_task_cpu(p));
	struct vt_ctx *vt = vt_get(p, false);
	u64 now = bpf_ktime_get_ns();

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
	if (!vt->queued && llc >= 0 && llc_queue_nr(llc) &&
	    p->scx.slice > sis_slice_ns() / 4)
		p->scx.slice = sis_slice_ns() / 4;
	vt->queued = 0;
}

/* ops.stopping: charge the run to the task's v and to the LLC clock V */
static void vt_stopping(struct task_struct *p, bool runnable)
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
 * ops.runnable: a task becomes runnable (wake-up, new task, class change):
 * EEVDF's place_entity() on this LLC's clock, v = V - vlag, with the lag it
 * had when it stopped being runnable, and its weight joins W.
 */
static void vt_runnable(struct task_struct *p)
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
 * ops.quiescent: a task stops being runnable (sleep, exit, class change):
 * update_entity_lag(), vlag = V - v clamped to two of its own slices, and its
 * weight leaves W. Kernel threads keep no debt (negative lag) across sleeps:
 * under soak load a nice-19 khugepaged preempted inside collapse_huge_page()'s
 * RCU section waited out its debt again and again, the grace period stalled
 * for 21 s and 7.3.4 ejected the scheduler. A departure from fair.c.
 */
static void vt_quiescent(struct task_struct *p)
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
		vt->lag_weight = vt_weight(p);
	}
	vt_detach(vt);
}

/*
 * ops.set_weight: reweight_entity(): the task's lag is kept in real-time
 * terms, vlag' = vlag * w / w' ("Because we keep se->vlag = V - v_i, while:
 * lag_i = w_i*(V - v_i), we need to scale se->vlag when w_i changes"),
 * whether the task is runnable (its V - v now) or asleep (the vlag captured at
 * ops.quiescent, which ops.runnable places with); a runnable task's weight in
 * W follows the new weight.
 */
static void vt_set_weight(struct task_struct *p, u32 weight)
{
	struct vt_ctx *vt = vt_get(p, false);
	struct llc_vtime *lv;
	s64 lag;

	if (!vt || !weight)
		return;
	if (vt->llc < 0 || !vt->weight) {
		/* asleep (or never placed): the lag it will be placed with */
		if (vt->lag_weight)
			vt->vlag = vt->vlag * (s64)vt->lag_weight / (s64)weight;
		vt->lag_weight = weight;
		return;
	}
	lv = llc_vt(vt->llc);
	if (lv) {
		lag = (s64)(READ_ONCE(lv->vclock) - vt->vruntime);
		lag = lag * (s64)vt->weight / (s64)weight;
		vt->vruntime = READ_ONCE(lv->vclock) - lag;
	}
	vt_load_add(vt->llc, (s64)weight - (s64)vt->weight);
	vt->weight = weight;
}

/* ops.enable: a new task starts at the clock with zero lag */
static void vt_enable(struct task_struct *p)
{
	struct llc_vtime *lv = llc_vt(sis_cpu_llc(scx_bpf_task_cpu(p)));
	struct vt_ctx *vt = vt_get(p, true);

	if (vt) {
		vt->vruntime = lv ? READ_ONCE(lv->vclock) : 0;
		vt->vlag = 0;
	}
}

/* ops.disable: the task leaves sched_ext: its weight must not stay in W */
static void vt_disable(struct task_struct *p)
{
	struct vt_ctx *vt = vt_get(p, false);

	if (vt)
		vt_detach(vt);
}
