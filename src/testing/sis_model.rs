// SPDX-License-Identifier: GPL-2.0-only
//! Reference model of the kernel's wake-up placement, written from
//! kernel/sched/fair.c: select_task_rq_fair() for a WF_TTWU wake-up
//! (record_wakee, wake_wide, wake_affine -> wake_affine_idle /
//! wake_affine_weight), select_idle_sibling() with the per-CPU kthread
//! check and recent_used_cpu, select_idle_smt(), select_idle_cpu() with
//! v6.6's SIS_PROP and SIS_UTIL depths, select_idle_core(); on
//! no-capacity-asymmetry, no-cluster, no-SCHED_IDLE machines.
//!
//! It is the specification the BPF code (src/bpf/sis.bpf.h, run on the host
//! through src/bpf/testing/sis_test.bpf.c) is compared with in sis_test.rs. It is
//! written over plain cpumasks and maps, not from the BPF: LLC spans and SMT
//! masks come from the topology *description*, never from `struct
//! sis_topo`, and the counters are derived differently (see below).
//!
//! sched_ext adaptations, each a no-op under the kernel's own invariants:
//! - target and prev are tested against p->cpus_ptr before they are probed.
//! - recent_used_cpu is tested for cpus_ptr before it is probed.
//! - recent_used_cpu == -1 means "none"; a waker or prev CPU outside the
//!   topology leaves the task on prev.
//!
//! Counters (`enum sis_stat`, Mel Gorman's SIS schedstats: lore
//! 20210726102247.21437-2-mgorman@techsingularity.net): the model logs the
//! decision's events and every CPU handed to available_idle_cpu() after the
//! fast checks, and derives the counts at the end:
//! - SEARCH = 1 for every wake-up that reached select_idle_sibling().
//! - FAST = 1 when it returned before its domain search (target, prev, the
//!   per-CPU kthread case, recent_used_cpu); RECENT for the last.
//! - SCANNED = 1 (target, prev and recent are "treated as one scan") +
//!   the CPUs visited after them: each CPU of select_idle_smt()'s loop
//!   (counted at the top of the loop, the target included), each thread
//!   select_idle_core() tests, each CPU __select_idle_cpu() tests.
//!   DOMAIN_SCANNED = those visits.
//! - DOMAIN_SEARCH: the fast checks failed (before the SMT check).
//! - FAILED, CORE_SEARCH/CORE_FAILED, SCAN_SKIPPED (SIS_UTIL nr == 1),
//!   DEPTH_LIMITED (stopped by !--nr, also HIT_SIS_PROP or HIT_SIS_UTIL
//!   after the depth that was in force), SMT, HIT_SIS_CORE, WAKE_AFFINE,
//!   HIT_WA_IDLE_PREV, HIT_WA_WEIGHT as their names say.

use std::collections::{BTreeMap, BTreeSet};

use crate::bpf_intf as bi;
use crate::sched::features::bit;
use crate::sched::topology::TopoDesc;

pub const STAT_NR: usize = bi::sis_stat_STAT_NR as usize;

pub type Cpumask = BTreeSet<usize>;

/// The machine as the scheduler core sees it: cpumasks by CPU id.
#[derive(Clone, Debug)]
pub struct Machine {
    /// highest CPU id + 1 (bits of for_each_cpu_wrap)
    pub nr_cpu_ids: usize,
    /// per_cpu(sd_llc_id): the kernel's LLC id, None for an absent CPU
    llc_id: BTreeMap<usize, usize>,
    /// sched_domain_span(sd_llc) per LLC id
    llc_span: BTreeMap<usize, Cpumask>,
    /// cpu_smt_mask(cpu)
    smt_mask: BTreeMap<usize, Cpumask>,
    /// sched_smt_active(): some core has more than one thread
    pub smt_active: bool,
}

