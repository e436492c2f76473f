/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * `scx_sisutil shadow`: the kernel's own wake-up placement as the oracle.
 * At entry of select_task_rq_fair(p, prev_cpu, wake_flags) this object
 * snapshots everything the CFS decision reads (fair.c, v6.12 .. 7.x):
 *
 *   select_task_rq_fair  smp_processor_id(), prev, wake_flags, p->cpus_ptr,
 *                        record_wakee/wake_wide: current->last_wakee,
 *                        ->wakee_flips, ->wakee_flip_decay_ts, p->wakee_flips
 *   wake_affine_idle     available_idle_cpu(this, prev), this_rq nr_running
 *   wake_affine_weight   cpu_load() of this and prev, task_h_load(current),
 *                        task_h_load(p), capacity_of() of both
 *   select_idle_sibling  available_idle_cpu / sched_idle_cpu of every CPU of
 *                        the two LLCs involved (idle_cpu() and, apart,
 *                        vcpu_is_preempted(): KVM's steal_time.preempted), is_per_cpu_kthread(current)
 *                        && in_task() (preempt_count), p->recent_used_cpu, and of
 *                        sd_llc_shared: has_idle_cores, nr_idle_scan
 *
 * and at exit the CPU the kernel chose, with the same idle state re-read (a
 * change between the two is a race, not a disagreement: src/tools/shadow.rs). Three
 * attachments of one object: fentry/fexit where trampolines are allowed,
 * kprobe/kretprobe elsewhere (select_task_rq_fair is called through
 * sched_class->select_task_rq, never inlined), and tp_btf tracepoints where
 * neither is (try_to_wake_up()'s sched_waking for the snapshot, csd_queue_cpu or
 * sched_wakeup for the chosen CPU: see "Tracepoints" below). All kernel reads are CO-RE
 * (BPF_CORE_READ, field flavours for renames) so one object runs on 6.12
 * and 7.x. Records go to a perf event array: one ring per CPU, the losses
 * counted by the kernel and reported to the reader; a failed output is
 * counted here too (per CPU). No sched_ext kfunc, no struct_ops.
 *
 * select_task_rq_fair runs with p->pi_lock held, interrupts off: the entry
 * and the exit of one call are on one CPU with nothing between them on it,
 * so a per-CPU slot carries the snapshot from one to the other.
 */
#include <scx/common.bpf.h>
#include "intf.h"
#include "tool_intf.h"
#include "idle_time.bpf.h"

char _license[] SEC("license") = "GPL";

/* kernel/sched/sched.h (stable since v5.16) */
#define SHADOW_WF_TTWU		0x08
#define SHADOW_PF_KTHREAD	0x00200000
#define SHADOW_PF_EXITING	0x00000004
#define SHADOW_MAX_LEVELS	8
#define MASK_WORDS		(MAX_CPUS / 64)

/* the topology (loader, before load): which CPUs make each LLC */
const volatile struct sis_topo topo;

/*
 * WF_SYNC from the call stack (the loader, from /proc/kallsyms; 0: not resolved): the text
 * of __wake_up_sync_key() and __wake_up_locked_sync_key() (kernel/sched/wait.c), the
 * wait-queue wakers that pass WF_SYNC (pipes, unix and inet sockets, __wake_up_parent()
 * through them). A return address inside one of them on the stack of the wake-up: sync.
 * fentry and kprobe, which read wake_flags, count how often this agrees with it.
 */
#define SHADOW_SYNC_FNS		2
#define SHADOW_STACK_DEPTH	32
const volatile u64 sync_fn_lo[SHADOW_SYNC_FNS], sync_fn_hi[SHADOW_SYNC_FNS];

/* shadow --record --comm: the waker's and the wakee's comm in each record (never otherwise) */
const volatile bool record_comm;

/* One wake-up; field order is the record's ABI with src/tools/shadow.rs (through the skeleton). */
struct shadow_rec {
	u64 jiffies;
	u64 ns;			/* bpf_ktime_get_ns(): with jiffies, the kernel's HZ */
	s32 this_cpu;
	s32 prev;
	s32 chosen;		/* the kernel's answer (exit) */
	u32 wake_flags;
	s32 recent_used_cpu;	/* p->recent_used_cpu at entry */
	u32 pcpu_kthread;	/* is_per_cpu_kthread(current); && in_task() is src/tools/shadow.rs's */
	u32 sync;		/* WF_SYNC && !(current->flags & PF_EXITING) */
	u32 last_wakee_is_p;	/* current->last_wakee == p */
	u32 waker_flips;
	u32 wakee_flips;
	u64 waker_decay_ts;
	u32 waker_flips_exit;	/* after the kernel's record_wakee() */
	u32 this_nr_running;
	u64 waker_decay_ts_exit;
	u64 this_load;		/* cpu_load(this_rq) */
	u64 prev_load;
	u64 waker_load;		/* task_h_load(current) */
	u64 wakee_load;		/* task_h_load(p) */
	u64 this_cap;		/* capacity_of(this_cpu) */
	u64 prev_cap;
	s32 has_idle_cores[2];	/* sd_llc_shared of [0] this_cpu, [1] prev; -1 no sd_llc_shared */
	s32 nr_idle_scan[2];
	s32 has_idle_cores_exit[2];
	s32 nr_idle_scan_exit[2];
	u64 avg_idle;		/* this_rq->avg_idle (for the SIS_PROP counterfactual) */
	u64 avail_idle[MASK_WORDS];	/* available_idle_cpu(), CPUs of the two LLCs */
	u64 sched_idle[MASK_WORDS];	/* sched_idle_cpu() */
	u64 idle_exit[MASK_WORDS];	/* available_idle_cpu() || sched_idle_cpu() at exit */
	u64 read[MASK_WORDS];		/* the CPUs whose state was read */
	u64 allowed[MASK_WORDS];	/* p->cpus_ptr */
	u32 unknown;		/* SHADOW_UNK_*: inputs the attachment cannot read */
	u32 on_cpu;		/* tracepoints: p->on_cpu at sched_waking */
	u32 this_nr_delayed;	/* cfs_h_nr_delayed(this_rq) */
	s32 stack_sync;		/* WF_SYNC inferred from the call stack; -1 not read */
	u32 preempt_count;	/* preempt_count() of the waker (in_task()), low 32 bits */
	u32 pc_layout;		/* SHADOW_PC_*: its layout; 0 not read (tracepoints) */
	u64 util_sum[2];	/* the LLC's sum of cpu_util_cfs(): [0] this_cpu's, [1] prev's */
	u64 util_avg_sum[2];	/* the same of cfs.avg.util_avg alone (no util_est) */
	/*
	 * wake_affine()'s inputs again at exit, for the race test (src/tools/shadow.rs): this_rq's
	 * nr_running and cfs_h_nr_delayed(), cpu_load() of this and prev, task_h_load() of p
	 * and of current. At a tracepoint's exit p may already be queued on the chosen CPU:
	 * this_rq's values are the entry's where that is this_cpu; task_h_load(p) is re-read
	 * on p's cfs_rq and load of the entry (read_wa_exit()). wa_exit_read 0: none read.
	 */
	u32 wa_exit_read;
	u32 this_nr_running_exit;
	u32 this_nr_delayed_exit;
	/*
	 * bit 0 this_rq, bit 1 prev's rq: the runqueue was worked on by its own or another CPU
	 * between entry and exit (its nr_switches, or its nr_running net of p's own enqueue,
	 * moved, or a tick may have run: jiffies moved). fair.c reads cpu_load() of this and
	 * prev without their locks, and a locked section there passes through states never
	 * seen at entry or exit (reweight_entity(): dequeue_load_avg() then enqueue_load_avg()
	 * of a group entity, at every enqueue, dequeue and tick of a task in a task group, as
	 * autogroup puts every session): the race test takes such a load as unknown, 0 .. read.
	 */
	u32 wa_active;
	u64 this_load_exit;
	u64 prev_load_exit;
	u64 waker_load_exit;
	u64 wakee_load_exit;
	/*
	 * vcpu_is_preempted() of the CPUs read at entry (x86 KVM: per_cpu(steal_time,
	 * cpu).preempted & KVM_VCPU_PREEMPTED): available_idle_cpu() is idle_cpu() (avail_idle)
	 * and not this; src/tools/shadow.rs takes them apart. vcpu_read 0: not exposed (no
	 * steal_time in the kernel's BTF), the mask empty. idle_exit already excludes them.
	 */
	u64 vcpu_preempted[MASK_WORDS];
	u32 vcpu_read;
	u32 vcpu_pad;
	char waker_comm[16];	/* record_comm only (shadow --record --comm); else zeros */
	char wakee_comm[16];
};

/* the skeleton exports the record's type through this */
struct shadow_rec shadow_rec_layout;

struct shadow_slot {
	struct shadow_rec rec;
	u64 p;			/* the task of the call in progress, 0 none */
	u32 migrated;		/* tracepoints: sched_migrate_task(p) seen since sched_waking */
	u32 bad;		/* a runqueue could not be reached: not output */
	/*
	 * task_h_load(p)'s inputs of p itself at entry (tracepoints): p->se.cfs_rq, ->se.parent
	 * and ->se.avg.load_avg, which select_task_rq_fair() reads as they are at sched_waking
	 * (p sleeps: nothing updates them before the selection), and which set_task_cpu() (p's
	 * cfs_rq and parent, and migrate_task_rq_fair()'s decay of its load) or the enqueue
	 * (update_load_avg() of p) change after it: the exit's re-read takes these and the
	 * hierarchy's state as it is then (read_wa_exit()).
	 */
	u64 p_cfs;
	u64 p_parent;
	u64 p_load;
	/* nr_switches and nr_running of [0] this_rq, [1] prev's at entry (wa_active) */
	u64 rq_sw[2];
	u32 rq_nr[2];
	u64 stack[SHADOW_STACK_DEPTH];	/* bpf_get_stack() scratch */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct shadow_slot);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u32));
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SHADOW_NR_CNT);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

