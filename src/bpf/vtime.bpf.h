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
 * Included from main.bpf.c after the task/LLC helpers (sis_cpu_llc, stat_inc).
 */
#ifndef __SISUTIL_VTIME_BPF_H
#define __SISUTIL_VTIME_BPF_H

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
#ifndef PF_KTHREAD
#define PF_KTHREAD	0x00200000	/* include/linux/sched.h */
#endif

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
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct vt_ctx);
} vt_ctxs SEC(".maps");

/*
 * The scheduler's own wait histogram (runnable -> running), per CPU: no shared
 * atomics. Log2 buckets with 4 sub-buckets each (wait_bucket()).
 */
struct wait_hist {
	u64 bucket[WAIT_NR_BUCKETS];
	u64 count;
	u64 sum_ns;
};

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
	return vt_scale(2 * slice_ns, w);
}

/*
 * The guard: how far V advances in VT_GUARD_NS. Two estimates, the smaller wins:
 * the rate measured over the last window, and the rate the current load allows,
 * nr_cpus * 100 / W per ns (W can grow much faster than a window shows).
 */
static __always_inline u64 vt_guard(struct llc_vtime *lv, s32 llc)
{
	s64 w = READ_ONCE(lv->load);
	u64 nr = topo.llc_nr[llc & (MAX_LLCS - 1)], g = READ_ONCE(lv->guard), est;

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
	key = vt->vruntime + vt_scale(slice_ns, w);
	g = vt_guard(lv, llc);
	key = vt_clamp(key, V, g, g);
	if ((p->flags & PF_KTHREAD) && (s64)(key - (V + vt_scale(slice_ns, VT_NICE0))) > 0)
		key = V + vt_scale(slice_ns, VT_NICE0);
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

#endif /* __SISUTIL_VTIME_BPF_H */