impl Machine {
    pub fn new(desc: &TopoDesc) -> Self {
        let mut llc_id = BTreeMap::new();
        let mut llc_span: BTreeMap<usize, Cpumask> = BTreeMap::new();
        let mut cores: BTreeMap<usize, Cpumask> = BTreeMap::new();
        for c in &desc.cpus {
            llc_id.insert(c.id, c.llc);
            llc_span.entry(c.llc).or_default().insert(c.id);
            cores.entry(c.core).or_default().insert(c.id);
        }
        let mut smt_mask = BTreeMap::new();
        for sibs in cores.values() {
            for &cpu in sibs {
                smt_mask.insert(cpu, sibs.clone());
            }
        }
        Machine {
            nr_cpu_ids: desc.cpus.iter().map(|c| c.id + 1).max().unwrap_or(0),
            llc_id,
            llc_span,
            smt_mask,
            smt_active: cores.values().any(|s| s.len() > 1),
        }
    }

    /// The present CPUs, ascending.
    pub fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.llc_id.keys().copied()
    }

    /// cpus_share_cache(a, b); absent CPUs share nothing.
    pub fn share_cache(&self, a: i64, b: i64) -> bool {
        let l = |c: i64| usize::try_from(c).ok().and_then(|c| self.llc_id.get(&c));
        matches!((l(a), l(b)), (Some(x), Some(y)) if x == y)
    }

    /// per_cpu(sd_llc_id, cpu)
    pub fn llc_id_of(&self, cpu: usize) -> Option<usize> {
        self.llc_id.get(&cpu).copied()
    }

    pub fn llc_span_of(&self, cpu: usize) -> Option<&Cpumask> {
        self.llc_id.get(&cpu).map(|l| &self.llc_span[l])
    }

    pub fn smt_mask(&self, cpu: usize) -> Cpumask {
        self.smt_mask.get(&cpu).cloned().unwrap_or_default()
    }

    /// for_each_cpu_wrap(cpu, mask, start) visits bit positions start,
    /// start+1, .., nr_cpu_ids-1, 0, .., start-1; `start` may be
    /// nr_cpu_ids (wrap from target + 1 with target the last CPU), which
    /// behaves as 0. The caller tests each position against the live mask.
    fn wrap_order(&self, start: usize) -> impl Iterator<Item = usize> {
        let n = self.nr_cpu_ids;
        let start = if n == 0 { 0 } else { start % n };
        (0..n).map(move |i| (start + i) % n)
    }
}

/// current's (the waker's) record_wakee() bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flips {
    pub last_wakee: i32,
    pub wakee_flips: u32,
    pub wakee_flip_decay_ts: u64,
}

/// One wake-up: what try_to_wake_up() hands to select_task_rq_fair(), and
/// the runqueues, domains and tasks it reads.
#[derive(Clone, Debug)]
pub struct Wakeup {
    /// sched_feat() word (intf.h FEAT_*)
    pub features: u64,
    /// smp_processor_id(): the waker's CPU
    pub this_cpu: usize,
    /// task_cpu(p)
    pub prev: usize,
    /// WF_SYNC
    pub sync: bool,
    /// p->recent_used_cpu, -1: none
    pub recent: i32,
    /// p, as current->last_wakee records it
    pub wakee_id: i32,
    /// is_per_cpu_kthread(current) && in_task()
    pub pcpu_kthread: bool,
    pub waker: Flips,
    /// p->wakee_flips
    pub wakee_flips: u32,
    pub hz: u64,
    pub jiffies: u64,
    /// task_h_load(current), task_h_load(p)
    pub waker_load: u64,
    pub wakee_load: u64,
    /// sd->imbalance_pct of the domains above SMT
    pub imbalance_pct: u64,
    /// available_idle_cpu()
    pub idle: Cpumask,
    /// p->cpus_ptr
    pub allowed: Cpumask,
    /// cpu_rq(cpu)->nr_running (absent: 0)
    pub nr_running: BTreeMap<usize, u32>,
    /// cpu_load(cpu_rq(cpu)) (absent: 0)
    pub load: BTreeMap<usize, u64>,
    /// per LLC id: sd_llc_shared->nr_idle_scan and ->has_idle_cores
    pub nr_idle_scan: BTreeMap<usize, u64>,
    pub has_idle_cores: BTreeMap<usize, bool>,
    /// this_rq()->wake_avg_idle, ->wake_stamp, this CPU's sd_llc->avg_scan_cost
    pub wake_avg_idle: u64,
    pub wake_stamp: u64,
    pub avg_scan_cost: u64,
}