/*
 * preempt_count() for in_task(), without a per-CPU data symbol (a typed __ksym needs
 * CONFIG_KALLSYMS_ALL: without it the verifier refuses the whole program, "ldimm64 failed
 * to find the address for kernel symbol"). The loader reads from the kernel's BTF (the
 * .data..percpu DATASEC, which lists every per-CPU variable's offset whatever kallsyms
 * shows) how far the preempt count lies from `runqueues` in a CPU's per-CPU area:
 * __preempt_count (x86, v6.15+; an unsigned long with a 64-bit count, whose low 32 bits hold
 * every count in_task() tests, read as such on little-endian x86) or pcpu_hot.preempt_count
 * (v6.2 .. v6.14). The waker's CPU's rq (the symbol's, or the one learned) plus that
 * distance is its count. pc_layout is the layout (SHADOW_PC_*, from which per-CPU
 * variables BTF has), 0 where BTF has neither place: in_task() is then unknown.
 */
const volatile s64 pc_from_rq;
const volatile u32 pc_layout;

static __always_inline u32 shadow_preempt_count(struct rq *this_rq)
{
	u32 pc = 0;

	if (pc_layout && this_rq)
		bpf_probe_read_kernel(&pc, sizeof(pc), (void *)this_rq + pc_from_rq);
	return pc;
}

/*
 * vcpu_is_preempted(cpu) (x86 KVM guests with steal time: __kvm_vcpu_is_preempted(),
 * arch/x86/kernel/kvm.c: per_cpu(steal_time, cpu).preempted & KVM_VCPU_PREEMPTED, bit 0; the
 * host sets it when it schedules the vCPU out while runnable, the guest never writes it
 * before it registers steal time, so it reads 0 where pv steal time is off, as the native
 * vcpu_is_preempted() returns false). Read as the preempt count is: at the distance the
 * loader finds in the kernel's BTF (.data..percpu) from `runqueues` to steal_time.preempted,
 * so that no per-CPU data symbol is named (a typed `steal_time __ksym __weak` would make the
 * verifier refuse every program on a kernel whose kallsyms does not list it, as the 6.18
 * build host's; a weak ksym only covers a symbol absent from BTF). st_read 0 (no steal_time
 * in BTF: not x86, or no CONFIG_KVM_GUEST): not read, every CPU not preempted.
 */
