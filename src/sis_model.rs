// SPDX-License-Identifier: GPL-2.0-only
//! Reference model of the kernel's wake-up idle search: kernel/sched/fair.c
//! (v6.12) select_idle_sibling() with select_idle_smt(), select_idle_cpu(),
//! select_idle_core() and __select_idle_cpu(), SIS_UTIL's depth, on
//! no-capacity-asymmetry, no-cluster, no-SCHED_IDLE machines.
//!
//! This is the specification the BPF code (src/bpf/sis.bpf.h, run on the
//! host through src/bpf/sis_test.bpf.c) is compared with in sis_test.rs. It
//! is written from the kernel's semantics over plain cpumasks (sets of CPU
//! ids), not from the BPF: it derives LLC spans and SMT masks from the
//! topology *description* itself, never from `struct sis_topo`.
//!
//! sched_ext adaptations, each a no-op under the kernel's own invariants:
//! - target and prev are tested against p->cpus_ptr before they are probed
//!   (the kernel's callers guarantee both are allowed; a sched_ext
//!   select_cpu gets a prev_cpu it must not trust).
//! - recent_used_cpu is tested for cpus_ptr before it is probed (the kernel
//!   tests idleness first): only the number of probes can differ.
//! - recent_used_cpu == -1 means "none".
//!
//! Counters follow the scheduler's `enum sis_stat` (intf.h), with the
//! conventions of Mel Gorman's SIS schedstats (lore
//! 20210726102247.21437-2-mgorman@techsingularity.net; seed 004 quotes the
//! derived se_eff/dom_eff/fast_rate/success_rate):
//! - SEARCH: every call. FAST: target, prev or recent_used_cpu chosen.
//! - SCANNED: runqueues scanned. "Checking if prev, target and recent is
//!   treated as one scan. A perfect hit on one of those is considered 100%
//!   efficiency": +1 at entry for the whole fast path, however many of the
//!   three are probed, then +1 per CPU probed by select_idle_smt(),
//!   select_idle_core() (each thread) and __select_idle_cpu(). So
//!   se_eff = 100 * SEARCH / SCANNED is 100% when the fast path hits.
//! - DOMAIN_SEARCH: the fast checks failed and sd_llc(target) exists;
//!   counted BEFORE the SMT check (Mel's sis_domain_search), so an idle SMT
//!   sibling of prev is a successful domain search, and a SIS_UTIL-skipped
//!   scan is a failed one.
//! - DOMAIN_SCANNED: every CPU probed after that point (the SMT siblings,
//!   select_idle_core()'s threads, __select_idle_cpu()'s CPUs). Each
//!   search has exactly one fast-path scan, so DOMAIN_SCANNED == SCANNED -
//!   SEARCH (how mmtests derives it from the kernel's counters).
//! - FAILED: select_idle_cpu() found nothing, target returned.
//! - CORE_SEARCH / CORE_FAILED: select_idle_cpu() with has_idle_core /
//!   the loop ended without an idle core (hint cleared).
//! - SCAN_SKIPPED: SIS_UTIL depth 0 ("overloaded LLC"), DEPTH_LIMITED: the
//!   scan stopped by `--nr <= 0`; both also count HIT_SIS_UTIL.
//! - RECENT: recent_used_cpu chosen, SMT: select_idle_smt() chosen,
//!   HIT_SIS_CORE: select_idle_core() found an idle core.

use std::collections::{BTreeMap, BTreeSet};

use crate::bpf_intf as bi;
use crate::topology::TopoDesc;

pub const STAT_NR: usize = bi::sis_stat_STAT_NR as usize;

/// `depth` value meaning "no SIS_UTIL bound" (nr = INT_MAX).
pub const DEPTH_UNBOUNDED: u32 = u32::MAX;

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

/// One select_idle_sibling() call: the task's and the LLC's state.
#[derive(Clone, Debug)]
pub struct Wakeup {
    pub prev: usize,
    pub target: usize,
    /// p->recent_used_cpu, -1: none
    pub recent: i32,
    /// sd_llc_shared(target)->has_idle_cores
    pub has_idle_cores: bool,
    /// SIS_UTIL sd_llc_shared->nr_idle_scan; DEPTH_UNBOUNDED: no bound
    pub depth: u32,
    /// the SIS_CORE feature (has_idle_cores + select_idle_smt/core)
    pub sis_core: bool,
    /// available_idle_cpu() is true for these
    pub idle: Cpumask,
    /// p->cpus_ptr
    pub allowed: Cpumask,
}