impl Wakeup {
    /// A neutral wake-up of task `id` (the waker's last wakee already): no sync, no
    /// recent CPU, no flips, no load, HZ 250 at jiffy 1000, imbalance_pct 117; no runqueue,
    /// LLC or SIS_PROP state (the caller adds what its case needs).
    pub fn neutral(
        features: u64,
        (this_cpu, prev): (usize, usize),
        id: i32,
        idle: Cpumask,
        allowed: Cpumask,
    ) -> Wakeup {
        Wakeup {
            features,
            this_cpu,
            prev,
            sync: false,
            recent: -1,
            wakee_id: id,
            pcpu_kthread: false,
            waker: Flips {
                last_wakee: id,
                wakee_flips: 0,
                wakee_flip_decay_ts: 1000,
            },
            wakee_flips: 0,
            hz: 250,
            jiffies: 1000,
            waker_load: 0,
            wakee_load: 0,
            imbalance_pct: 117,
            idle,
            allowed,
            nr_running: BTreeMap::new(),
            load: BTreeMap::new(),
            nr_idle_scan: BTreeMap::new(),
            has_idle_cores: BTreeMap::new(),
            wake_avg_idle: 0,
            wake_stamp: 1000,
            avg_scan_cost: 0,
        }
    }
}

/// What the wake-up did to the state, and the CPU it chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub cpu: usize,
    pub recent: i32,
    pub waker: Flips,
    pub has_idle_cores: BTreeMap<usize, bool>,
    pub wake_avg_idle: u64,
    pub wake_stamp: u64,
    pub avg_scan_cost: u64,
    pub cnt: [u64; STAT_NR],
}

/// The test's mutation switch: one comparison of the model flipped, to show
/// that the differential test notices (`SIS_MODEL_MUTATE=1`).
pub fn mutate_from_env() -> bool {
    std::env::var("SIS_MODEL_MUTATE").is_ok_and(|v| v == "1")
}

const NR_CPUMASK_BITS: usize = usize::MAX;

struct Rq<'a> {
    m: &'a Machine,
    w: Wakeup,
    mutate: bool,
    /// CPUs passed to available_idle_cpu() after the fast checks, in order:
    /// SCANNED and DOMAIN_SCANNED are derived from it at the end
    domain_visits: Vec<usize>,
    /// named events of the decision, turned into counters at the end
    ev: BTreeMap<u32, u64>,
}