const volatile s64 st_from_rq;
const volatile bool st_read;

static __always_inline bool rq_vcpu_preempted(struct rq *rq)
{
	u8 v = 0;

	if (st_read && rq)
		bpf_probe_read_kernel(&v, sizeof(v), (void *)rq + st_from_rq);
	return v & 1;	/* KVM_VCPU_PREEMPTED */
}

/*
 * cfs_h_nr_delayed(rq) (fair.c): rq->cfs.h_nr_queued - rq->cfs.h_nr_runnable (v6.14+, when
 * h_nr_running became h_nr_queued); v6.13's cfs_rq->h_nr_delayed; before DELAY_DEQUEUE's
 * accounting (6.12.0) neither: 0.
 */
struct cfs_rq___delayed {
	unsigned int h_nr_delayed;
} __attribute__((preserve_access_index));

static __always_inline u32 rq_nr_delayed(struct rq *rq)
{
	if (bpf_core_field_exists(rq->cfs.h_nr_runnable) && bpf_core_field_exists(rq->cfs.h_nr_queued))
		return BPF_CORE_READ(rq, cfs.h_nr_queued) - BPF_CORE_READ(rq, cfs.h_nr_runnable);
	if (bpf_core_field_exists(((struct cfs_rq___delayed *)0)->h_nr_delayed))
		return BPF_CORE_READ((struct cfs_rq___delayed *)&rq->cfs, h_nr_delayed);
	return 0;
}

/* cfs_rq->h_nr_idle (v6.14+) was idle_h_nr_running */
struct cfs_rq___old {
	unsigned int idle_h_nr_running;
} __attribute__((preserve_access_index));

static __always_inline void cnt_inc(u32 i)
{
	u64 *v = bpf_map_lookup_elem(&counters, &i);

	if (v)
		(*v)++;
}

static __always_inline void mask_put(u64 *mask, s32 cpu)
{
	if (cpu >= 0 && cpu < MAX_CPUS)
		mask[((u32)cpu / 64) & (MASK_WORDS - 1)] |= 1ULL << ((u32)cpu % 64);
}

/*
 * cpu_rq(cpu), two ways, chosen at compile time by @learned (every caller is inlined with
 * a constant, so a program built learned holds no reference to a per-CPU data symbol):
 * - the per-CPU runqueues symbol (declared by scx/common.bpf.h), which needs
 *   CONFIG_KALLSYMS_ALL (Debian's kernels have it; without it the verifier refuses the
 *   program: "failed to find the address for kernel symbol");
 * - learned: every CPU's rq as that CPU itself sees it, current->se.cfs_rq->rq (any task's
 *   cfs_rq, of whatever group, belongs to its CPU's rq; the idle task's is set by
 *   init_idle(); CONFIG_FAIR_GROUP_SCHED), kept once rq->cpu is that CPU. Each learned
 *   program (the tracepoints; fentry and kprobe where kallsyms has no `runqueues`) learns its
 *   own CPU's; sched_switch runs on every CPU that does anything. A CPU
 *   not learned yet (or an rq->cpu that differs at use) counts SHADOW_RQ_MISMATCH and the
 *   record is dropped.
 */
static u64 rq_of_cpu[MAX_CPUS];

static __always_inline void learn_this_rq(void)
{
	s32 cpu = bpf_get_smp_processor_id();
	struct cfs_rq *cfs;
	struct rq *rq;

	if (cpu < 0 || cpu >= MAX_CPUS || rq_of_cpu[cpu & (MAX_CPUS - 1)])
		return;
	if (!bpf_core_field_exists(((struct task_struct *)0)->se.cfs_rq))
		return;	/* !CONFIG_FAIR_GROUP_SCHED: not learnable this way */
	cfs = BPF_CORE_READ(bpf_get_current_task_btf(), se.cfs_rq);
	rq = cfs ? BPF_CORE_READ(cfs, rq) : NULL;
	if (rq && BPF_CORE_READ(rq, cpu) == cpu)
		rq_of_cpu[cpu & (MAX_CPUS - 1)] = (u64)rq;
}

static __always_inline struct rq *shadow_rq(s32 cpu, const bool learned)
{
	struct rq *rq;

	if (cpu < 0 || cpu >= MAX_CPUS)
		return NULL;
	if (!learned)
		return (struct rq *)bpf_per_cpu_ptr(&runqueues, cpu);
	rq = (struct rq *)rq_of_cpu[cpu & (MAX_CPUS - 1)];
	if (!rq || BPF_CORE_READ(rq, cpu) != cpu)
		return NULL;	/* the record is dropped and counted (on_exit()) */
	return rq;
}

/* idle_cpu() (available_idle_cpu() is this && !vcpu_is_preempted(): rq_vcpu_preempted()) */
static __always_inline bool rq_idle(struct rq *rq)
{
	return BPF_CORE_READ(rq, curr) == BPF_CORE_READ(rq, idle) &&
	       !BPF_CORE_READ(rq, nr_running) && !BPF_CORE_READ(rq, ttwu_pending);
}

/*
 * cpu_util_cfs(cpu) (fair.c, with UTIL_EST): max(cfs.avg.util_avg, cfs.avg.util_est),
 * capped at the CPU's capacity (SCHED_CAPACITY here: no asymmetric capacity); their sum
 * over an LLC is the sum_util update_idle_cpu_scan() turns into nr_idle_scan, and picks
 * SIS_FIT's bucket in shadow's counterfactual. *@avg: util_avg alone, capped the same way
 * (the depth block's split of the kernel's input: what util_est adds).
 */
