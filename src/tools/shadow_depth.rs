// SPDX-License-Identifier: GPL-2.0-only
//! `shadow`'s depth block: the loader's SIS_UTIL depth beside the kernel's nr_idle_scan,
//! wake-up by wake-up.
//!
//! While shadow records, its tracer accounts every CPU's idle time as the scheduler does
//! (shadow.bpf.c: the scheduler's idle_enter()/idle_exit() of idle_time.bpf.h, on the
//! kernel's switches to and from the idle task and its wake-ups' activations), and the
//! poll loop samples those words at the loader's cadence (loader::IntervalWait, every
//! DEFAULT_INTERVAL_MS) with the loader's own read (loader::idle_total). The samples
//! (`Busy`, kept in a recording's header as `busy`) go through the loader's own step
//! (loader::UtilUpdate::step: UtilFilter per CPU, the LLC's sum, nr_idle_scan()), giving
//! each LLC's depth as the scheduler's loader would have written it at each sample
//! (`Timeline`). Each compared wake-up then has two depths for the LLC the kernel placed
//! it in (the target's: select_idle_sibling() returns a CPU of the target's LLC): the
//! kernel's nr_idle_scan read at the wake-up, and the loader's in force then (its last
//! sample before). `DepthAcc` sums them per utilization bucket (the kernel's util_sum of
//! that LLC at the wake-up, sis_fit::util_bucket()'s 10 % buckets) and counts the port's
//! decision replayed on the loader's depths against the kernel's CPU; `DepthReport` is
//! the `depth` block of the report.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::corpus::UTIL_AVG_UNKNOWN;
use crate::sched::loader::UtilUpdate;
use crate::sched::opts::DEFAULT_IMBALANCE_PCT;
use crate::sched::sis_fit::{util_bucket, BUCKETS};
use crate::sched::sis_util_depth::{
    nr_idle_scan, DepthRules, SCHED_CAPACITY_SCALE, UTIL_HALF_LIFE_NS,
};

/// The loader's sampling period (the scheduler's --interval-ms default).
pub const INTERVAL_NS: u64 = crate::bpf_intf::sis_consts_DEFAULT_INTERVAL_MS as u64 * 1_000_000;
/// Wake-ups this long after the first sample are compared: the loader's util filter starts
/// at 0 and forgets its start by 2^-8 (4 of 1024) in 8 half-lives.
pub const WARM_UP_NS: u64 = (8.0 * UTIL_HALF_LIFE_NS) as u64;

/// The CPUs' idle time as the loader reads it, sampled at its cadence (a recording's header
/// `busy`): `cpus` the CPU ids of the columns, each of `samples` [CLOCK_MONOTONIC ns, then
/// each CPU's idle total up to then, ns].
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Busy {
    pub interval_ns: u64,
    pub cpus: Vec<usize>,
    pub samples: Vec<Vec<u64>>,
}

/// Each LLC's depth as the loader writes it, from each sample on.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// the first wake-up compared (first sample + WARM_UP_NS)
    from_ns: u64,
    /// per step (the samples after the first): its time, and each LLC's depth and util sum
    times: Vec<u64>,
    depths: Vec<Vec<u64>>,
    sums: Vec<Vec<u64>>,
}

impl Timeline {
    /// `busy` through the loader's own step (UtilUpdate::step, nr_idle_scan() alone: the
    /// kernel's counterpart; the feature word's loader-side rules are applied by the replay
    /// to either depth alike) on the LLCs `llcs` (their CPU ids; CPU ids below
    /// `nr_cpu_ids`). A sample of the wrong length, a time that goes back or a CPU not in
    /// the topology is one error.
    pub fn of(busy: &Busy, llcs: &[Vec<usize>], nr_cpu_ids: usize) -> Result<Timeline> {
        let mut col = vec![None; nr_cpu_ids];
        for (i, &c) in busy.cpus.iter().enumerate() {
            match col.get_mut(c) {
                Some(slot) => *slot = Some(i),
                None => bail!("busy: CPU {c} is not in the topology"),
            }
        }
        let mut up = UtilUpdate::new(llcs.to_vec(), nr_cpu_ids, DEFAULT_IMBALANCE_PCT);
        let mut tl = Timeline {
            from_ns: 0,
            times: vec![],
            depths: vec![],
            sums: vec![],
        };
        let mut last = 0;
        for (n, s) in busy.samples.iter().enumerate() {
            if s.len() != busy.cpus.len() + 1 {
                bail!(
                    "busy: sample {n} has {} values, not {} (the time, then a CPU each)",
                    s.len(),
                    busy.cpus.len() + 1
                );
            }
            let now = s[0];
            if now == 0 || now < last {
                bail!("busy: sample {n}'s time {now} is 0 or goes back (from {last})");
            }
            last = now;
            if n == 0 {
                tl.from_ns = now.saturating_add(WARM_UP_NS);
            }
            let idle = |cpu: usize| col[cpu].map_or(0, |i| s[i + 1]);
            if up.step(DepthRules::default(), now, &[], idle) {
                tl.times.push(now);
                tl.depths.push(up.llcs().iter().map(|&(_, d)| d).collect());
                tl.sums.push(up.llcs().iter().map(|&(s, _)| s).collect());
            }
        }
        Ok(tl)
    }