impl Rq<'_> {
    fn feat(&self, f: u64) -> bool {
        self.w.features & f != 0
    }
    fn event(&mut self, stat: u32) {
        *self.ev.entry(stat).or_default() += 1;
    }
    fn available_idle_cpu(&self, cpu: usize) -> bool {
        self.w.idle.contains(&cpu)
    }
    fn nr_running(&self, cpu: usize) -> u32 {
        self.w.nr_running.get(&cpu).copied().unwrap_or(0)
    }
    fn cpu_load(&self, cpu: usize) -> i64 {
        self.w.load.get(&cpu).copied().unwrap_or(0) as i64
    }
    fn in_cpus_ptr(&self, cpu: usize) -> bool {
        self.w.allowed.contains(&cpu)
    }
    fn llc(&self, cpu: usize) -> Option<usize> {
        self.m.llc_id.get(&cpu).copied()
    }

    /// record_wakee(p)
    fn record_wakee(&mut self) {
        let now = self.w.jiffies;
        let cur = &mut self.w.waker;
        // time_after(jiffies, current->wakee_flip_decay_ts + HZ)
        if (now as i64).wrapping_sub(cur.wakee_flip_decay_ts.wrapping_add(self.w.hz) as i64) > 0 {
            cur.wakee_flips >>= 1;
            cur.wakee_flip_decay_ts = now;
        }
        if cur.last_wakee != self.w.wakee_id {
            cur.last_wakee = self.w.wakee_id;
            cur.wakee_flips += 1;
        }
    }

    /// wake_wide(p): factor = this CPU's sd_llc_size
    fn wake_wide(&self) -> bool {
        let mut master = self.w.waker.wakee_flips;
        let mut slave = self.w.wakee_flips;
        let factor = self.m.llc_span_of(self.w.this_cpu).map_or(1, |s| s.len()) as u32;
        if master < slave {
            std::mem::swap(&mut master, &mut slave);
        }
        !(slave < factor || master < slave * factor)
    }

    /// wake_affine_idle(this_cpu, prev_cpu, sync), WA_IDLE_PREV as a feature
    fn wake_affine_idle(&mut self, this_cpu: usize, prev: usize, sync: bool) -> usize {
        if self.available_idle_cpu(this_cpu) && self.m.share_cache(this_cpu as i64, prev as i64) {
            return if self.available_idle_cpu(prev) {
                prev
            } else {
                this_cpu
            };
        }
        if sync && self.nr_running(this_cpu) == 1 {
            return this_cpu;
        }
        if self.feat(bit::WA_IDLE_PREV) && self.available_idle_cpu(prev) {
            self.event(bi::sis_stat_STAT_HIT_WA_IDLE_PREV);
            return prev;
        }
        NR_CPUMASK_BITS
    }

    /// wake_affine_weight(sd, p, this_cpu, prev_cpu, sync), capacities equal
    fn wake_affine_weight(&mut self, this_cpu: usize, prev: usize, sync: bool) -> usize {
        // sd: the lowest domain spanning both: SMT (110) or above (117)
        let pct = if self.m.smt_mask(this_cpu).contains(&prev) {
            110
        } else {
            self.w.imbalance_pct as i64
        };
        let cap = 1024i64;
        let mut this_eff_load = self.cpu_load(this_cpu);
        if sync {
            let current_load = self.w.waker_load as i64;
            if current_load > this_eff_load {
                return this_cpu;
            }
            this_eff_load -= current_load;
        }
        let task_load = self.w.wakee_load as i64;
        this_eff_load += task_load;
        this_eff_load *= 100; // WA_BIAS
        this_eff_load *= cap;
        let mut prev_eff_load = self.cpu_load(prev);
        prev_eff_load -= task_load;
        prev_eff_load *= 100 + (pct - 100) / 2;
        prev_eff_load *= cap;
        if sync {
            prev_eff_load += 1;
        }
        if this_eff_load < prev_eff_load {
            this_cpu
        } else {
            NR_CPUMASK_BITS
        }
    }

    /// wake_affine(sd, p, this_cpu, prev_cpu, sync)
    fn wake_affine(&mut self, this_cpu: usize, prev: usize, sync: bool) -> usize {
        let mut target = self.wake_affine_idle(this_cpu, prev, sync);
        if self.feat(bit::WA_WEIGHT) && target == NR_CPUMASK_BITS {
            target = self.wake_affine_weight(this_cpu, prev, sync);
            if target == this_cpu {
                self.event(bi::sis_stat_STAT_HIT_WA_WEIGHT);
            }
        }
        if target != this_cpu {
            return prev;
        }
        self.event(bi::sis_stat_STAT_WAKE_AFFINE);
        target
    }

    fn test_idle_cores(&self, cpu: usize) -> bool {
        self.llc(cpu)
            .and_then(|l| self.w.has_idle_cores.get(&l).copied())
            .unwrap_or(false)
    }

    fn set_idle_cores(&mut self, cpu: usize, val: bool) {
        if let Some(l) = self.llc(cpu) {
            self.w.has_idle_cores.insert(l, val);
        }
    }

    /// select_idle_smt(p, sd, target): for_each_cpu_and(cpu, cpu_smt_mask(target), p->cpus_ptr)
    fn select_idle_smt(&mut self, sd_target: usize, target: usize) -> Option<usize> {
        for cpu in self.m.smt_mask(target) {
            if !self.in_cpus_ptr(cpu) {
                continue;
            }
            // the schedstat: every CPU of the loop, at its top
            self.domain_visits.push(cpu);
            if cpu == target {
                continue;
            }
            if !self.m.share_cache(cpu as i64, sd_target as i64) {
                continue;
            }
            if self.available_idle_cpu(cpu) {
                return Some(cpu);
            }
        }
        None
    }

    /// select_idle_core(p, core, cpus, &idle_cpu)
    fn select_idle_core(
        &mut self,
        core: usize,
        cpus: &mut Cpumask,
        idle_cpu: &mut Option<usize>,
    ) -> Option<usize> {
        let mut idle = true;
        for cpu in self.m.smt_mask(core) {
            self.domain_visits.push(cpu);
            if !self.available_idle_cpu(cpu) {
                idle = false;
                if idle_cpu.is_none() {
                    continue;
                }
                break;
            }
            if idle_cpu.is_none() && cpus.contains(&cpu) {
                *idle_cpu = Some(cpu);
            }
        }
        if idle {
            return Some(core);
        }
        for cpu in self.m.smt_mask(core) {
            cpus.remove(&cpu);
        }
        None
    }

    /// select_idle_cpu(p, sd, has_idle_core, target): v6.6 with SIS_PROP
    /// and SIS_UTIL, the v6.12 loop.
    fn select_idle_cpu(&mut self, has_idle_core: bool, target: usize) -> Option<usize> {
        let span = self.m.llc_span_of(target)?.clone();
        let mut cpus: Cpumask = span.intersection(&self.w.allowed).copied().collect();
        let mut nr: i64 = i32::MAX as i64;
        let mut prop = false;
        let mut by_prop = false;
        let mut probes = 0u64;

        if has_idle_core {
            self.event(bi::sis_stat_STAT_CORE_SEARCH);
        }

        if self.feat(bit::SIS_PROP) && !has_idle_core {
            let now = self.w.jiffies;
            // this_sd = sd_llc of this CPU
            self.llc(self.w.this_cpu)?;
            // "age away the remaining predicted idle time"
            while self.w.wake_stamp < now && self.w.wake_avg_idle != 0 {
                self.w.wake_stamp += 1;
                self.w.wake_avg_idle >>= 1;
            }
            let avg_idle = self.w.wake_avg_idle;
            let avg_cost = self.w.avg_scan_cost + 1;
            let span_avg = span.len() as u64 * avg_idle;
            nr = if span_avg > 4 * avg_cost {
                (span_avg / avg_cost) as i64
            } else {
                4
            };
            prop = true;
            by_prop = true;
        }

        if self.feat(bit::SIS_UTIL) {
            let l = self.llc(target).expect("target has an LLC");
            nr = self.w.nr_idle_scan.get(&l).copied().unwrap_or(0) as i64 + 1;
            by_prop = false;
            if nr == 1 {
                self.event(bi::sis_stat_STAT_SCAN_SKIPPED);
                self.event(bi::sis_stat_STAT_HIT_SIS_UTIL);
                return None;
            }
        }

        let mut idle_cpu = None;
        for cpu in self.m.wrap_order(target + 1) {
            if !cpus.contains(&cpu) {
                continue;
            }
            if has_idle_core {
                if let Some(i) = self.select_idle_core(cpu, &mut cpus, &mut idle_cpu) {
                    self.event(bi::sis_stat_STAT_HIT_SIS_CORE);
                    return Some(i);
                }
            } else {
                nr -= 1;
                // "!--nr"; the mutation stops one CPU later
                if (!self.mutate && nr == 0) || (self.mutate && nr < 0) {
                    self.event(bi::sis_stat_STAT_DEPTH_LIMITED);
                    self.event(if by_prop {
                        bi::sis_stat_STAT_HIT_SIS_PROP
                    } else {
                        bi::sis_stat_STAT_HIT_SIS_UTIL
                    });
                    return None;
                }
                // __select_idle_cpu()
                probes += 1;
                self.domain_visits.push(cpu);
                if self.available_idle_cpu(cpu) {
                    idle_cpu = Some(cpu);
                    break;
                }
            }
        }

        if has_idle_core {
            self.event(bi::sis_stat_STAT_CORE_FAILED);
            self.set_idle_cores(target, false);
        }

        if prop {
            // time = cpu_clock(this) - time, in kernel units: a fixed cost per probe
            let t = probes * bi::sis_consts_SIS_PROP_PROBE_NS as u64;
            self.w.wake_avg_idle -= self.w.wake_avg_idle.min(t);
            // update_avg(): avg += (sample - avg) / 8, signed
            let diff = t as i64 - self.w.avg_scan_cost as i64;
            self.w.avg_scan_cost = (self.w.avg_scan_cost as i64 + diff / 8) as u64;
        }
        idle_cpu
    }

    /// select_idle_sibling(p, prev, target)
    fn select_idle_sibling(&mut self, prev: usize, target: usize) -> usize {
        // sched_ext: the callers' invariant (target, prev in cpus_ptr) is tested
        if self.in_cpus_ptr(target) && self.available_idle_cpu(target) {
            return target;
        }
        if prev != target
            && self.m.share_cache(prev as i64, target as i64)
            && self.in_cpus_ptr(prev)
            && self.available_idle_cpu(prev)
        {
            return prev;
        }
        // "Allow a per-cpu kthread to stack with the wakee"
        if self.w.pcpu_kthread
            && prev == self.w.this_cpu
            && self.nr_running(self.w.this_cpu) <= 1
            && self.in_cpus_ptr(prev)
        {
            return prev;
        }
        let recent = self.w.recent;
        self.w.recent = prev as i32;
        if recent >= 0 {
            let r = recent as usize;
            if r != prev
                && r != target
                && self.m.share_cache(r as i64, target as i64)
                && self.in_cpus_ptr(r)
                && self.available_idle_cpu(r)
            {
                self.event(bi::sis_stat_STAT_RECENT);
                return r;
            }
        }
        if self.m.llc_span_of(target).is_none() {
            return target;
        }
        self.event(bi::sis_stat_STAT_DOMAIN_SEARCH);

        let mut has_idle_core = false;
        if self.m.smt_active && self.feat(bit::SIS_CORE) {
            has_idle_core = self.test_idle_cores(target);
            if !has_idle_core && self.m.share_cache(prev as i64, target as i64) {
                if let Some(i) = self.select_idle_smt(target, prev) {
                    self.event(bi::sis_stat_STAT_SMT);
                    return i;
                }
            }
        }
        if let Some(i) = self.select_idle_cpu(has_idle_core, target) {
            return i;
        }
        self.event(bi::sis_stat_STAT_FAILED);
        target
    }

    /// select_task_rq_fair(p, prev_cpu, WF_TTWU [| WF_SYNC])
    fn select_task_rq_fair(&mut self) -> usize {
        let (cpu, prev) = (self.w.this_cpu, self.w.prev);
        // sched_ext adaptation: a CPU outside the topology is left alone
        if self.llc(cpu).is_none() || self.llc(prev).is_none() {
            return prev;
        }
        self.record_wakee();
        let want_affine = !self.wake_wide() && self.in_cpus_ptr(cpu);
        let mut new_cpu = prev;
        // every domain has SD_WAKE_AFFINE and the top one spans both CPUs
        if want_affine && cpu != prev {
            new_cpu = self.wake_affine(cpu, prev, self.w.sync);
        }
        self.select_idle_sibling(prev, new_cpu)
    }
}