static __always_inline u64 rq_util(struct rq *rq, u64 *avg)
{
	u64 u = BPF_CORE_READ(rq, cfs.avg.util_avg), est = 0;

	*avg = u < SCHED_CAPACITY ? u : SCHED_CAPACITY;
	if (bpf_core_field_exists(rq->cfs.avg.util_est) && bpf_core_field_size(rq->cfs.avg.util_est) == 4)
		est = BPF_CORE_READ(rq, cfs.avg.util_est);
	if (est > u)
		u = est;
	return u < SCHED_CAPACITY ? u : SCHED_CAPACITY;
}

/* sched_idle_cpu(): rq->nr_running && rq->nr_running == rq->cfs.h_nr_idle */
static __always_inline bool rq_sched_idle(struct rq *rq)
{
	u32 nr = BPF_CORE_READ(rq, nr_running), idle;

	if (bpf_core_field_exists(rq->cfs.h_nr_idle))
		idle = BPF_CORE_READ(rq, cfs.h_nr_idle);
	else
		idle = BPF_CORE_READ((struct cfs_rq___old *)&rq->cfs, idle_h_nr_running);
	return nr && nr == idle;
}

/*
 * The CPUs of @cpu's LLC: idle (available, sched) at entry, or idle at exit. At a
 * tracepoint's exit the kernel's own wake-up has already reached @chosen (rq->ttwu_pending
 * set for the wakelist, or p enqueued: @chosen_base tasks of nr_running are p's): its exit
 * state is idle_cpu() without that, so that the race test still sees another task arriving.
 * @chosen_base < 0: nothing to discount (fexit, kretprobe). At entry, @sum_k (0 this_cpu's
 * LLC, 1 prev's; < 0 none) picks the util sums the LLC's CPUs are added to.
 */
static __always_inline void read_llc(struct shadow_rec *r, s32 cpu, bool exit, const bool learned,
				     s32 chosen, s32 chosen_base, s32 sum_k)
{
	s32 llc;
	u32 i, start, nr;

	if (cpu < 0 || cpu >= MAX_CPUS)
		return;
	llc = topo.cpu_llc[cpu & (MAX_CPUS - 1)];
	if (llc < 0 || llc >= MAX_LLCS)
		return;
	start = topo.llc_start[llc & (MAX_LLCS - 1)];
	nr = topo.llc_nr[llc & (MAX_LLCS - 1)];
	bpf_for(i, 0, nr) {
		s32 c = topo.llc_cpus[(start + i) & (MAX_CPUS - 1)];
		struct rq *rq = shadow_rq(c, learned);
		bool avail, sidle, preempted;

		if (!rq) {
			r->unknown |= 0x80000000;	/* a CPU not read: the record is dropped */
			continue;
		}
		if (exit && c == chosen && chosen_base >= 0)
			avail = BPF_CORE_READ(rq, curr) == BPF_CORE_READ(rq, idle) &&
				BPF_CORE_READ(rq, nr_running) <= (u32)chosen_base;
		else
			avail = rq_idle(rq);
		sidle = rq_sched_idle(rq);
		preempted = rq_vcpu_preempted(rq);
		if (exit) {
			/* available_idle_cpu() at exit, as the kernel's idle tests read it */
			if ((avail && !preempted) || sidle)
				mask_put(r->idle_exit, c);
			continue;
		}
		mask_put(r->read, c);
		if (sum_k >= 0) {
			u64 avg;

			r->util_sum[sum_k & 1] += rq_util(rq, &avg);
			r->util_avg_sum[sum_k & 1] += avg;
		}
		if (avail)
			mask_put(r->avail_idle, c);
		if (preempted)
			mask_put(r->vcpu_preempted, c);
		if (sidle)
			mask_put(r->sched_idle, c);
	}
}

/*
 * per_cpu(sd_llc_shared, cpu) = highest_flag_domain(cpu, SD_SHARE_LLC)->shared,
 * and only SD_SHARE_LLC domains have ->shared (sd_init()): the highest domain
 * of rq->sd with one.
 */
static __always_inline void read_llc_shared(s32 cpu, s32 *has_idle_cores, s32 *nr_idle_scan,
					    const bool learned)
{
	struct rq *rq = shadow_rq(cpu, learned);
	struct sched_domain *sd;
	struct sched_domain_shared *sds = NULL, *sh;
	int i;

	*has_idle_cores = -1;
	*nr_idle_scan = -1;
	if (!rq)
		return;
	sd = BPF_CORE_READ(rq, sd);
	for (i = 0; i < SHADOW_MAX_LEVELS && sd; i++) {
		sh = BPF_CORE_READ(sd, shared);
		if (sh)
			sds = sh;
		sd = BPF_CORE_READ(sd, parent);
	}
	if (!sds)
		return;
	*has_idle_cores = BPF_CORE_READ(sds, has_idle_cores);
	*nr_idle_scan = BPF_CORE_READ(sds, nr_idle_scan);
}

static __always_inline u64 cfs_load(struct cfs_rq *cfs)
{
	return BPF_CORE_READ(cfs, avg.load_avg);
}

/*
 * task_h_load() (fair.c) of a task whose se.avg.load_avg is @load, on its cfs_rq @cfs0 under
 * its group entity @parent (NULL: the root): p's load seen from the root, with
 * update_cfs_rq_h_load()'s per-jiffy cache: the walk up stops at the first
 * cfs_rq updated this jiffy (its h_load) or at the root (its load), then
 * h_load comes down level by level, each a truncating division as there.
 */