    /// Each LLC's depth in force at `ns` (the last step at or before it); None in the
    /// warm-up or before the first step.
    pub fn at(&self, ns: u64) -> Option<&[u64]> {
        Some(&self.depths[self.step_at(ns)?])
    }

    /// Each LLC's depth and util sum (the loader's input to the depth) in force at `ns`, as
    /// `at`: one look-up for both.
    pub fn in_force(&self, ns: u64) -> Option<(&[u64], &[u64])> {
        let i = self.step_at(ns)?;
        Some((&self.depths[i], &self.sums[i]))
    }

    fn step_at(&self, ns: u64) -> Option<usize> {
        if ns < self.from_ns {
            return None;
        }
        self.times.partition_point(|&t| t <= ns).checked_sub(1)
    }
}

/// One compared wake-up's depths and their inputs, for `DepthAcc::add`: of the LLC the
/// kernel placed it in, its util bucket, the kernel's nr_idle_scan and the loader's depth;
/// the kernel's util sum at the wake-up (cpu_util_cfs(), with util_est), the same of util_avg
/// alone (None: not recorded), the loader's sum in force, the LLC's capacity (CPUs x 1024),
/// and `fresh`: nr_idle_scan() of the kernel's sum at the wake-up (the depth the kernel's
/// load balance would write now; its own was written at its last balance).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepthPair {
    pub bucket: usize,
    pub kernel: u64,
    pub loader: u64,
    pub kernel_util: u64,
    pub kernel_util_avg: Option<u64>,
    pub loader_util: u64,
    pub capacity: u64,
    pub fresh: u64,
}

/// A record's view of its two LLCs ([this_cpu's, prev's]): the kernel's nr_idle_scan (< 0:
/// no sd_llc_shared), util sum and util_avg sum (shadow_corpus::UTIL_AVG_UNKNOWN: not
/// recorded).
#[derive(Debug, Clone, Copy)]
pub struct KernelLlcs {
    pub nr_idle_scan: [i32; 2],
    pub util_sum: [u64; 2],
    pub util_avg_sum: [u64; 2],
}

/// The depths of the LLC the kernel placed `chosen` in, of the record's two
/// (`llc_of` [this_cpu, prev] and the kernel's `chosen`): the kernel's side `k`, `weight`
/// its CPUs, the loader's depth and util sum per LLC index (`loader`, `loader_sum`). None
/// where the kernel's CPU is in neither or the kernel has no nr_idle_scan there.
pub fn pair_of(
    llc_of: [i32; 2],
    chosen_llc: i32,
    k: &KernelLlcs,
    weight: u64,
    loader: &[u64],
    loader_sum: &[u64],
) -> Option<DepthPair> {
    let i = llc_of.iter().position(|&l| l >= 0 && l == chosen_llc)?;
    let kd = u64::try_from(k.nr_idle_scan[i]).ok()?;
    let l = usize::try_from(llc_of[i]).ok()?;
    let util = k.util_sum[i];
    Some(DepthPair {
        bucket: util_bucket(util, weight),
        kernel: kd,
        loader: *loader.get(l)?,
        kernel_util: util,
        kernel_util_avg: (k.util_avg_sum != UTIL_AVG_UNKNOWN).then_some(k.util_avg_sum[i]),
        loader_util: *loader_sum.get(l)?,
        capacity: weight * SCHED_CAPACITY_SCALE,
        fresh: nr_idle_scan(util, weight, DEFAULT_IMBALANCE_PCT),
    })
}