/// The wake-up on machine `m`, as fair.c decides it. `mutate` flips one
/// comparison (select_idle_cpu's `!--nr` stops one CPU late) for the
/// mutation check.
pub fn select_task_rq_fair(m: &Machine, w: &Wakeup, mutate: bool) -> Outcome {
    let mut rq = Rq {
        m,
        w: w.clone(),
        mutate,
        domain_visits: vec![],
        ev: BTreeMap::new(),
    };
    let cpu = rq.select_task_rq_fair();

    // the counters, from the events and the visits
    let mut cnt = [0u64; STAT_NR];
    for (&s, &n) in &rq.ev {
        cnt[s as usize] = n;
    }
    let reached_sis = rq.llc(w.this_cpu).is_some() && rq.llc(w.prev).is_some();
    if reached_sis {
        cnt[bi::sis_stat_STAT_SEARCH as usize] = 1;
        let domain = cnt[bi::sis_stat_STAT_DOMAIN_SEARCH as usize];
        cnt[bi::sis_stat_STAT_FAST as usize] = 1 - domain.min(1);
        cnt[bi::sis_stat_STAT_DOMAIN_SCANNED as usize] = rq.domain_visits.len() as u64;
        cnt[bi::sis_stat_STAT_SCANNED as usize] = 1 + rq.domain_visits.len() as u64;
    }
    Outcome {
        cpu,
        recent: rq.w.recent,
        waker: rq.w.waker,
        has_idle_cores: rq.w.has_idle_cores,
        wake_avg_idle: rq.w.wake_avg_idle,
        wake_stamp: rq.w.wake_stamp,
        avg_scan_cost: rq.w.avg_scan_cost,
        cnt,
    }
}