static u64 h_load_of(struct cfs_rq *cfs0, struct sched_entity *parent, u64 load, u64 now)
{
	struct cfs_rq *cfs[SHADOW_MAX_LEVELS + 1] = {};
	struct sched_entity *se[SHADOW_MAX_LEVELS + 1] = {};
	struct sched_entity *s;
	u64 h = 0;
	int i, top = -1;

	cfs[0] = cfs0;
	for (i = 0; i < SHADOW_MAX_LEVELS; i++) {
		struct cfs_rq *c = cfs[i];

		if (!c)
			return load;
		if (BPF_CORE_READ(c, last_h_load_update) == now) {
			h = BPF_CORE_READ(c, h_load);
			top = i;
			break;
		}
		/* the group entity that owns c: c->tg->se[cpu], its parent's cfs_rq */
		s = i ? BPF_CORE_READ(se[i - 1], parent) : parent;
		se[i] = s;
		if (!s) {
			h = cfs_load(c);
			top = i;
			break;
		}
		cfs[i + 1] = BPF_CORE_READ(s, cfs_rq);
	}
	if (top < 0)
		return load;	/* deeper than SHADOW_MAX_LEVELS: not expected */
	for (i = SHADOW_MAX_LEVELS - 1; i >= 0; i--) {
		if (i >= top)
			continue;
		/* cfs[i] is owned by se[i], queued on cfs[i + 1] */
		h = h * BPF_CORE_READ(se[i], avg.load_avg) / (cfs_load(cfs[i + 1]) + 1);
	}
	return load * h / (cfs_load(cfs[0]) + 1);
}

/* task_h_load(p) at jiffy @now: on p's cfs_rq and group entity as they are */
static __always_inline u64 task_h_load(struct task_struct *p, u64 now)
{
	u64 load = BPF_CORE_READ(p, se.avg.load_avg);

	if (!bpf_core_field_exists(p->se.cfs_rq))
		return load;	/* !CONFIG_FAIR_GROUP_SCHED */
	return h_load_of(BPF_CORE_READ(p, se.cfs_rq), BPF_CORE_READ(p, se.parent), load, now);
}

/* WF_SYNC from the call stack: 1, 0, or -1 (not resolved, or no stack) */
static __always_inline s32 stack_sync(void *ctx, struct shadow_slot *s)
{
	long n;
	u32 i, k;

	if (!sync_fn_lo[0])
		return -1;
	n = bpf_get_stack(ctx, s->stack, sizeof(s->stack), 0);
	if (n <= 0)
		return -1;
	n /= sizeof(u64);
	bpf_for(i, 0, SHADOW_STACK_DEPTH) {
		u64 ip;

		if (i >= n)
			break;
		ip = s->stack[i & (SHADOW_STACK_DEPTH - 1)];
		for (k = 0; k < SHADOW_SYNC_FNS; k++)
			if (sync_fn_lo[k] && ip >= sync_fn_lo[k] && ip < sync_fn_hi[k])
				return 1;
	}
	return 0;
}

/*
 * The snapshot. @tp: a tracepoint (WF_SYNC unknown unless the call stack tells, so
 * task_h_load(current) is always read). @learned: cpu_rq() as learned by each CPU (no
 * per-CPU data symbol: the tracepoints, and fentry/kprobe where kallsyms lacks runqueues).
 */
static __always_inline int on_entry(void *ctx, struct task_struct *p, s32 prev,
				    u32 wake_flags, const bool tp, const bool learned)
{
	u32 zero = 0, i, words;
	struct shadow_slot *s = bpf_map_lookup_elem(&slots, &zero);
	struct task_struct *cur = bpf_get_current_task_btf();
	struct shadow_rec *r;
	struct rq *this_rq, *prev_rq;
	s32 this_cpu = bpf_get_smp_processor_id();
	const struct cpumask *mask;
	u32 cur_flags;
	bool kthread;

	cnt_inc(SHADOW_CALLS);
	if (!s)
		return 0;
	s->p = 0;
	s->migrated = 0;
	/* fork and exec balance in sched_balance_find_dst_cpu(): not this path */
	if (!(wake_flags & SHADOW_WF_TTWU))
		return 0;
	r = &s->rec;
	__builtin_memset(r, 0, sizeof(*r));
	r->jiffies = bpf_jiffies64();
	r->ns = bpf_ktime_get_ns();
	r->this_cpu = this_cpu;
	r->prev = prev;
	r->chosen = -1;
	r->wake_flags = wake_flags;
	r->recent_used_cpu = BPF_CORE_READ(p, recent_used_cpu);
	cur_flags = BPF_CORE_READ(cur, flags);
	/* is_per_cpu_kthread(current) && in_task() */
	kthread = (cur_flags & SHADOW_PF_KTHREAD) && BPF_CORE_READ(cur, nr_cpus_allowed) == 1;
	r->pcpu_kthread = kthread;
	if (tp)
		r->unknown = SHADOW_UNK_SYNC;
	if (kthread && !pc_layout)
		r->unknown |= SHADOW_UNK_IN_TASK;
	r->stack_sync = stack_sync(ctx, s);
	if (tp && r->stack_sync >= 0) {
		wake_flags |= r->stack_sync ? 0x10 : 0;
		r->wake_flags = wake_flags;
		r->unknown &= ~SHADOW_UNK_SYNC;
	} else if (!tp && r->stack_sync >= 0) {
		cnt_inc(r->stack_sync == !!(wake_flags & 0x10) ? SHADOW_SYNC_INFER_OK :
								  SHADOW_SYNC_INFER_BAD);
	}
	r->sync = (wake_flags & 0x10) && !(cur_flags & SHADOW_PF_EXITING);
	r->last_wakee_is_p = BPF_CORE_READ(cur, last_wakee) == p;
	r->waker_flips = BPF_CORE_READ(cur, wakee_flips);
	r->waker_decay_ts = BPF_CORE_READ(cur, wakee_flip_decay_ts);
	r->wakee_flips = BPF_CORE_READ(p, wakee_flips);
	if (record_comm) {
		bpf_get_current_comm(r->waker_comm, sizeof(r->waker_comm));
		bpf_probe_read_kernel_str(r->wakee_comm, sizeof(r->wakee_comm), p->comm);
	}

	this_rq = shadow_rq(this_cpu, learned);
	prev_rq = prev >= 0 && prev < MAX_CPUS ? shadow_rq(prev, learned) : NULL;
	r->pc_layout = pc_layout;
	r->preempt_count = shadow_preempt_count(this_rq);
	r->vcpu_read = st_read;
	if (this_rq) {
		r->this_nr_running = BPF_CORE_READ(this_rq, nr_running);
		r->this_nr_delayed = rq_nr_delayed(this_rq);
		r->this_load = cfs_load(&this_rq->cfs);
		r->this_cap = BPF_CORE_READ(this_rq, cpu_capacity);
		r->avg_idle = BPF_CORE_READ(this_rq, avg_idle);
	}
	if (prev_rq) {
		r->prev_load = cfs_load(&prev_rq->cfs);
		r->prev_cap = BPF_CORE_READ(prev_rq, cpu_capacity);
	}
	s->bad = !this_rq || !prev_rq;
	s->rq_sw[0] = this_rq ? BPF_CORE_READ(this_rq, nr_switches) : 0;
	s->rq_nr[0] = r->this_nr_running;
	s->rq_sw[1] = prev_rq ? BPF_CORE_READ(prev_rq, nr_switches) : 0;
	s->rq_nr[1] = prev_rq ? BPF_CORE_READ(prev_rq, nr_running) : 0;
	r->wakee_load = task_h_load(p, r->jiffies);
	s->p_load = BPF_CORE_READ(p, se.avg.load_avg);
	s->p_cfs = 0;
	s->p_parent = 0;
	if (bpf_core_field_exists(p->se.cfs_rq)) {
		s->p_cfs = (u64)BPF_CORE_READ(p, se.cfs_rq);
		s->p_parent = (u64)BPF_CORE_READ(p, se.parent);
	}
	if (r->sync || tp)
		r->waker_load = task_h_load(cur, r->jiffies);

	words = (topo.nr_cpu_ids + 63) / 64;
	mask = BPF_CORE_READ(p, cpus_ptr);
	bpf_for(i, 0, MASK_WORDS) {
		u64 w = 0;

		if (i >= words || !mask)
			break;
		bpf_core_read(&w, sizeof(w), &mask->bits[i]);
		r->allowed[i & (MASK_WORDS - 1)] = w;
	}

	read_llc(r, this_cpu, false, learned, -1, -1, 0);
	if (topo.cpu_llc[prev & (MAX_CPUS - 1)] != topo.cpu_llc[this_cpu & (MAX_CPUS - 1)]) {
		read_llc(r, prev, false, learned, -1, -1, 1);
	} else {
		r->util_sum[1] = r->util_sum[0];
		r->util_avg_sum[1] = r->util_avg_sum[0];
	}
	read_llc_shared(this_cpu, &r->has_idle_cores[0], &r->nr_idle_scan[0], learned);
	read_llc_shared(prev, &r->has_idle_cores[1], &r->nr_idle_scan[1], learned);
	s->p = (u64)p;
	return 0;
}