/// The sums of one utilization bucket.
#[derive(Debug, Clone, Default, PartialEq)]
struct BucketAcc {
    wakeups: u64,
    same: u64,
    kernel_sum: u64,
    loader_sum: u64,
    /// |Δdepth| -> wake-ups
    abs_diff: BTreeMap<u64, u64>,
    /// the inputs: sums of the util sums, and of the capacities they are of
    kernel_util: u64,
    loader_util: u64,
    capacity: u64,
    kernel_util_avg: u64,
    capacity_avg: u64,
    /// the kernel's nr_idle_scan equal to `fresh`
    fresh_same: u64,
    /// of those (the kernel's depth current), the loader's depth equal to the kernel's
    fresh_loader_same: u64,
    /// the loader's depth equal to `fresh`, and within one CPU of it
    input_same: u64,
    input_within_one: u64,
}

impl BucketAcc {
    fn add(&mut self, o: &BucketAcc) {
        self.wakeups += o.wakeups;
        self.same += o.same;
        self.kernel_sum += o.kernel_sum;
        self.loader_sum += o.loader_sum;
        self.kernel_util += o.kernel_util;
        self.loader_util += o.loader_util;
        self.capacity += o.capacity;
        self.kernel_util_avg += o.kernel_util_avg;
        self.capacity_avg += o.capacity_avg;
        self.fresh_same += o.fresh_same;
        self.fresh_loader_same += o.fresh_loader_same;
        self.input_same += o.input_same;
        self.input_within_one += o.input_within_one;
        for (d, n) in &o.abs_diff {
            *self.abs_diff.entry(*d).or_default() += n;
        }
    }
}

/// The depth comparison's sums over compared wake-ups (chunks, files): per util bucket, and
/// the port's decision on the loader's depths.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthAcc {
    buckets: Vec<BucketAcc>,
    /// the port on the loader's depths chose the kernel's CPU
    decision_same: u64,
}

impl Default for DepthAcc {
    fn default() -> Self {
        DepthAcc {
            buckets: vec![BucketAcc::default(); BUCKETS],
            decision_same: 0,
        }
    }
}

impl DepthAcc {
    /// One compared wake-up: its depths, and whether the port replayed on the loader's
    /// depths chose the kernel's CPU.
    pub fn add(&mut self, p: DepthPair, decision_same: bool) {
        let b = &mut self.buckets[p.bucket.min(BUCKETS - 1)];
        b.wakeups += 1;
        b.same += (p.kernel == p.loader) as u64;
        b.kernel_sum += p.kernel;
        b.loader_sum += p.loader;
        b.kernel_util += p.kernel_util;
        b.loader_util += p.loader_util;
        b.capacity += p.capacity;
        if let Some(a) = p.kernel_util_avg {
            b.kernel_util_avg += a;
            b.capacity_avg += p.capacity;
        }
        b.fresh_same += (p.kernel == p.fresh) as u64;
        b.fresh_loader_same += (p.kernel == p.fresh && p.loader == p.kernel) as u64;
        b.input_same += (p.loader == p.fresh) as u64;
        b.input_within_one += (p.loader.abs_diff(p.fresh) <= 1) as u64;
        *b.abs_diff.entry(p.kernel.abs_diff(p.loader)).or_default() += 1;
        self.decision_same += decision_same as u64;
    }

    pub fn merge(&mut self, o: &DepthAcc) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            a.add(b);
        }
        self.decision_same += o.decision_same;
    }

    /// The report's block.
    pub fn report(&self) -> DepthReport {
        let mut all = BucketAcc::default();
        let mut buckets = vec![];
        for (i, b) in self.buckets.iter().enumerate() {
            all.add(b);
            if b.wakeups > 0 {
                let s = summary(b);
                buckets.push(DepthBucket {
                    util_pct: [
                        i as u64 * 100 / BUCKETS as u64,
                        (i as u64 + 1) * 100 / BUCKETS as u64,
                    ],
                    wakeups: b.wakeups,
                    agreement_pct: s.0,
                    mean_kernel_depth: mean(b.kernel_sum, b.wakeups),
                    mean_loader_depth: mean(b.loader_sum, b.wakeups),
                    mean_abs_diff: s.1,
                    p99_abs_diff: s.2,
                    within_one_pct: s.3,
                    inputs: inputs(b),
                });
            }
        }
        let s = summary(&all);
        DepthReport {
            wakeups: all.wakeups,
            agreement_pct: s.0,
            mean_abs_diff: s.1,
            p99_abs_diff: s.2,
            within_one_pct: s.3,
            buckets,
            decision_agreement_pct: super::pct(self.decision_same, all.wakeups),
            inputs: inputs(&all),
        }
    }
}