/// Counter names (intf.h's, through stats.rs), for failure messages.
pub fn stat_name(i: usize) -> &'static str {
    crate::sched::stats::COUNTERS.get(i).map_or("?", |c| c.0)
}

#[cfg(test)]
mod tests {
    //! The model alone, on cases worked out by hand from fair.c.
    use super::*;

    pub fn wake(m: &Machine, this_cpu: usize, prev: usize, idle: &[usize]) -> Wakeup {
        Wakeup::neutral(
            bit::SIS_CORE | bit::WA_IDLE_PREV,
            (this_cpu, prev),
            100,
            idle.iter().copied().collect(),
            m.cpus().collect(),
        )
    }

    fn c(o: &Outcome, stat: u32) -> u64 {
        o.cnt[stat as usize]
    }

    #[test]
    fn sis_model_sis_prop_ages_without_refreshing_the_stamp() {
        // one LLC of 8; wake_avg_idle 8000 ns, 3 jiffies old: 8000 >> 3 = 1000,
        // stamp + 3 = now (not set to now: it was 997). span_avg 8 * 1000,
        // avg_cost 1000 + 1: 8000 > 4004 -> nr = 7: 6 CPUs probed at most.
        let m = Machine::new(&TopoDesc::synthetic(1, 8, 1, 1));
        let mut w = wake(&m, 2, 2, &[]);
        w.features = bit::SIS_PROP;
        w.wake_avg_idle = 8000;
        w.wake_stamp = 997;
        w.avg_scan_cost = 1000;
        let o = select_task_rq_fair(&m, &w, false);
        assert_eq!(o.wake_stamp, 1000);
        assert_eq!(c(&o, bi::sis_stat_STAT_DOMAIN_SCANNED), 6);
        assert_eq!(c(&o, bi::sis_stat_STAT_HIT_SIS_PROP), 1);
        // the !--nr return skips the cost accounting
        assert_eq!((o.wake_avg_idle, o.avg_scan_cost), (1000, 1000));
        // wake_avg_idle 0 stops the aging loop with the stamp behind
        w.wake_avg_idle = 2;
        w.wake_stamp = 990;
        let o = select_task_rq_fair(&m, &w, false);
        assert_eq!(o.wake_stamp, 992);
    }