/*
 * A record's class for the loss count (SHADOW_OUT_CLASS0 + this; src/tools/shadow.rs's
 * out_class() is the same): bit 0 WF_SYNC, bit 1 this_cpu and prev share an LLC. (Not the
 * per-CPU kthread waker: the reader turns that field into `&& in_task()`, so a replay
 * could not class a record as here.)
 */
static __always_inline u32 shadow_out_class(struct shadow_rec *r)
{
	s32 tl = topo.cpu_llc[r->this_cpu & (MAX_CPUS - 1)];
	s32 pl = topo.cpu_llc[r->prev & (MAX_CPUS - 1)];

	return (r->sync ? 1 : 0) | (tl == pl ? 2 : 0);
}

/* shadow_rec.wa_active's test of one runqueue (@k 0 this_rq, 1 prev's) */
static __always_inline bool rq_active(struct rq *rq, struct shadow_slot *s, u32 k, s32 cpu,
				      s32 chosen, s32 chosen_base, bool ticked)
{
	u32 base = chosen_base > 0 && chosen == cpu ? chosen_base : 0;

	if (!rq)
		return true;
	return ticked || BPF_CORE_READ(rq, nr_switches) != s->rq_sw[k & 1] ||
	       BPF_CORE_READ(rq, nr_running) - base != s->rq_nr[k & 1];
}

/*
 * wake_affine()'s inputs at exit (shadow_rec.wa_exit_read). @chosen_base > 0 (sched_wakeup):
 * p is already queued on @chosen; where that is this_cpu (p migrated there), this_rq's
 * nr_running and load include it: kept as at entry (prev's: below).
 * At either tracepoint (@chosen_base >= 0) set_task_cpu() may have moved p's se.cfs_rq to
 * the chosen CPU's, and the enqueue updated p's own load_avg: task_h_load(p) is re-read on
 * p's cfs_rq and group entity of the entry with p's load_avg of the entry (@s), so that the
 * hierarchy's loads and update_cfs_rq_h_load()'s per-jiffy h_load cache, which other CPUs
 * move in between, are the exit's (before: kept from entry, so a change of them between
 * sched_waking and the selection was not seen: residual `wake_affine` disagreements).
 */
static __always_inline void read_wa_exit(struct shadow_rec *r, struct shadow_slot *s,
					 struct task_struct *p, struct task_struct *cur, s32 chosen,
					 s32 chosen_base, const bool learned)
{
	struct rq *this_rq = shadow_rq(r->this_cpu, learned);
	struct rq *prev_rq = shadow_rq(r->prev, learned);
	u64 now = bpf_jiffies64();

	r->this_nr_running_exit = r->this_nr_running;
	r->this_nr_delayed_exit = r->this_nr_delayed;
	r->this_load_exit = r->this_load;
	r->prev_load_exit = r->prev_load;
	if (this_rq && !(chosen_base > 0 && chosen == r->this_cpu)) {
		r->this_nr_running_exit = BPF_CORE_READ(this_rq, nr_running);
		r->this_nr_delayed_exit = rq_nr_delayed(this_rq);
		r->this_load_exit = cfs_load(&this_rq->cfs);
	}
	/*
	 * prev's load is re-read even where p was just queued there (sched_wakeup, chosen ==
	 * prev: not migrated): p's blocked load never left prev's cfs_rq, so the enqueue moves
	 * cpu_load(prev) only as much as update_cfs_group() reweights p's group entities, and
	 * what other CPUs do to prev's runqueue between sched_waking and the selection (its
	 * load read by the kernel unlocked, from the waker's CPU) is seen. Kept from entry
	 * (before), a move of prev's load that decided wake_affine_weight() was a
	 * `wake_affine` disagreement instead of a race.
	 */
	if (prev_rq)
		r->prev_load_exit = cfs_load(&prev_rq->cfs);
	if (chosen_base < 0)
		r->wakee_load_exit = task_h_load(p, now);
	else if (s->p_cfs)
		r->wakee_load_exit = h_load_of((struct cfs_rq *)s->p_cfs,
					       (struct sched_entity *)s->p_parent, s->p_load, now);
	else
		r->wakee_load_exit = r->wakee_load;	/* !CONFIG_FAIR_GROUP_SCHED: p's load */
	r->wa_active = (rq_active(this_rq, s, 0, r->this_cpu, chosen, chosen_base, now != r->jiffies) ? 1 : 0) |
		       (rq_active(prev_rq, s, 1, r->prev, chosen, chosen_base, now != r->jiffies) ? 2 : 0);
	r->waker_load_exit = r->waker_load ? task_h_load(cur, now) : 0;
	r->wa_exit_read = 1;
}