fn mean(sum: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        sum as f64 / n as f64
    }
}

/// A bucket's (or all buckets') inputs.
fn inputs(b: &BucketAcc) -> DepthInputs {
    DepthInputs {
        kernel_util_pct: super::pct(b.kernel_util, b.capacity),
        kernel_util_avg_pct: (b.capacity_avg > 0)
            .then(|| super::pct(b.kernel_util_avg, b.capacity_avg)),
        loader_util_pct: super::pct(b.loader_util, b.capacity),
        fresh_agreement_pct: super::pct(b.fresh_same, b.wakeups),
        agreement_when_fresh_pct: super::pct(b.fresh_loader_same, b.fresh_same),
        input_agreement_pct: super::pct(b.input_same, b.wakeups),
        input_within_one_pct: super::pct(b.input_within_one, b.wakeups),
    }
}

/// A bucket's (or all buckets') agreement %, mean |Δ|, p99 |Δ| (nearest rank: the
/// smallest |Δ| at or under which 99 % of its wake-ups lie) and % within one CPU.
fn summary(b: &BucketAcc) -> (f64, f64, u64, f64) {
    let rank = (b.wakeups * 99).div_ceil(100);
    let (mut seen, mut p99, mut sum, mut within) = (0, 0, 0, 0);
    for (&d, &n) in &b.abs_diff {
        if seen < rank {
            p99 = d;
        }
        seen += n;
        sum += d * n;
        if d <= 1 {
            within += n;
        }
    }
    let pct = |n| super::pct(n, b.wakeups);
    (pct(b.same), mean(sum, b.wakeups), p99, pct(within))
}

/// The report's `depth` block: over the compared wake-ups past the loader's warm-up, the
/// kernel's nr_idle_scan of the LLC it placed the wake-up in against the loader's depth of
/// that LLC at the same time.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct DepthReport {
    /// compared wake-ups with both depths
    pub wakeups: u64,
    /// % of them where the two depths are equal
    pub agreement_pct: f64,
    /// mean |loader's depth - kernel's| (CPUs)
    pub mean_abs_diff: f64,
    /// 99th percentile of it (nearest rank)
    pub p99_abs_diff: u64,
    /// % of them where the two depths differ by at most one CPU
    pub within_one_pct: f64,
    /// per 10 % bucket of the kernel's util_sum of that LLC (of its capacity), those with
    /// wake-ups
    pub buckets: Vec<DepthBucket>,
    /// % of them where the port replayed on the loader's depths (both LLCs) chose the
    /// kernel's CPU
    pub decision_agreement_pct: f64,
    /// what the two depths are made of, over all of them
    pub inputs: DepthInputs,
}

/// The depths' inputs over a bucket's wake-ups (or all): where the loader's depth departs
/// from the kernel's, whether its input does, and which part of the kernel's.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct DepthInputs {
    /// the kernel's util sum at the wake-up (cpu_util_cfs(): util_avg, or util_est when
    /// larger), % of the LLC's capacity
    pub kernel_util_pct: f64,
    /// the same of util_avg alone (what util_est adds is the difference); None where the
    /// recording has no util_avg sums
    pub kernel_util_avg_pct: Option<f64>,
    /// the loader's util sum in force (the busy-time filter), % of the capacity
    pub loader_util_pct: f64,
    /// % of wake-ups where the kernel's nr_idle_scan equals nr_idle_scan() of its own util
    /// sum at the wake-up (the rest: the sum moved since the kernel's last load balance
    /// wrote the depth)
    pub fresh_agreement_pct: f64,
    /// over those wake-ups alone (the kernel's depth current), % where the loader's depth
    /// equals the kernel's
    pub agreement_when_fresh_pct: f64,
    /// % of wake-ups where the loader's depth equals nr_idle_scan() of the kernel's util sum
    /// at the wake-up, the depth the kernel's load balance would write now: the loader's
    /// input against the kernel's, without the lag of the kernel's refresh
    pub input_agreement_pct: f64,
    /// the same within one CPU
    pub input_within_one_pct: f64,
}