    #[test]
    fn sis_model_sync_waker_alone_pulls() {
        // this 0 busy running only the waker, prev 4 busy: sync -> this_cpu,
        // then the scan from 1 finds 3
        let m = Machine::new(&TopoDesc::synthetic(1, 8, 1, 1));
        let mut w = wake(&m, 0, 4, &[3]);
        w.sync = true;
        w.nr_running.insert(0, 1);
        let o = select_task_rq_fair(&m, &w, false);
        assert_eq!(c(&o, bi::sis_stat_STAT_WAKE_AFFINE), 1);
        assert_eq!(o.cpu, 3);
        // two tasks on this CPU: no pull, the scan starts after prev 4
        w.nr_running.insert(0, 2);
        w.idle = [3, 6].into_iter().collect();
        let o = select_task_rq_fair(&m, &w, false);
        assert_eq!((o.cpu, c(&o, bi::sis_stat_STAT_WAKE_AFFINE)), (6, 0));
    }

    #[test]
    fn sis_model_weight_uses_smt_imbalance() {
        // siblings 0/1: pct 110 -> prev factor 105; loads 100 vs 104: this_eff
        // 100*100 = 10000 < 104*105 = 10920 -> this. Not siblings (0/2), pct
        // 117 -> 108: 10000 < 11232 too; 106 vs 100: 10600 vs 100*105 = 10500
        // (siblings: prev) and 100*108 = 10800 (not: this).
        let m = Machine::new(&TopoDesc::synthetic(1, 2, 2, 1));
        let mut w = wake(&m, 0, 1, &[]);
        w.features |= bit::WA_WEIGHT;
        w.load = [(0, 106), (1, 100), (2, 100)].into_iter().collect();
        w.nr_running = [(0, 2)].into_iter().collect();
        let o = select_task_rq_fair(&m, &w, false);
        assert_eq!(c(&o, bi::sis_stat_STAT_HIT_WA_WEIGHT), 0);
        w.prev = 2;
        let o = select_task_rq_fair(&m, &w, false);
        assert_eq!(c(&o, bi::sis_stat_STAT_HIT_WA_WEIGHT), 1);
    }
}