/* The kernel chose @ret; at a tracepoint @chosen_base of its nr_running is the wakee (read_llc). */
static __always_inline int on_exit(void *ctx, s32 ret, const bool learned, s32 chosen_base)
{
	u32 zero = 0;
	struct shadow_slot *s = bpf_map_lookup_elem(&slots, &zero);
	struct task_struct *cur = bpf_get_current_task_btf();
	struct shadow_rec *r;

	if (!s || !s->p) {
		if (s)
			cnt_inc(SHADOW_UNMATCHED);
		return 0;
	}
	r = &s->rec;
	r->chosen = ret;
	r->waker_flips_exit = BPF_CORE_READ(cur, wakee_flips);
	r->waker_decay_ts_exit = BPF_CORE_READ(cur, wakee_flip_decay_ts);
	read_llc(r, r->this_cpu, true, learned, ret, chosen_base, -1);
	if (topo.cpu_llc[r->prev & (MAX_CPUS - 1)] != topo.cpu_llc[r->this_cpu & (MAX_CPUS - 1)])
		read_llc(r, r->prev, true, learned, ret, chosen_base, -1);
	read_llc_shared(r->this_cpu, &r->has_idle_cores_exit[0], &r->nr_idle_scan_exit[0], learned);
	read_llc_shared(r->prev, &r->has_idle_cores_exit[1], &r->nr_idle_scan_exit[1], learned);
	read_wa_exit(r, s, (struct task_struct *)s->p, cur, ret, chosen_base, learned);
	s->p = 0;
	if (s->bad || (r->unknown & 0x80000000)) {
		cnt_inc(SHADOW_RQ_MISMATCH);
		return 0;
	}
	cnt_inc(SHADOW_OUT_CLASS0 + shadow_out_class(r));
	if (bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, r, sizeof(*r)))
		cnt_inc(SHADOW_OUT_FAILED);
	return 0;
}

/* select_task_rq_fair()'s entry, cpu_rq() learned by this CPU first where @learned */
static __always_inline int srqf_entry(void *ctx, struct task_struct *p, int prev_cpu,
				      int wake_flags, const bool learned)
{
	if (learned)
		learn_this_rq();
	return on_entry(ctx, p, prev_cpu, wake_flags, false, learned);
}

/*
 * The four programs of select_task_rq_fair(), fentry/fexit and kprobe/kretprobe, named
 * shadow_ATTACH##suffix. @learned: cpu_rq() as learned by each CPU (learn_this_rq(), with
 * sched_switch attached beside), for where /proc/kallsyms has no `runqueues` (no
 * CONFIG_KALLSYMS_ALL), so that nothing names a per-CPU data symbol; else through
 * `runqueues`. The loader picks one set.
 */
