/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * `scx_sisutil latency`: wake-up latency of every task, whatever schedules it
 * (EEVDF, scx_sisutil, any sched_ext scheduler). Runnable -> running delay from
 * the scheduler tracepoints:
 *   sched_wakeup / sched_wakeup_new   the task became runnable (it was enqueued;
 *                                     a task still on its CPU starts no wait)
 *   sched_switch, prev still TASK_RUNNING  preempted: runnable again from now
 *   sched_switch, next                it runs: delay = now - runnable time
 * into log2 histograms (4 sub-buckets per octave) per nice level, per CPU (no
 * shared atomics). Tasks still waiting when the run ends stay in `pending`,
 * which the loader reads too: a starving task never reaches sched_switch.
 * Waits of long_wait_ns or more (0: none) also go, one record each with their
 * start and end (bpf_ktime_get_ns: CLOCK_MONOTONIC, the loader's clock), to the
 * ring buffer `long_waits`: the loader tells how much of each such wait the guest
 * itself stood still (its stall probe), and the waits under long_wait_ns have their
 * longest per nice level in `short_max`.
 * No sched_ext kfunc and no struct_ops: it loads on any kernel with BTF.
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "wait_hist.bpf.h"

char _license[] SEC("license") = "GPL";

struct pending_val {
	u64 since;		/* ns (CLOCK_MONOTONIC), when it became runnable */
	s32 nice;
	u32 __pad;
};

/* pid -> runnable since; one entry per task runnable and not running */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct pending_val);
} pending SEC(".maps");

/* key: nice + 20; struct lat_hist is intf.h's */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WAIT_NR_NICE);
	__type(key, u32);
	__type(value, struct lat_hist);
} lat_hists SEC(".maps");

/* entries that did not fit in `pending` (the map was full) */
u64 dropped;

/* set by the loader before load: waits of this many ns or more go to long_waits */
const volatile u64 long_wait_ns;

/* one long wait: [start_ns, end_ns) on CLOCK_MONOTONIC (latency.rs reads it) */
struct long_wait {
	u64 start_ns;
	u64 end_ns;
	u32 pid;
	s32 nice;
};

/* 4 MiB: 131072 records of 24 bytes + 8 of header; the loader drains it every 50 ms */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} long_waits SEC(".maps");

/* long waits that did not fit in the ring buffer (the loader did not drain it in time) */
u64 long_dropped;

/* key: nice + 20: the longest wait under long_wait_ns (with long_wait_ns set) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, WAIT_NR_NICE);
	__type(key, u32);
	__type(value, u64);
} short_max SEC(".maps");

/*
 * Set by the loader once all three programs are attached: no wait starts before.
 * The programs attach one at a time, and under load the gap between the first and
 * sched_switch's is seconds: a wake-up marked then, with no sched_switch program yet
 * to end it, stayed in `pending`, and the task's next wake-up (BPF_NOEXIST) kept that
 * start, so its next wait counted the time it ran and slept in between (a 31.2 s
 * "wait" of a per-CPU kworker in a 25.3 s trace; docs/results/steady-pinned-wait-2026-11-26).
 */
u32 armed;

static __always_inline s32 task_nice(const struct task_struct *p)
{
	s32 nice = p->static_prio - 120;	/* PRIO_TO_NICE(), MAX_RT_PRIO = 100, NICE_WIDTH 40 */

	if (nice < -20)
		nice = -20;
	if (nice > 19)
		nice = 19;
	return nice;
}

static __always_inline void mark_runnable(struct task_struct *p, u64 flags)
{
	struct pending_val v = { .since = bpf_ktime_get_ns(), .nice = task_nice(p) };
	u32 pid = p->pid;

	if (!pid || !armed)
		return;
	if (bpf_map_update_elem(&pending, &pid, &v, flags) == -E2BIG)
		__sync_fetch_and_add(&dropped, 1);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(waitlat_wakeup, struct task_struct *p)
{
	/*
	 * A wake-up of a task that is on a CPU (it was woken before it could
	 * block: ttwu_runnable()) starts no wait: it may go on running, and
	 * schedule() can pick it again with no sched_switch at all. If it is
	 * switched out still runnable, sched_switch starts its wait.
	 */
	if (BPF_CORE_READ(p, on_cpu))
		return 0;
	/* BPF_NOEXIST: a wake-up of a task already waiting keeps its start */
	mark_runnable(p, BPF_NOEXIST);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(waitlat_wakeup_new, struct task_struct *p)
{
	mark_runnable(p, BPF_NOEXIST);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(waitlat_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct pending_val *v;
	struct lat_hist *h;
	u32 pid = next->pid, key;
	u64 now, d;

	/* prev: preempted (still runnable) waits again from now; else it sleeps */
	if (prev->pid) {
		u32 ppid = prev->pid;

		if (prev->__state == 0)	/* TASK_RUNNING */
			mark_runnable(prev, BPF_ANY);
		else
			bpf_map_delete_elem(&pending, &ppid);
	}
	if (!pid)
		return 0;
	v = bpf_map_lookup_elem(&pending, &pid);
	if (!v)
		return 0;
	now = bpf_ktime_get_ns();
	d = now - v->since;
	key = task_nice(next) + 20;
	bpf_map_delete_elem(&pending, &pid);
	if (long_wait_ns && d >= long_wait_ns) {
		struct long_wait *w = bpf_ringbuf_reserve(&long_waits, sizeof(*w), 0);

		if (w) {
			w->start_ns = now - d;
			w->end_ns = now;
			w->pid = pid;
			w->nice = (s32)key - 20;
			bpf_ringbuf_submit(w, 0);
		} else {
			__sync_fetch_and_add(&long_dropped, 1);
		}
	} else if (long_wait_ns) {
		u64 *m = bpf_map_lookup_elem(&short_max, &key);

		if (m && d > *m)
			*m = d;
	}
	h = bpf_map_lookup_elem(&lat_hists, &key);
	if (!h)
		return 0;
	h->bucket[wait_bucket(d) & (WAIT_NR_BUCKETS - 1)]++;
	h->count++;
	h->sum_ns += d;
	if (d > h->max_ns) {
		h->max_ns = d;
		h->max_pid = pid;
	}
	return 0;
}