/// What the call did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub cpu: usize,
    /// the hint after the call (select_idle_cpu clears it on a failed core search)
    pub has_idle_cores: bool,
    /// p->recent_used_cpu after the call
    pub recent: i32,
    pub cnt: [u64; STAT_NR],
}

/// The per-call state of the search.
struct Sis<'a> {
    m: &'a Machine,
    w: &'a Wakeup,
    hint: bool,
    recent: i32,
    cnt: [u64; STAT_NR],
}

impl Sis<'_> {
    fn inc(&mut self, stat: u32) {
        self.cnt[stat as usize] += 1;
    }

    /// available_idle_cpu(): a read of the runqueue, counted by the caller.
    fn available_idle_cpu(&self, cpu: usize) -> bool {
        self.w.idle.contains(&cpu)
    }

    /// A CPU probed by the domain search (select_idle_smt, select_idle_core,
    /// __select_idle_cpu): Mel's schedstat_inc(sis_scanned) there, and one
    /// domain-scanned runqueue.
    fn domain_probe(&mut self, cpu: usize) -> bool {
        self.inc(bi::sis_stat_STAT_SCANNED);
        self.inc(bi::sis_stat_STAT_DOMAIN_SCANNED);
        self.available_idle_cpu(cpu)
    }

    fn allowed(&self, cpu: usize) -> bool {
        self.w.allowed.contains(&cpu)
    }

    fn done(self, cpu: usize) -> Outcome {
        Outcome {
            cpu,
            has_idle_cores: self.hint,
            recent: self.recent,
            cnt: self.cnt,
        }
    }

    /// select_idle_smt(p, sd, target): an idle allowed sibling of `target`
    /// (prev here) inside the LLC, `target` itself excluded.
    fn select_idle_smt(&mut self, target: usize) -> Option<usize> {
        for cpu in self.m.smt_mask(target) {
            if cpu == target || !self.allowed(cpu) {
                continue;
            }
            // siblings outside the LLC span (isolcpus) are skipped
            if !self.m.share_cache(cpu as i64, self.w.target as i64) {
                continue;
            }
            if self.domain_probe(cpu) {
                return Some(cpu);
            }
        }
        None
    }

    /// select_idle_core(p, core, cpus, &idle_cpu): is the whole core idle?
    /// Remembers the first idle thread in `cpus` as the scan's fallback; a
    /// busy core's threads leave `cpus`.
    fn select_idle_core(
        &mut self,
        core: usize,
        cpus: &mut Cpumask,
        idle_cpu: &mut Option<usize>,
    ) -> Option<usize> {
        let mut idle = true;
        for cpu in self.m.smt_mask(core) {
            if !self.domain_probe(cpu) {
                idle = false;
                if idle_cpu.is_none() {
                    // no SCHED_IDLE runqueues: only keep looking for a fallback
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

    /// select_idle_cpu(p, sd, has_idle_core, target) with SIS_UTIL's nr.
    fn select_idle_cpu(&mut self, target: usize, has_idle_core: bool) -> Option<usize> {
        // cpus = sched_domain_span(sd) & p->cpus_ptr
        let mut cpus: Cpumask = self
            .m
            .llc_span_of(target)
            .map(|span| span.intersection(&self.w.allowed).copied().collect())
            .unwrap_or_default();

        if has_idle_core {
            self.inc(bi::sis_stat_STAT_CORE_SEARCH);
        }

        // "because !--nr is the condition to stop scan"
        let bounded = self.w.depth != DEPTH_UNBOUNDED;
        let mut nr: i64 = if bounded {
            self.w.depth as i64 + 1
        } else {
            i32::MAX as i64
        };
        if nr == 1 {
            // "overloaded LLC is unlikely to have idle cpu/core"
            self.inc(bi::sis_stat_STAT_SCAN_SKIPPED);
            self.inc(bi::sis_stat_STAT_HIT_SIS_UTIL);
            return None;
        }

        let mut idle_cpu = None;
        for cpu in self.m.wrap_order(target + 1) {
            if !cpus.contains(&cpu) {
                continue;
            }
            if has_idle_core {
                if let Some(core) = self.select_idle_core(cpu, &mut cpus, &mut idle_cpu) {
                    self.inc(bi::sis_stat_STAT_HIT_SIS_CORE);
                    return Some(core);
                }
            } else {
                nr -= 1;
                if nr <= 0 {
                    self.inc(bi::sis_stat_STAT_DEPTH_LIMITED);
                    if bounded {
                        self.inc(bi::sis_stat_STAT_HIT_SIS_UTIL);
                    }
                    return None;
                }
                // __select_idle_cpu()
                if self.domain_probe(cpu) {
                    idle_cpu = Some(cpu);
                    break;
                }
            }
        }

        if has_idle_core {
            // set_idle_cores(target, false): the LLC has no idle core
            self.inc(bi::sis_stat_STAT_CORE_FAILED);
            self.hint = false;
        }
        idle_cpu
    }
}

/// select_idle_sibling(p, prev, target) on machine `m`.
pub fn select_idle_sibling(m: &Machine, w: &Wakeup) -> Outcome {
    let (prev, target) = (w.prev, w.target);
    let mut s = Sis {
        m,
        w,
        hint: w.has_idle_cores,
        recent: w.recent,
        cnt: [0; STAT_NR],
    };
    s.inc(bi::sis_stat_STAT_SEARCH);
    // target, prev and recent: one scan, whatever the number of probes
    s.inc(bi::sis_stat_STAT_SCANNED);

    if s.allowed(target) && s.available_idle_cpu(target) {
        s.inc(bi::sis_stat_STAT_FAST);
        return s.done(target);
    }

    // "If the previous CPU is cache affine and idle, don't be stupid"
    if prev != target
        && m.share_cache(prev as i64, target as i64)
        && s.allowed(prev)
        && s.available_idle_cpu(prev)
    {
        s.inc(bi::sis_stat_STAT_FAST);
        return s.done(prev);
    }

    // "Check a recently used CPU as a potential idle candidate"
    let recent = w.recent;
    s.recent = prev as i32;
    if recent >= 0 {
        let r = recent as usize;
        if r != prev
            && r != target
            && m.share_cache(recent as i64, target as i64)
            && s.allowed(r)
            && s.available_idle_cpu(r)
        {
            s.inc(bi::sis_stat_STAT_FAST);
            s.inc(bi::sis_stat_STAT_RECENT);
            return s.done(r);
        }
    }

    // sd_llc(target) == NULL
    if m.llc_span_of(target).is_none() {
        return s.done(target);
    }

    // schedstat_inc(sis_domain_search): before the SMT sibling check
    s.inc(bi::sis_stat_STAT_DOMAIN_SEARCH);

    let mut has_idle_core = false;
    if m.smt_active && w.sis_core {
        has_idle_core = s.hint;
        if !has_idle_core && m.share_cache(prev as i64, target as i64) {
            if let Some(cpu) = s.select_idle_smt(prev) {
                s.inc(bi::sis_stat_STAT_SMT);
                return s.done(cpu);
            }
        }
    }

    if let Some(cpu) = s.select_idle_cpu(target, has_idle_core) {
        return s.done(cpu);
    }

    s.inc(bi::sis_stat_STAT_FAILED);
    s.done(target)
}

/// Counter names, for failure messages.
pub fn stat_name(i: usize) -> &'static str {
    const NAMES: [&str; STAT_NR] = [
        "SEARCH",
        "FAST",
        "DOMAIN_SEARCH",
        "DOMAIN_SCANNED",
        "SCANNED",
        "FAILED",
        "CORE_SEARCH",
        "CORE_FAILED",
        "SCAN_SKIPPED",
        "DEPTH_LIMITED",
        "WAKE_AFFINE",
        "RECENT",
        "SMT",
        "HIT_SIS_UTIL",
        "HIT_SIS_PROP",
        "HIT_SIS_CORE",
        "HIT_WA_IDLE_PREV",
        "HIT_WA_WEIGHT",
        "HIT_TTWU_QUEUE_DESCHED",
        "HIT_NEWIDLE_SKIP_IPI",
        "HIT_KICK_SKIP_REDUNDANT",
        "ENQUEUE",
        "DIRECT",
        "DISPATCH_LLC",
        "STEAL",
        "KICK",
        "KICK_ATOMIC",
        "KICK_SCANNED",
    ];
    NAMES.get(i).copied().unwrap_or("?")
}

#[cfg(test)]
mod tests {
    //! The model alone, on cases worked out by hand from fair.c.
    use super::*;

    fn mask(v: &[usize]) -> Cpumask {
        v.iter().copied().collect()
    }

    fn wake(m: &Machine, prev: usize, target: usize, idle: &[usize]) -> Wakeup {
        Wakeup {
            prev,
            target,
            recent: -1,
            has_idle_cores: false,
            depth: DEPTH_UNBOUNDED,
            sis_core: true,
            idle: mask(idle),
            allowed: m.cpus().collect(),
        }
    }

    fn c(o: &Outcome, stat: u32) -> u64 {
        o.cnt[stat as usize]
    }

    #[test]
    fn sis_model_recent_replaced_by_prev() {
        let m = Machine::new(&TopoDesc::synthetic(1, 8, 1, 1));
        // target 2, prev 5 busy; recent 7 idle: taken, recent becomes prev
        let mut w = wake(&m, 5, 2, &[7]);
        w.recent = 7;
        let o = select_idle_sibling(&m, &w);
        assert_eq!((o.cpu, o.recent), (7, 5));
        assert_eq!(c(&o, bi::sis_stat_STAT_RECENT), 1);
        // target, prev and recent probed: still one scan, no domain search
        assert_eq!(c(&o, bi::sis_stat_STAT_SCANNED), 1);
        assert_eq!(c(&o, bi::sis_stat_STAT_DOMAIN_SEARCH), 0);
        // prev idle: returned before recent_used_cpu is touched
        let mut w = wake(&m, 5, 2, &[5, 7]);
        w.recent = 7;
        let o = select_idle_sibling(&m, &w);
        assert_eq!((o.cpu, o.recent), (5, 7));
        // recent busy: still replaced by prev
        let mut w = wake(&m, 5, 2, &[]);
        w.recent = 7;
        assert_eq!(select_idle_sibling(&m, &w).recent, 5);
    }

    #[test]
    fn sis_model_smt_sibling_is_a_domain_search() {
        // {0,1}{2,3} | {4,5}{6,7}: target 0, prev 2 busy, sibling 3 idle
        let m = Machine::new(&TopoDesc::synthetic(2, 2, 2, 1));
        let o = select_idle_sibling(&m, &wake(&m, 2, 0, &[3]));
        assert_eq!(o.cpu, 3);
        // fast path (1) + sibling 3 (1); the domain search succeeded
        assert_eq!(c(&o, bi::sis_stat_STAT_SCANNED), 2);
        assert_eq!(c(&o, bi::sis_stat_STAT_DOMAIN_SEARCH), 1);
        assert_eq!(c(&o, bi::sis_stat_STAT_DOMAIN_SCANNED), 1);
        assert_eq!(c(&o, bi::sis_stat_STAT_SMT), 1);
        assert_eq!(c(&o, bi::sis_stat_STAT_FAILED), 0);
    }

    #[test]
    fn sis_model_wrap_when_target_is_last_cpu() {
        let m = Machine::new(&TopoDesc::synthetic(1, 8, 1, 1));
        // target 7 = nr_cpu_ids - 1: for_each_cpu_wrap(.., 8) starts at 0
        let o = select_idle_sibling(&m, &wake(&m, 7, 7, &[1, 3]));
        assert_eq!(o.cpu, 1);
        assert_eq!(c(&o, bi::sis_stat_STAT_DOMAIN_SCANNED), 2);
    }

    #[test]
    fn sis_model_no_smt_ignores_hint() {
        // no SMT: sched_smt_active() false, the hint is neither read nor cleared
        let m = Machine::new(&TopoDesc::synthetic(1, 4, 1, 1));
        let mut w = wake(&m, 0, 0, &[]);
        w.has_idle_cores = true;
        let o = select_idle_sibling(&m, &w);
        assert!(o.has_idle_cores);
        assert_eq!(c(&o, bi::sis_stat_STAT_CORE_SEARCH), 0);
        // 1, 2, 3 and target 0 again, last
        assert_eq!(c(&o, bi::sis_stat_STAT_DOMAIN_SCANNED), 4);
        assert_eq!(c(&o, bi::sis_stat_STAT_FAILED), 1);
    }
}