#define SHADOW_SRQF_PROGS(suffix, learned)						\
SEC("fentry/select_task_rq_fair")							\
int BPF_PROG(shadow_fentry##suffix, struct task_struct *p, int prev_cpu, int wake_flags)	\
{											\
	return srqf_entry(ctx, p, prev_cpu, wake_flags, learned);			\
}											\
SEC("fexit/select_task_rq_fair")							\
int BPF_PROG(shadow_fexit##suffix, struct task_struct *p, int prev_cpu, int wake_flags,	\
	     int ret)									\
{											\
	return on_exit(ctx, ret, learned, -1);						\
}											\
SEC("kretprobe/select_task_rq_fair")							\
int BPF_KRETPROBE(shadow_kretprobe##suffix, int ret)					\
{											\
	return on_exit(ctx, ret, learned, -1);						\
}											\
SEC("kprobe/select_task_rq_fair")							\
int BPF_KPROBE(shadow_kprobe##suffix, struct task_struct *p, int prev_cpu, int wake_flags)	\
{											\
	return srqf_entry(ctx, p, prev_cpu, wake_flags, learned);			\
}

SHADOW_SRQF_PROGS(, false)
SHADOW_SRQF_PROGS(_learned, true)

/*
 * Tracepoints (tp_btf), where neither trampolines nor kprobes are allowed. try_to_wake_up()
 * (kernel/sched/core.c, 6.12 .. 7.x), under p->pi_lock with interrupts off, on the waker's
 * CPU:
 *
 *   trace_sched_waking(p);                                   <- snapshot (shadow_waking)
 *   if (p->on_rq && ttwu_runnable(p, wake_flags)) break;     no selection (sched_wakeup)
 *   p->__state = TASK_WAKING;
 *   if (p->on_cpu && ttwu_queue_wakelist(p, task_cpu(p), ..)) break;   no selection (csd)
 *   smp_cond_load_acquire(&p->on_cpu, !VAL);
 *   cpu = select_task_rq(p, p->wake_cpu, &wake_flags);       select_task_rq_fair() when
 *                                                            nr_cpus_allowed > 1 and
 *                                                            migration is not disabled
 *   if (task_cpu(p) != cpu) set_task_cpu(p, cpu);            sched_migrate_task(p, cpu)
 *   ttwu_queue(p, cpu, ..): ttwu_queue_wakelist()            csd_queue_cpu(cpu, .., &p->wake_entry)
 *                           else ttwu_do_activate()          sched_wakeup(p), task_cpu(p) == cpu
 *
 * So the chosen CPU is csd_queue_cpu's cpu or sched_wakeup's task_cpu(p), on the waker's CPU
 * before pi_lock is dropped: the per-CPU slot carries the snapshot as with fentry/fexit.
 * p->on_rq == 0 at sched_waking cannot become 1 under pi_lock (only a wake-up enqueues a
 * sleeping task): ttwu_runnable() is ruled out. p->on_cpu == 1 at sched_waking leaves both
 * wakelist paths open unless sched_migrate_task fired (only the selection moves p) or p->on_cpu
 * is still 1 at csd_queue_cpu (the selection waits for 0): the rest is ambiguous, not output.
 * Not readable here: wake_flags (WF_SYNC, from the call stack where kallsyms shows text;
 * WF_CURRENT_CPU), marked unknown. in_task() is read as at fentry (shadow_preempt_count()).
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(shadow_waking, struct task_struct *p)
{
	u32 zero = 0;
	struct shadow_slot *s = bpf_map_lookup_elem(&slots, &zero);

	learn_this_rq();
	if (!s)
		return 0;
	if (s->p) {
		cnt_inc(SHADOW_TP_NESTED);
		s->p = 0;
	}
	if (p == bpf_get_current_task_btf() || BPF_CORE_READ(p, on_rq)) {
		cnt_inc(SHADOW_TP_ON_RQ);
		return 0;
	}
	/* p->sched_class == &fair_sched_class: the prio's class (no sched_ext attached) */
	if (BPF_CORE_READ(p, prio) < 100) {
		cnt_inc(SHADOW_TP_NOT_FAIR);
		return 0;
	}
	if (BPF_CORE_READ(p, nr_cpus_allowed) <= 1 || BPF_CORE_READ(p, migration_disabled)) {
		cnt_inc(SHADOW_TP_NO_SELECT);
		return 0;
	}
	on_entry(ctx, p, BPF_CORE_READ(p, wake_cpu), SHADOW_WF_TTWU, true, true);
	s->rec.on_cpu = BPF_CORE_READ(p, on_cpu);
	return 0;
}

/*
 * Every CPU's idle time as the scheduler's loader sees it, for the loader's depth beside the
 * kernel's (src/tools/shadow_depth.rs reads these words as loader.rs reads the scheduler's):
 * the scheduler's own idle_enter() and idle_exit() (idle_time.bpf.h) on a cpu_ctx per CPU.
 * A period opens when the CPU switches to its idle task (the scheduler: ops.update_idle(cpu,
 * true)) and closes when it switches away or, first, when a wake-up activates a task on it
 * (sched_wakeup, sched_wakeup_new: ttwu_do_activate(), where the scheduler closes it at its
 * select_cpu's claim of the idle CPU, wake.bpf.h wake_claimed()). Only idle_ns and
 * idle_start are used. A CPU counts busy until its first switch (shadow.rs warms every CPU
 * up before it samples).
 */
struct cpu_ctx shadow_cpus[MAX_CPUS];

static __always_inline struct cpu_ctx *busy_ctx(s32 cpu)
{
	if (cpu < 0 || cpu >= MAX_CPUS)
		return NULL;
	return &shadow_cpus[cpu & (MAX_CPUS - 1)];
}

/* every CPU's rq, learned where it runs (shadow_rq()); its idle periods (the idle task's pid is 0) */
SEC("tp_btf/sched_switch")
int BPF_PROG(shadow_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct cpu_ctx *cc = busy_ctx(bpf_get_smp_processor_id());
	u64 now = bpf_ktime_get_ns();

	learn_this_rq();
	if (!cc)
		return 0;
	if (!BPF_CORE_READ(next, pid))
		idle_enter(cc, now);
	else if (!BPF_CORE_READ(prev, pid))
		idle_exit(cc, now);
	return 0;
}

/* a task activated on its CPU's runqueue: that CPU is busy from now (the claim) */
static __always_inline int busy_claim(struct task_struct *p)
{
	struct cpu_ctx *cc = busy_ctx(BPF_CORE_READ(p, thread_info.cpu));

	if (cc)
		idle_exit(cc, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(shadow_claim, struct task_struct *p)
{
	return busy_claim(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(shadow_claim_new, struct task_struct *p)
{
	return busy_claim(p);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(shadow_migrate, struct task_struct *p, int dest_cpu)
{
	u32 zero = 0;
	struct shadow_slot *s = bpf_map_lookup_elem(&slots, &zero);

	if (s && s->p == (u64)p)
		s->migrated = 1;
	return 0;
}

SEC("tp_btf/csd_queue_cpu")
int BPF_PROG(shadow_csd, const unsigned int cpu, unsigned long callsite, void *func, void *csd)
{
	u32 zero = 0;
	struct shadow_slot *s = bpf_map_lookup_elem(&slots, &zero);
	struct task_struct *p;

	/* __ttwu_queue_wakelist() queues &p->wake_entry (a call_single_data_t's first member) */
	if (!s || !s->p ||
	    (u64)csd != s->p + bpf_core_field_offset(struct task_struct, wake_entry))
		return 0;
	p = (struct task_struct *)s->p;
	if (s->rec.on_cpu && !s->migrated) {
		cnt_inc(BPF_CORE_READ(p, on_cpu) ? SHADOW_TP_ON_CPU : SHADOW_TP_AMBIGUOUS);
		s->p = 0;
		return 0;
	}
	return on_exit(ctx, cpu, true, 0);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(shadow_wakeup, struct task_struct *p)
{
	u32 zero = 0;
	struct shadow_slot *s = bpf_map_lookup_elem(&slots, &zero);

	if (!s || s->p != (u64)p)
		return 0;
	/* ttwu_do_activate() on cpu_rq(cpu) from the waker's CPU: p is one of its nr_running */
	return on_exit(ctx, BPF_CORE_READ(p, thread_info.cpu), true, 1);
}