/// One utilization bucket of `DepthReport`.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct DepthBucket {
    /// [from, to) % of the LLC's capacity (the last bucket includes 100 % and over)
    pub util_pct: [u64; 2],
    pub wakeups: u64,
    pub agreement_pct: f64,
    pub mean_kernel_depth: f64,
    pub mean_loader_depth: f64,
    pub mean_abs_diff: f64,
    pub p99_abs_diff: u64,
    pub within_one_pct: f64,
    pub inputs: DepthInputs,
}

/// Why a report has no `depth` block (the table's one line; JSON `depth` null).
pub const NO_DEPTH: &str =
    "loader depth: not compared (the recording has no busy-time samples: recorded before them)";

/// The depth block's lines of the table (or NO_DEPTH).
pub fn print_depth(d: Option<&DepthReport>) {
    let Some(d) = d else {
        println!("{NO_DEPTH}");
        return;
    };
    println!(
        "loader depth vs the kernel's nr_idle_scan (the LLC placed in): {} wake-ups, same {:.2} %, within 1 {:.2} %, |Δ| mean {:.3} p99 {}; the port on the loader's depths: the kernel's CPU {:.2} %",
        d.wakeups,
        d.agreement_pct,
        d.within_one_pct,
        d.mean_abs_diff,
        d.p99_abs_diff,
        d.decision_agreement_pct
    );
    if d.buckets.is_empty() {
        return;
    }
    println!(
        "  {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "util%",
        "wakeups",
        "same%",
        "kernel",
        "loader",
        "|Δ|mean",
        "|Δ|p99",
        "k.util%",
        "k.avg%",
        "l.util%",
        "fresh%",
        "same|f%",
        "input%",
        "input±1%"
    );
    for b in &d.buckets {
        let i = &b.inputs;
        println!(
            "  {:>7} {:>9} {:>8.2} {:>8.3} {:>8.3} {:>9.3} {:>8} {:>8.1} {:>8} {:>8.1} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
            format!("{}-{}", b.util_pct[0], b.util_pct[1]),
            b.wakeups,
            b.agreement_pct,
            b.mean_kernel_depth,
            b.mean_loader_depth,
            b.mean_abs_diff,
            b.p99_abs_diff,
            i.kernel_util_pct,
            i.kernel_util_avg_pct
                .map_or("-".to_string(), |v| format!("{v:.1}")),
            i.loader_util_pct,
            i.fresh_agreement_pct,
            i.agreement_when_fresh_pct,
            i.input_agreement_pct,
            i.input_within_one_pct
        );
    }
    println!("  (k.util% the kernel's util sum at the wake-up, k.avg% its util_avg alone, l.util% the loader's; fresh% the kernel's depth equal to nr_idle_scan() of its sum then,");
    println!("   same|f% the loader's equal to the kernel's on those fresh wake-ups; input% / input±1% the loader's depth equal to / within one of nr_idle_scan() of the kernel's sum then)");
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// The hand-worked accumulation of depth_acc_sums_per_bucket and
    /// depth_acc_inputs_per_bucket: the whole, and its two halves (every other wake-up).
    /// Bucket 5 (50-60 %): 100 wake-ups, kernel 5; the loader 5 for 60, 3 for 39, 0 once;
    /// the port on the loader's depths right on the first 90. Bucket 0: 3 wake-ups, equal;
    /// bucket 12 (counted in the last): one, 1 off. Inputs: the kernel's util 40 % of a
    /// 4-CPU LLC (util_avg 30 % for the first 50 wake-ups only), the loader's 20 %; `fresh`
    /// equal to the kernel's depth on every fourth wake-up (not half: a negated test would
    /// give the same 50 %).
    fn hand_worked() -> (DepthAcc, DepthAcc, DepthAcc) {
        let mut n = 0u64;
        let mut p = |bucket, kernel, loader| {
            n += 1;
            DepthPair {
                bucket,
                kernel,
                loader,
                kernel_util: 4096 * 40 / 100,
                kernel_util_avg: (n <= 50).then_some(4096 * 30 / 100),
                loader_util: 4096 * 20 / 100,
                capacity: 4096,
                fresh: if n % 4 == 0 { kernel } else { kernel + 1 },
            }
        };
        let mut whole = DepthAcc::default();
        let (mut a, mut b) = (DepthAcc::default(), DepthAcc::default());
        let mut i = 0;
        let mut add = |pair: DepthPair, same: bool| {
            whole.add(pair, same);
            (if i % 2 == 0 { &mut a } else { &mut b }).add(pair, same);
            i += 1;
        };
        for n in 0..100 {
            let loader = match n {
                0..=59 => 5,
                60..=98 => 3,
                _ => 0,
            };
            add(p(5, 5, loader), n < 90);
        }
        for _ in 0..3 {
            add(p(0, 4, 4), true);
        }
        add(p(12, 0, 1), false);
        (whole, a, b)
    }

    /// Hand-worked sums: per bucket the agreement, the means, the nearest-rank p99 of |Δ|
    /// and the share within one CPU; the totals over the buckets; merging two halves gives
    /// the whole; the decision agreement over every wake-up.
    #[test]
    fn depth_acc_sums_per_bucket() {
        let (whole, a, b) = hand_worked();
        let mut merged = a.clone();
        merged.merge(&b);
        assert_eq!(merged, whole);
        let r = whole.report();
        assert_eq!(r.wakeups, 104);
        assert_eq!(r.buckets.len(), 3);
        let b5 = &r.buckets[1];
        assert_eq!(b5.util_pct, [50, 60]);
        assert_eq!((b5.wakeups, b5.agreement_pct), (100, 60.0));
        // 39 x 2 + 1 x 5 = 83 over 100; the 99th of 100 is a 2 (the 100th the 5)
        assert_eq!((b5.mean_abs_diff, b5.p99_abs_diff), (0.83, 2));
        assert_eq!((b5.mean_kernel_depth, b5.mean_loader_depth), (5.0, 4.17));
        // within one CPU: the 60 equal ones only (39 are 2 off, one 5)
        assert_eq!(b5.within_one_pct, 60.0);
        assert_eq!(r.buckets[0].util_pct, [0, 10]);
        assert_eq!(
            (r.buckets[0].p99_abs_diff, r.buckets[0].mean_abs_diff),
            (0, 0.0)
        );
        assert_eq!(r.buckets[2].util_pct, [90, 100]);
        assert_eq!(r.buckets[2].p99_abs_diff, 1);
        // totals: 63 of 104 equal; |Δ| 84 over 104; rank 103 of 104 is the last 2
        assert_eq!(r.agreement_pct, 100.0 * 63.0 / 104.0);
        assert_eq!(r.mean_abs_diff, 84.0 / 104.0);
        assert_eq!(r.p99_abs_diff, 2);
        // 63 equal and bucket 12's one off by 1
        assert_eq!(r.within_one_pct, 100.0 * 64.0 / 104.0);
        assert_eq!(r.decision_agreement_pct, 100.0 * 93.0 / 104.0);
        // nothing compared: zeros, no bucket
        let e = DepthAcc::default().report();
        assert_eq!((e.wakeups, e.buckets.len(), e.p99_abs_diff), (0, 0, 0));
    }

    /// The inputs of the same wake-ups: integer sums over the capacities (1638 and 819 of
    /// 4096: 39.99 % and 19.99 %), util_avg over the 50 wake-ups that have it (1228:
    /// 29.98 %; none in bucket 0), fresh on every fourth, the loader against the kernel where
    /// that holds and against `fresh` everywhere; the same after a merge.
    #[test]
    fn depth_acc_inputs_per_bucket() {
        let (whole, a, b) = hand_worked();
        let r = whole.report();
        let i5 = &r.buckets[1].inputs;
        assert_eq!(i5.kernel_util_pct, 100.0 * 1638.0 / 4096.0);
        assert_eq!(i5.loader_util_pct, 100.0 * 819.0 / 4096.0);
        assert_eq!(i5.kernel_util_avg_pct, Some(100.0 * 1228.0 / 4096.0));
        assert_eq!(i5.fresh_agreement_pct, 25.0);
        // fresh (every fourth) among the first 60, where the loader is 5 too: 15 of 25;
        // the loader equal to fresh (5 on every fourth of those 60): 15, within one: the 60
        assert_eq!(i5.agreement_when_fresh_pct, 60.0);
        assert_eq!(i5.input_agreement_pct, 15.0);
        assert_eq!(i5.input_within_one_pct, 60.0);
        // bucket 0: fresh 5 against 4 three times (within one); bucket 12: fresh 0, loader 1
        assert_eq!(r.buckets[0].inputs.agreement_when_fresh_pct, 0.0);
        assert_eq!(r.buckets[0].inputs.input_within_one_pct, 100.0);
        assert_eq!(r.inputs.agreement_when_fresh_pct, 100.0 * 15.0 / 26.0);
        assert_eq!(r.inputs.input_agreement_pct, 100.0 * 15.0 / 104.0);
        assert_eq!(r.inputs.input_within_one_pct, 100.0 * 64.0 / 104.0);
        assert_eq!(r.buckets[0].inputs.kernel_util_avg_pct, None);
        assert_eq!(r.inputs.fresh_agreement_pct, 100.0 * 26.0 / 104.0);
        assert_eq!(r.inputs.kernel_util_avg_pct, i5.kernel_util_avg_pct);
        let mut merged = a;
        merged.merge(&b);
        assert_eq!(merged.report().inputs, r.inputs);
    }

    /// The pair is the LLC the kernel placed in: prev's when the kernel's CPU is there, and
    /// none without an nr_idle_scan or outside both.
    #[test]
    fn depth_pair_of_the_llc_placed_in() {
        let (loader, sums) = ([7, 2], [100, 2000]);
        let k = |nr_idle_scan, util_sum, util_avg_sum| KernelLlcs {
            nr_idle_scan,
            util_sum,
            util_avg_sum,
        };
        let kl = k([6, 3], [0, 4096 * 45 / 100], [0, 1500]);
        let got = pair_of([0, 1], 1, &kl, 4, &loader, &sums);
        assert_eq!(
            got,
            Some(DepthPair {
                bucket: 4,
                kernel: 3,
                loader: 2,
                kernel_util: 1843,
                kernel_util_avg: Some(1500),
                loader_util: 2000,
                capacity: 4096,
                // the depth a load balance would write now from the kernel's 45 %
                fresh: nr_idle_scan(1843, 4, 117),
            })
        );
        let p0 = pair_of(
            [0, 1],
            0,
            &k([6, 3], [0, 0], UTIL_AVG_UNKNOWN),
            4,
            &loader,
            &sums,
        );
        let p0 = p0.unwrap();
        assert_eq!(
            (p0.loader, p0.loader_util, p0.kernel_util_avg),
            (7, 100, None)
        );
        assert_eq!(p0.fresh, 4);
        let none = k([-1, 3], [0, 0], [0, 0]);
        assert_eq!(pair_of([0, 1], 0, &none, 4, &loader, &sums), None);
        assert_eq!(pair_of([0, 1], 2, &kl, 4, &loader, &sums), None);
    }

    /// The loader's depths from samples: two CPUs of one LLC busy all the time give depth
    /// 0 once the filter has risen, idle ones the whole LLC; nothing in the warm-up; a bad
    /// sample is one error.
    #[test]
    fn timeline_from_samples() {
        let llcs = vec![vec![0, 1]];
        let mut busy = Busy {
            interval_ns: 20 * MS,
            cpus: vec![0, 1],
            samples: vec![],
        };
        // 1 s idle (both CPUs idle the whole time), then 1 s busy
        let t0 = 1_000 * MS;
        for k in 0..=100u64 {
            let t = t0 + k * 20 * MS;
            let idle = (k.min(50)) * 20 * MS;
            busy.samples.push(vec![t, idle, idle]);
        }
        let tl = Timeline::of(&busy, &llcs, 2).unwrap();
        assert_eq!(tl.at(t0 + 100 * MS), None, "warm-up");
        assert_eq!(tl.at(t0 + 999 * MS), Some(&[2u64][..]));
        assert_eq!(tl.at(t0 + 2_000 * MS), Some(&[0u64][..]));
        // the sums beside: 0 while idle, then both CPUs near 1024 each
        assert_eq!(tl.in_force(t0 + 999 * MS), Some((&[2u64][..], &[0u64][..])));
        assert!(tl.in_force(t0 + 2_000 * MS).unwrap().1[0] > 2000);
        assert_eq!(tl.in_force(t0 + 100 * MS), None, "warm-up");
        // a CPU outside the topology, a short sample, a time back
        let mut bad = busy.clone();
        bad.cpus = vec![0, 2];
        assert!(Timeline::of(&bad, &llcs, 2).is_err());
        let mut bad = busy.clone();
        bad.samples[3].pop();
        let e = Timeline::of(&bad, &llcs, 2).unwrap_err().to_string();
        assert!(e.contains("sample 3 has 2 values, not 3"), "{e}");
        let mut bad = busy;
        bad.samples[4][0] = 1;
        assert!(Timeline::of(&bad, &llcs, 2).is_err());
    }
}
