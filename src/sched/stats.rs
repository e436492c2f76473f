// SPDX-License-Identifier: GPL-2.0-only
//! Mel Gorman's SIS statistics (Chen Yu's SIS_UTIL patch quotes them), per interval and per LLC,
//! served with scx_stats and printed by `scx_sisutil monitor`.

use anyhow::{bail, Result};
use scx_stats::prelude::*;
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::bpf_intf as bi;
use crate::sched::text::printable;

pub const NR_STATS: usize = bi::sis_stat_STAT_NR as usize;
pub type Counters = [u64; NR_STATS];

// `counters!($mac)`: calls `$mac!` with every counter (`field: sis_stat_STAT_X, "description";`),
// derived by build.rs from intf.h's `enum sis_stat`, the counters' one definition.
include!(concat!(env!("OUT_DIR"), "/sis_stats.rs"));

macro_rules! def_metrics {
    ($($f:ident : $idx:ident, $desc:literal;)*) => {
        #[stat_doc]
        #[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
        #[stat(top)]
        pub struct Metrics {
            #[stat(desc = "features in force (kernel sched_feat spelling)")]
            pub features: String,
            // The derived statistics: each desc spells the formula of its DERIVED entry
            // (a unit test checks that they agree).
            #[stat(desc = "se_eff%: 100*(search-failed)/scanned: idle CPUs found per runqueue scanned (schedstat_parse.py, as in the tables of commit 70fb5ccf2ebb; 100 = target/prev/recent idle at every wake-up, ~0 at overload)")]
            pub se_eff: f64,
            #[stat(desc = "dom_eff%: 100*(domain_search-failed)/(scanned-search+domain_search): idle CPUs found per runqueue scanned by domain searches (schedstat_parse.py; the denominator is mmtests' SIS Domain Scanned)")]
            pub dom_eff: f64,
            #[stat(desc = "fast_rate%: 100*(search-domain_search)/search: wake-ups that took target, prev or recent_used_cpu")]
            pub fast_rate: f64,
            #[stat(desc = "success_rate%: 100*(search-failed)/search: wake-ups that found an idle CPU")]
            pub success_rate: f64,
            #[stat(desc = "mmtests' SIS Search Efficiency: 100*search/scanned (Mel Gorman's reports; reads ~100 at overload where se_eff reads ~0)")]
            pub mmtests_se_eff: f64,
            #[stat(desc = "mmtests' SIS Domain Search Eff: 100*domain_search/(scanned-search+domain_search)")]
            pub mmtests_dom_eff: f64,
            #[stat(desc = "CPUs examined per wake-up past target/prev/recent: (domain_scanned+kick_scanned)/search (the domain search and the enqueue path's kick search)")]
            pub scan_per_wakeup: f64,
            #[stat(desc = "CPUs examined per domain search: domain_scanned/domain_search")]
            pub avg_domain_scanned: f64,
            $(
                #[stat(desc = $desc)]
                pub $f: u64,
            )*
            #[stat(desc = "1 when loaded with --allow-queued-wakeup (SCX_OPS_ALLOW_QUEUED_WAKEUP: the kernel's wake list runs for this scheduler's tasks; fixed at load, not a live feature), else 0")]
            pub allow_queued_wakeup: u64,
            #[stat(desc = "per LLC")]
            pub llcs: BTreeMap<String, LlcMetrics>,
            #[stat(desc = "waits (runnable -> running) of tasks this scheduler ran")]
            pub wait_count: u64,
            #[stat(desc = "total of those waits, ns")]
            pub wait_sum_ns: u64,
            #[stat(desc = "mean wait, us")]
            pub wait_mean_us: f64,
            #[stat(desc = "median wait, us (upper end of its log2/4 bucket)")]
            pub wait_p50_us: f64,
            #[stat(desc = "99th percentile wait, us (upper end of its bucket)")]
            pub wait_p99_us: f64,
            #[stat(desc = "longest wait, us (upper end of the highest non-empty bucket)")]
            pub wait_max_us: f64,
            #[stat(desc = "wait histogram: counts of buckets 0.. (4 per octave, wait_hist::bucket_lo), trailing zeros cut")]
            pub wait_hist: Vec<u64>,
            #[stat(desc = "CPU time of the scheduler's own process (the loader: all its threads, utime+stime as in /proc/self/stat, to the ns: CLOCK_PROCESS_CPUTIME_ID), ns")]
            pub loader_cpu_ns: u64,
            #[stat(desc = "the interval the loader figures cover, ns (CLOCK_MONOTONIC between the two reads)")]
            pub elapsed_ns: u64,
            #[stat(desc = "loader_cpu%: the loader's share of one CPU over the interval, 100*loader_cpu_ns/elapsed_ns")]
            pub loader_cpu_pct: f64,
            #[stat(desc = "per struct_ops callback (select_cpu, enqueue, dispatch, tick, ...), with --prog-stats only: the kernel's BPF run-time statistics (run_cnt, run_time_ns) over the interval; empty without --prog-stats")]
            pub progs: BTreeMap<String, ProgMetrics>,
        }

        /// The raw counters: (name, description).
        pub const COUNTERS: &[(&str, &str)] = &[$( (stringify!($f), $desc), )*];

        impl Metrics {
            /// A raw counter by name.
            pub fn counter(&self, name: &str) -> Option<u64> {
                match name {
                    $( stringify!($f) => Some(self.$f), )*
                    _ => None,
                }
            }
            fn set_counters(&mut self, c: &Counters) {
                $( self.$f = c[bi::$idx as usize]; )*
            }
            fn sub_counters(&mut self, rhs: &Metrics) {
                $( self.$f = self.$f.wrapping_sub(rhs.$f); )*
            }
        }
    };
}
counters!(def_metrics);

#[stat_doc]
#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(_om_prefix = "l_", _om_label = "llc")]
pub struct LlcMetrics {
    #[stat(desc = "CPUs in the LLC")]
    pub weight: u64,
    #[stat(desc = "utilization: util_sum / (weight * 1024), %")]
    pub util_pct: f64,
    #[stat(desc = "nr_idle_scan: the scan depth the loader computes from util_sum")]
    pub nr_idle_scan: u64,
    #[stat(desc = "wake-up placements attributed to the LLC")]
    pub search: u64,
    #[stat(desc = "runqueues scanned (1 per search for the fast path + domain_scanned)")]
    pub scanned: u64,
    #[stat(desc = "domain searches (SMT sibling check + LLC scan)")]
    pub domain_search: u64,
    #[stat(desc = "CPUs examined by domain searches")]
    pub domain_scanned: u64,
    #[stat(desc = "LLC scans that found nothing")]
    pub failed: u64,
    #[stat(desc = "success_rate%")]
    pub success_rate: f64,
}

/// One struct_ops callback's figures from the kernel's BPF run-time statistics
/// (BPF_ENABLE_STATS with BPF_STATS_RUN_TIME, read with bpf_prog_get_info_by_fd): cumulative
/// as read, per interval once `delta` has made them so.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[stat(_om_prefix = "p_", _om_label = "prog")]
pub struct ProgMetrics {
    #[stat(desc = "calls of the callback (the kernel's run_cnt)")]
    pub calls: u64,
    #[stat(desc = "run_time_ns: the callback's time, entry to return, its kfuncs included, ns")]
    pub run_ns: u64,
    #[stat(desc = "ns_per_call: run_ns/calls, the mean ns per call (0 when it was not called)")]
    pub ns_per_call: f64,
}

impl ProgMetrics {
    /// Cumulative counters as the kernel reports them.
    pub fn of(calls: u64, run_ns: u64) -> Self {
        ProgMetrics {
            calls,
            run_ns,
            ns_per_call: mean(run_ns, calls),
        }
    }

    /// The interval since `prev` (the same program's cumulative counters one read before;
    /// None: it was not there). A counter below its previous value means the program was
    /// replaced (a restarted scheduler's new programs count from 0): the interval is then
    /// what the new one counted.
    pub fn since(&self, prev: Option<&ProgMetrics>) -> Self {
        match prev {
            Some(p) if self.calls >= p.calls && self.run_ns >= p.run_ns => {
                Self::of(self.calls - p.calls, self.run_ns - p.run_ns)
            }
            _ => Self::of(self.calls, self.run_ns),
        }
    }
}

/// num / den, 0 when den is 0.
fn mean(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// The longest features string printed, characters (every feature spelled is under 300).
const MAX_FEATURES_SHOWN: usize = 1000;

/// 100 * num / den, 0 when den is 0.
pub fn pct(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        100.0 * num as f64 / den as f64
    }
}

/// One derived statistic, `scale * sum(num) / sum(den)` over the raw counters (each term
/// a counter name and a coefficient); 0 when the denominator is 0 and clamped at 0 when
/// the numerator is negative (counters of one interval are not read atomically). This
/// table is the only definition: `derive()`, `--help-stats` and tools/bench (through
/// `--help-stats --json`) all use it.
#[derive(Debug, Serialize)]
pub struct Derived {
    pub name: &'static str,
    pub scale: f64,
    pub num: &'static [(&'static str, i64)],
    pub den: &'static [(&'static str, i64)],
    /// who publishes it defined this way
    pub source: &'static str,
}

/// Chen Yu's schedstat_parse.py, which printed the se_eff/dom_eff tables of commit
/// 70fb5ccf2ebb ("sched/fair: Introduce SIS_UTIL to search idle CPU based on sum of util_avg").
const SRC_SCHEDSTAT_PARSE: &str =
    "schedstat_parse.py (Chen Yu), the tool behind the tables of commit 70fb5ccf2ebb";
/// mmtests' MonitorProcschedstat.pm, which printed Mel Gorman's "Ops SIS ..." rows.
const SRC_MMTESTS: &str = "mmtests MonitorProcschedstat.pm (Mel Gorman)";
const SRC_BOTH: &str = "schedstat_parse.py and mmtests (same definition)";
const SRC_HERE: &str = "scx_sisutil";

const fn derived(
    name: &'static str,
    scale: f64,
    num: &'static [(&'static str, i64)],
    den: &'static [(&'static str, i64)],
    source: &'static str,
) -> Derived {
    Derived {
        name,
        scale,
        num,
        den,
        source,
    }
}

/// mmtests' "SIS Domain Scanned", the denominator of both domain efficiencies.
const SIS_DOMAIN_SCANNED: &[(&str, i64)] = &[("scanned", 1), ("search", -1), ("domain_search", 1)];

#[rustfmt::skip]
pub const DERIVED: &[Derived] = &[
    derived("se_eff", 100.0, &[("search", 1), ("failed", -1)], &[("scanned", 1)], SRC_SCHEDSTAT_PARSE),
    derived("dom_eff", 100.0, &[("domain_search", 1), ("failed", -1)], SIS_DOMAIN_SCANNED, SRC_SCHEDSTAT_PARSE),
    derived("fast_rate", 100.0, &[("search", 1), ("domain_search", -1)], &[("search", 1)], SRC_BOTH),
    derived("success_rate", 100.0, &[("search", 1), ("failed", -1)], &[("search", 1)], SRC_BOTH),
    derived("mmtests_se_eff", 100.0, &[("search", 1)], &[("scanned", 1)], SRC_MMTESTS),
    derived("mmtests_dom_eff", 100.0, &[("domain_search", 1)], SIS_DOMAIN_SCANNED, SRC_MMTESTS),
    derived("scan_per_wakeup", 1.0, &[("domain_scanned", 1), ("kick_scanned", 1)], &[("search", 1)], SRC_HERE),
    derived("avg_domain_scanned", 1.0, &[("domain_scanned", 1)], &[("domain_search", 1)], SRC_HERE),
];

impl Derived {
    /// The formula as the descriptions spell it: `100*(search-failed)/scanned`.
    pub fn formula(&self) -> String {
        fn side(terms: &[(&str, i64)]) -> String {
            let mut s = String::new();
            for (i, (n, k)) in terms.iter().enumerate() {
                let sign = if *k < 0 {
                    "-"
                } else if i > 0 {
                    "+"
                } else {
                    ""
                };
                let mul = if k.abs() == 1 {
                    String::new()
                } else {
                    format!("{}*", k.abs())
                };
                s += &format!("{sign}{mul}{n}");
            }
            if terms.len() > 1 {
                format!("({s})")
            } else {
                s
            }
        }
        let scale = if self.scale == 1.0 {
            String::new()
        } else {
            format!("{}*", self.scale)
        };
        format!("{scale}{}/{}", side(self.num), side(self.den))
    }

    /// Evaluate over counters looked up by name (a missing counter is 0).
    pub fn eval(&self, get: &dyn Fn(&str) -> u64) -> f64 {
        let sum = |t: &[(&str, i64)]| -> i128 {
            t.iter().map(|(n, k)| *k as i128 * get(n) as i128).sum()
        };
        let (num, den) = (sum(self.num), sum(self.den));
        if den <= 0 {
            0.0
        } else {
            self.scale * num.max(0) as f64 / den as f64
        }
    }
}

impl Metrics {
    fn set_derived(&mut self, name: &str, v: f64) {
        match name {
            "se_eff" => self.se_eff = v,
            "dom_eff" => self.dom_eff = v,
            "fast_rate" => self.fast_rate = v,
            "success_rate" => self.success_rate = v,
            "mmtests_se_eff" => self.mmtests_se_eff = v,
            "mmtests_dom_eff" => self.mmtests_dom_eff = v,
            "scan_per_wakeup" => self.scan_per_wakeup = v,
            "avg_domain_scanned" => self.avg_domain_scanned = v,
            _ => unreachable!("DERIVED names a field Metrics lacks: {name}"),
        }
    }

    /// Cumulative counters (sum over LLCs) plus per-LLC state.
    pub fn new(features: String, per_llc: &[(Counters, u64, u64, u64)]) -> Self {
        let mut total = [0u64; NR_STATS];
        let mut m = Metrics {
            features,
            ..Default::default()
        };
        for (i, (c, weight, util_sum, depth)) in per_llc.iter().enumerate() {
            for (t, v) in total.iter_mut().zip(c.iter()) {
                *t += v;
            }
            m.llcs.insert(
                format!("{i}"),
                LlcMetrics {
                    weight: *weight,
                    util_pct: pct(*util_sum, weight * 1024),
                    nr_idle_scan: *depth,
                    search: c[bi::sis_stat_STAT_SEARCH as usize],
                    scanned: c[bi::sis_stat_STAT_SCANNED as usize],
                    domain_search: c[bi::sis_stat_STAT_DOMAIN_SEARCH as usize],
                    domain_scanned: c[bi::sis_stat_STAT_DOMAIN_SCANNED as usize],
                    failed: c[bi::sis_stat_STAT_FAILED as usize],
                    success_rate: 0.0,
                },
            );
        }
        m.set_counters(&total);
        m
    }

    /// The derived statistics of DERIVED (zero-division safe).
    pub fn derive(&mut self) {
        for d in DERIVED {
            let v = d.eval(&|n| self.counter(n).unwrap_or(0));
            self.set_derived(d.name, v);
        }
        for l in self.llcs.values_mut() {
            l.success_rate = pct(l.search.saturating_sub(l.failed), l.search);
        }
    }

    /// The scheduler's wait histogram (cumulative, summed over CPUs).
    pub fn set_wait(&mut self, hist: Vec<u64>, count: u64, sum_ns: u64) {
        self.wait_hist = hist;
        self.wait_count = count;
        self.wait_sum_ns = sum_ns;
    }

    /// The loader's cumulative CPU time (`cpu_ns`) and the CLOCK_MONOTONIC time of the read
    /// (`now_ns`): per interval, `delta` makes them loader_cpu_ns, elapsed_ns and
    /// loader_cpu_pct.
    pub fn set_loader_cpu(&mut self, cpu_ns: u64, now_ns: u64) {
        self.loader_cpu_ns = cpu_ns;
        self.elapsed_ns = now_ns;
    }

    /// Wait figures of an interval's histogram.
    fn derive_wait(&mut self) {
        use crate::sched::wait_hist::{hist_max, quantile};
        let us = |ns: u64| ns as f64 / 1000.0;
        self.wait_mean_us = if self.wait_count > 0 {
            us(self.wait_sum_ns) / self.wait_count as f64
        } else {
            0.0
        };
        self.wait_p50_us = us(quantile(&self.wait_hist, 0.50));
        self.wait_p99_us = us(quantile(&self.wait_hist, 0.99));
        self.wait_max_us = us(hist_max(&self.wait_hist));
        let n = self
            .wait_hist
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, |i| i + 1);
        self.wait_hist.truncate(n);
    }

    /// Counters since `prev`; instant values (util, depth, features) from self.
    pub fn delta(&self, prev: &Metrics) -> Metrics {
        let mut d = self.clone();
        d.sub_counters(prev);
        d.wait_count = self.wait_count.wrapping_sub(prev.wait_count);
        d.wait_sum_ns = self.wait_sum_ns.wrapping_sub(prev.wait_sum_ns);
        for (i, b) in d.wait_hist.iter_mut().enumerate() {
            *b = b.wrapping_sub(prev.wait_hist.get(i).copied().unwrap_or(0));
        }
        d.derive_wait();
        d.loader_cpu_ns = self.loader_cpu_ns.wrapping_sub(prev.loader_cpu_ns);
        d.elapsed_ns = self.elapsed_ns.wrapping_sub(prev.elapsed_ns);
        d.loader_cpu_pct = pct(d.loader_cpu_ns, d.elapsed_ns);
        for (k, p) in d.progs.iter_mut() {
            *p = p.since(prev.progs.get(k));
        }
        for (k, l) in d.llcs.iter_mut() {
            if let Some(p) = prev.llcs.get(k) {
                l.search = l.search.wrapping_sub(p.search);
                l.scanned = l.scanned.wrapping_sub(p.scanned);
                l.domain_search = l.domain_search.wrapping_sub(p.domain_search);
                l.domain_scanned = l.domain_scanned.wrapping_sub(p.domain_scanned);
                l.failed = l.failed.wrapping_sub(p.failed);
            }
        }
        d.derive();
        d
    }

    pub fn format<W: Write>(&self, w: &mut W) -> Result<()> {
        writeln!(
            w,
            "features: {}",
            printable(&self.features, MAX_FEATURES_SHOWN)
        )?;
        writeln!(
            w,
            "SIS  search {:>8} fast {:>8} dom_search {:>7} dom_scanned {:>8} scanned {:>8} failed {:>6} skipped {:>6} kick_scanned {:>6}",
            self.search, self.fast, self.domain_search, self.domain_scanned, self.scanned, self.failed, self.scan_skipped, self.kick_scanned
        )?;
        writeln!(
            w,
            "     se_eff% {:>7.3} dom_eff% {:>7.3} fast_rate% {:>7.3} success_rate% {:>7.3} scan/wakeup {:>6.3} avg_scan {:>6.2}",
            self.se_eff, self.dom_eff, self.fast_rate, self.success_rate, self.scan_per_wakeup, self.avg_domain_scanned
        )?;
        writeln!(
            w,
            "     mmtests: SIS Search Efficiency {:>7.3} SIS Domain Search Eff {:>7.3}",
            self.mmtests_se_eff, self.mmtests_dom_eff
        )?;
        // every feature with a hit counter (hit_ + its name), in intf.h's order
        let mut hits = String::from("hits");
        for f in crate::sched::features::FEATURES {
            if let Some(n) = self.counter(&format!("hit_{}", f.name.to_ascii_lowercase())) {
                hits += &format!(" {} {n}", f.name);
            }
        }
        writeln!(w, "{hits}")?;
        writeln!(
            w,
            "sched enqueue {} direct {} dispatch_llc {} steal {} kick {} (atomic {}) wake_affine {} recent {} smt {}",
            self.enqueue, self.direct, self.dispatch_llc, self.steal, self.kick, self.kick_atomic, self.wake_affine, self.recent, self.smt
        )?;
        writeln!(
            w,
            "ttwu wake_on_cpu {} spun {} wake_list {} (on_cpu {}) allow_queued_wakeup {}",
            self.wake_on_cpu,
            self.wake_spun,
            self.wake_list,
            self.wake_list_on_cpu,
            if self.allow_queued_wakeup != 0 {
                "on"
            } else {
                "off"
            }
        )?;
        writeln!(
            w,
            "wait waits {} mean {:.1} p50 {:.1} p99 {:.1} max {:.1} (us, runnable -> running)",
            self.wait_count,
            self.wait_mean_us,
            self.wait_p50_us,
            self.wait_p99_us,
            self.wait_max_us
        )?;
        writeln!(
            w,
            "loader cpu% {:.3} (of one CPU: {:.1} us CPU in {:.3} s)",
            self.loader_cpu_pct,
            self.loader_cpu_ns as f64 / 1e3,
            self.elapsed_ns as f64 / 1e9
        )?;
        if !self.progs.is_empty() {
            writeln!(
                w,
                "progs (--prog-stats: the kernel's BPF run time per callback, kfuncs included)"
            )?;
            for (k, p) in &self.progs {
                writeln!(
                    w,
                    "  {:<14} calls {:>9} ns/call {:>9.1}",
                    printable(k, 20),
                    p.calls,
                    p.ns_per_call
                )?;
            }
        }
        writeln!(
            w,
            "  llc weight  util%  depth   search  scanned dom_search dom_scanned  success%"
        )?;
        let mut keys: Vec<_> = self.llcs.keys().collect();
        keys.sort_by_key(|k| k.parse::<usize>().unwrap_or(usize::MAX));
        for k in keys {
            let l = &self.llcs[k];
            writeln!(
                w,
                "{:>5} {:>6} {:>6.1} {:>6} {:>8} {:>8} {:>10} {:>11} {:>9.3}",
                printable(k, 20),
                l.weight,
                l.util_pct,
                l.nr_idle_scan,
                l.search,
                l.scanned,
                l.domain_search,
                l.domain_scanned,
                l.success_rate
            )?;
        }
        Ok(())
    }
}

pub fn server_data() -> StatsServerData<(), Metrics> {
    let open: Box<dyn StatsOpener<(), Metrics>> = Box::new(move |(req_ch, res_ch)| {
        req_ch.send(())?;
        let mut prev = res_ch.recv()?;
        let read: Box<dyn StatsReader<(), Metrics>> = Box::new(move |_args, (req_ch, res_ch)| {
            req_ch.send(())?;
            let cur = res_ch.recv()?;
            let delta = cur.delta(&prev);
            prev = cur;
            delta.to_json()
        });
        Ok(read)
    });
    StatsServerData::new()
        .add_meta(Metrics::meta())
        .add_meta(LlcMetrics::meta())
        .add_meta(ProgMetrics::meta())
        .add_ops("top", StatsOps { open, close: None })
}

/// The description a Metrics field carries (its `#[stat(desc)]`).
fn field_desc(name: &str) -> String {
    Metrics::meta()
        .fields
        .get(name)
        .and_then(|f| f.attrs.desc.clone())
        .unwrap_or_default()
}

/// `--help-stats`: the derived statistics from DERIVED, then every field's description.
/// With `json`, the same as one JSON object (tools/bench reads its formulas from it).
pub fn help_stats(json: bool) -> Result<()> {
    // writeln!, not println!: a closed pipe (`| head`) is an error line, not a panic
    let mut w = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({
            "counters": COUNTERS
                .iter()
                .map(|(n, d)| serde_json::json!({"name": n, "desc": d}))
                .collect::<Vec<_>>(),
            "derived": DERIVED
                .iter()
                .map(|d| serde_json::json!({
                    "name": d.name,
                    "formula": d.formula(),
                    "scale": d.scale,
                    "num": d.num,
                    "den": d.den,
                    "source": d.source,
                    "desc": field_desc(d.name),
                }))
                .collect::<Vec<_>>(),
        });
        writeln!(w, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        w,
        "Derived statistics, per interval, from the counters summed over the LLCs"
    )?;
    writeln!(
        w,
        "(0 when the denominator is 0; mmtests_* are mmtests' definitions, which Mel"
    )?;
    writeln!(
        w,
        "Gorman's published reports use; se_eff and dom_eff are schedstat_parse.py's,"
    )?;
    writeln!(w, "which the tables of commit 70fb5ccf2ebb use):")?;
    for d in DERIVED {
        writeln!(w, "  {:<19} = {}", d.name, d.formula())?;
        writeln!(w, "  {:<19}   [{}]", "", d.source)?;
    }
    writeln!(
        w,
        "Counting: scanned = 1 per search for target/prev/recent together + every CPU a\n\
         domain search probes (domain_scanned); domain_search = searches past the fast path;\n\
         failed = domain searches that found no idle CPU.\n"
    )?;
    server_data().describe_meta(&mut w, None)?;
    Ok(())
}

#[derive(clap::Args, Debug, Clone)]
pub struct MonitorOpts {
    /// Seconds between reports
    #[arg(long, default_value_t = 1.0, value_parser = parse_interval)]
    pub interval: f64,
    /// Stop after N reports (1.., default: until interrupted)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// One JSON object per interval instead of the table
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: StatsConnOpts,
}

impl MonitorOpts {
    /// The table every `secs` seconds until interrupted, from the default socket.
    pub fn every(secs: f64) -> Self {
        MonitorOpts {
            interval: secs,
            count: None,
            json: false,
            conn: StatsConnOpts::default(),
        }
    }
}

/// The stats socket of the running scx scheduler (scx_stats' default path).
pub const STATS_SOCKET: &str = "/var/run/scx/root/stats";
/// How long a client waits for one answer of the stats server by default, seconds.
pub const ANSWER_WAIT_S: f64 = 30.0;

#[derive(clap::Args, Debug, Clone)]
pub struct StatsConnOpts {
    /// The stats server's socket
    #[arg(long, value_name = "PATH", default_value = STATS_SOCKET)]
    pub stats_socket: PathBuf,
    /// Longest wait for one answer of the stats server, seconds (1..=3600): a busy machine
    /// answers late (one line says so when it does); no answer by then is an error
    #[arg(long, value_name = "SECS", default_value_t = ANSWER_WAIT_S,
          value_parser = |s: &str| parse_secs(s, "--stats-timeout", 1.0, 3600.0))]
    pub stats_timeout: f64,
}

impl Default for StatsConnOpts {
    fn default() -> Self {
        StatsConnOpts {
            stats_socket: PathBuf::from(STATS_SOCKET),
            stats_timeout: ANSWER_WAIT_S,
        }
    }
}

/// Why a stats request failed: the server went away (a restart: connect again), did not
/// answer within the wait, answered something that is not a stats report, or the tool was
/// told to stop while it waited.
#[derive(Debug)]
pub enum StatsError {
    Closed,
    NoAnswer(Duration),
    Garbled(String),
    Interrupted,
}

impl std::fmt::Display for StatsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatsError::Closed => write!(f, "the stats server closed the connection"),
            StatsError::NoAnswer(d) => write!(
                f,
                "no answer from the stats server in {:.1} s (--stats-timeout)",
                d.as_secs_f64()
            ),
            StatsError::Garbled(why) => write!(
                f,
                "the stats server answered something that is not scx_sisutil's statistics ({why})"
            ),
            StatsError::Interrupted => write!(f, "interrupted"),
        }
    }
}

impl std::error::Error for StatsError {}

/// Longest answer line read (a server that streams without a newline is not ours).
const MAX_ANSWER: usize = 64 << 20;

/// The longest single read: the shutdown flag and the answer's deadline are checked
/// between reads, so Ctrl-C ends a wait within about this.
const READ_STEP: Duration = Duration::from_millis(100);

/// One connection to a stats server (scx_stats' protocol: a JSON request per line, a JSON
/// response per line; every "stats" request on a connection answers the counters since the
/// previous one). Unlike scx_stats' client, a read that times out is retried on the same
/// connection, where the late answer arrives: a new connection would open a new delta
/// window and a new request would read the old answer. The whole answer has one deadline,
/// `wait` from the request: a server that trickles a byte at a time does not extend it.
pub struct StatsConn {
    stream: UnixStream,
    /// bytes read past the last answer's newline
    pending: Vec<u8>,
    wait: Duration,
    /// who prints the line that says it is waiting ("monitor", "ab")
    who: &'static str,
    said: bool,
}

impl StatsConn {
    pub fn connect(opts: &StatsConnOpts, who: &'static str) -> std::io::Result<Self> {
        // connect(2) to what is not a socket is ECONNREFUSED, read as "no scheduler yet"
        // (and waited for): such a path is named at once instead
        use std::os::unix::fs::FileTypeExt;
        if let Ok(m) = std::fs::metadata(&opts.stats_socket) {
            if !m.file_type().is_socket() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a socket",
                ));
            }
        }
        let stream = UnixStream::connect(&opts.stats_socket)?;
        let wait = Duration::from_secs_f64(opts.stats_timeout);
        stream.set_read_timeout(Some(READ_STEP))?;
        stream.set_write_timeout(Some(wait))?;
        Ok(StatsConn {
            stream,
            pending: vec![],
            wait,
            who,
            said: false,
        })
    }

    /// One "stats" request: the report, as JSON (no way to stop it but its deadline).
    #[cfg(test)]
    pub fn request(&mut self) -> std::result::Result<serde_json::Value, StatsError> {
        self.request_until(&|| false)
    }

    /// One "stats" request: the report, as JSON; Interrupted as soon as `shutdown` is true
    /// (checked every READ_STEP), NoAnswer when the whole line has not come within `wait`.
    pub fn request_until(
        &mut self,
        shutdown: &dyn Fn() -> bool,
    ) -> std::result::Result<serde_json::Value, StatsError> {
        let req = serde_json::to_string(&StatsRequest::new("stats", vec![]))
            .map_err(|e| StatsError::Garbled(e.to_string()))?
            + "\n";
        self.stream
            .write_all(req.as_bytes())
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    StatsError::NoAnswer(self.wait)
                }
                _ => StatsError::Closed,
            })?;
        let start = Instant::now();
        let deadline = start + self.wait;
        // a third of the wait (at most 5 s) before the line that says it is waiting
        let say_after = (self.wait / 3).min(Duration::from_secs(5));
        let mut line = std::mem::take(&mut self.pending);
        let mut buf = vec![0u8; 64 << 10];
        loop {
            if let Some(nl) = line.iter().position(|&b| b == b'\n') {
                self.pending = line.split_off(nl + 1);
                break;
            }
            if line.len() >= MAX_ANSWER {
                return Err(StatsError::Garbled(format!(
                    "no end of line in {MAX_ANSWER} bytes"
                )));
            }
            if shutdown() {
                return Err(StatsError::Interrupted);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StatsError::NoAnswer(self.wait));
            }
            if !self.said && now - start >= say_after {
                eprintln!(
                    "{}: the stats server has not answered in {:.1} s (a busy machine?): waiting up to {:.0} s",
                    self.who,
                    (now - start).as_secs_f64(),
                    self.wait.as_secs_f64()
                );
                self.said = true;
            }
            let step = READ_STEP.min(deadline - now).max(Duration::from_millis(1));
            let _ = self.stream.set_read_timeout(Some(step));
            let room = (MAX_ANSWER - line.len()).min(buf.len());
            match self.stream.read(&mut buf[..room]) {
                // closed: before the answer, or in the middle of its line
                Ok(0) => return Err(StatsError::Closed),
                Ok(n) => line.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return Err(StatsError::Closed),
            }
        }
        let text = String::from_utf8_lossy(&line);
        let short = printable(text.trim(), 80);
        let mut resp: StatsResponse = serde_json::from_str(&text)
            .map_err(|e| StatsError::Garbled(format!("{e}: '{short}'")))?;
        let v = resp.args.remove("resp").unwrap_or(serde_json::Value::Null);
        if resp.errno != 0 {
            return Err(StatsError::Garbled(format!(
                "errno {}: {}",
                resp.errno,
                v.to_string().chars().take(80).collect::<String>()
            )));
        }
        Ok(v)
    }
}

pub fn parse_interval(s: &str) -> std::result::Result<f64, String> {
    parse_secs(s, "interval", 0.05, 3600.0)
}

/// A number of seconds in `lo..=hi`, or the line that says why not (`what` names it).
pub fn parse_secs(s: &str, what: &str, lo: f64, hi: f64) -> std::result::Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(lo..=hi).contains(&v) {
        return Err(format!("{what} must be {lo}..={hi} seconds, got {v}"));
    }
    Ok(v)
}

/// The first wait between attempts to reach a scheduler that is not (yet) running, and the
/// longest: the wait doubles from the first to the longest while none runs.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// The wait after `w`: doubled, capped at RETRY_MAX.
fn next_wait(w: Duration) -> Duration {
    (w * 2).min(RETRY_MAX)
}

/// Sleep for `d`, or less if `shutdown` turns true (checked every 50 ms).
fn sleep_unless(shutdown: &dyn Fn() -> bool, d: Duration) {
    let end = std::time::Instant::now() + d;
    while !shutdown() {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

fn not_a_socket(opts: &StatsConnOpts) -> String {
    format!(
        "{} is not a socket: no stats server can be there (--stats-socket names the scheduler's, default {STATS_SOCKET})",
        opts.stats_socket.display()
    )
}

/// Connect to the running scheduler's stats socket, waiting while none runs (backing off
/// from RETRY_FIRST to RETRY_MAX between attempts).
fn connect(opts: &StatsConnOpts, shutdown: &dyn Fn() -> bool) -> Result<Option<StatsConn>> {
    let mut said = false;
    let mut wait = RETRY_FIRST;
    loop {
        if shutdown() {
            return Ok(None);
        }
        match StatsConn::connect(opts, "monitor") {
            Ok(c) => return Ok(Some(c)),
            Err(e) => {
                match e.kind() {
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                        if !said {
                            eprintln!(
                                "waiting for scx_sisutil to start (no stats socket at {})...",
                                opts.stats_socket.display()
                            );
                            said = true;
                        }
                        sleep_unless(shutdown, wait);
                        wait = next_wait(wait);
                    }
                    std::io::ErrorKind::PermissionDenied => {
                        bail!("reading scx_sisutil statistics needs root (the stats socket is root-only)")
                    }
                    std::io::ErrorKind::InvalidInput => bail!(not_a_socket(opts)),
                    _ => bail!("connecting to {}: {e}", opts.stats_socket.display()),
                }
            }
        }
    }
}

/// A connection to the running scheduler's stats server, or one clear line why there is none.
pub fn connect_once(opts: &StatsConnOpts, who: &'static str) -> Result<StatsConn> {
    let path = opts.stats_socket.display();
    match StatsConn::connect(opts, who) {
        Ok(c) => {
            foreign_server()?;
            Ok(c)
        }
        Err(e) => match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                bail!("no running scx_sisutil (no stats socket at {path}): start it with `sudo scx_sisutil`")
            }
            std::io::ErrorKind::PermissionDenied => {
                bail!("reading scx_sisutil statistics needs root (the stats socket is root-only)")
            }
            std::io::ErrorKind::InvalidInput => bail!(not_a_socket(opts)),
            _ => bail!("connecting to {path}: {e}"),
        },
    }
}

/// The stats socket is shared by every scx scheduler: one that is not scx_sisutil answers
/// with other statistics. Name it instead of waiting for it to turn into scx_sisutil.
fn foreign_server() -> Result<()> {
    let ops = std::fs::read_to_string("/sys/kernel/sched_ext/root/ops").unwrap_or_default();
    let ops = ops.trim();
    if !ops.is_empty() && !ops.starts_with("sisutil") {
        bail!("the running sched_ext scheduler is '{ops}', not scx_sisutil: its stats server at {STATS_SOCKET} has other statistics");
    }
    Ok(())
}

/// What one request of `monitor` gave.
enum Answer {
    Report(Box<Metrics>),
    /// the server closed the connection (connect again)
    Closed,
    /// the shutdown flag turned true while it waited
    Interrupted,
}

/// One report from `client`; an error, one line, when it did not answer in time or
/// answered what is not a report.
fn read_report(
    client: &mut StatsConn,
    path: &std::path::Path,
    shutdown: &dyn Fn() -> bool,
) -> Result<Answer> {
    let v = match client.request_until(shutdown) {
        Ok(v) => v,
        Err(StatsError::Closed) => return Ok(Answer::Closed),
        Err(StatsError::Interrupted) => return Ok(Answer::Interrupted),
        Err(e) => {
            foreign_server()?;
            bail!("{}: {e}", path.display());
        }
    };
    match serde_json::from_value::<Metrics>(v) {
        Ok(m) => Ok(Answer::Report(Box::new(m))),
        Err(e) => {
            foreign_server()?;
            bail!("{}: {}", path.display(), StatsError::Garbled(e.to_string()));
        }
    }
}

/// Connections in a row that a server may close before answering, within one
/// --stats-timeout, before `monitor` gives up on it (a restarting scheduler removes its
/// socket: that is waited for, not counted).
const CLOSED_TRIES: u32 = 5;

/// Print a report every interval. A scheduler that is not running or went away is waited
/// for (one line says so); a server that does not answer within --stats-timeout (one
/// deadline for the whole answer), answers what is not a report, or closes CLOSED_TRIES
/// connections in a row before answering (within one --stats-timeout) ends this with one
/// line. The shutdown flag is checked while waiting for an answer too.
pub fn monitor(opts: &MonitorOpts, shutdown: &dyn Fn() -> bool) -> Result<()> {
    let intv = Duration::from_secs_f64(opts.interval);
    let path = opts.conn.stats_socket.as_path();
    let wait = Duration::from_secs_f64(opts.conn.stats_timeout);
    let mut printed = 0u64;
    // connections closed before their first answer: how many, since when
    let mut closed: Option<(u32, Instant)> = None;
    'outer: while opts.count.is_none_or(|c| printed < c) {
        let Some(mut client) = connect(&opts.conn, shutdown)? else {
            break;
        };
        // the first request opens the delta window
        match read_report(&mut client, path, shutdown)? {
            Answer::Report(_) => closed = None,
            Answer::Interrupted => break,
            Answer::Closed => {
                let (n, first) = closed.get_or_insert((0, Instant::now()));
                *n += 1;
                if *n >= CLOSED_TRIES || first.elapsed() >= wait {
                    bail!(
                        "{}: the stats server closed {n} connections in a row before answering ({:.1} s): not a working stats server",
                        path.display(),
                        first.elapsed().as_secs_f64()
                    );
                }
                if *n == 1 {
                    eprintln!("the stats server closed the connection at once; trying again...");
                }
                sleep_unless(shutdown, RETRY_FIRST);
                continue;
            }
        }
        loop {
            // asleep until the report is due, awake every READ_STEP for Ctrl-C (a monitor
            // that woke every 20 ms cost what the loader's 20 ms interval does)
            let deadline = Instant::now() + intv;
            loop {
                if shutdown() {
                    break 'outer;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(READ_STEP.min(left));
            }
            let m = match read_report(&mut client, path, shutdown)? {
                Answer::Report(m) => m,
                Answer::Interrupted => break 'outer,
                Answer::Closed => {
                    eprintln!("scx_sisutil went away; waiting for it to come back...");
                    continue 'outer;
                }
            };
            if opts.json {
                println!("{}", serde_json::to_string(&m)?);
            } else {
                m.format(&mut std::io::stdout())?;
                println!();
            }
            printed += 1;
            if opts.count.is_some_and(|c| printed >= c) {
                break 'outer;
            }
        }
    }
    Ok(())
}

/// `to.f += from.f` for each field `f` named: a record's counters summed field by field (one
/// line for a struct of counts, as `Metrics::delta()` is one for the reports).
macro_rules! add_fields {
    ($to:expr, $from:expr; $($f:ident),+ $(,)?) => {
        $($to.$f += $from.$f;)+
    };
}
pub(crate) use add_fields;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::stats_server::fake_stats_server;

    /// `m` as the table prints it.
    fn formatted(m: &Metrics) -> String {
        let mut out = vec![];
        m.format(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn retry_wait_ends_at_shutdown_and_backs_off() {
        let t = Instant::now();
        sleep_unless(&|| true, Duration::from_secs(10));
        // returns without sleeping; 2 s (not 100 ms) leaves a loaded host's preemption out
        // and still fails a wait that ignores the shutdown (10 s)
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        let t = Instant::now();
        sleep_unless(&|| false, Duration::from_millis(120));
        assert!(
            t.elapsed() >= Duration::from_millis(120),
            "{:?}",
            t.elapsed()
        );
        // the waits between attempts: doubling, capped
        let waits: Vec<u128> = std::iter::successors(Some(RETRY_FIRST), |w| Some(next_wait(*w)))
            .take(6)
            .map(|w| w.as_millis())
            .collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
    }

    fn counters(pairs: &[(u32, u64)]) -> Counters {
        let mut c = [0u64; NR_STATS];
        for &(i, v) in pairs {
            c[i as usize] = v;
        }
        c
    }

    #[test]
    fn derived_formulas() {
        let c = counters(&[
            (bi::sis_stat_STAT_SEARCH, 200),
            (bi::sis_stat_STAT_FAST, 150),
            (bi::sis_stat_STAT_SCANNED, 400),
            (bi::sis_stat_STAT_DOMAIN_SEARCH, 50),
            (bi::sis_stat_STAT_DOMAIN_SCANNED, 100),
            (bi::sis_stat_STAT_FAILED, 10),
            (bi::sis_stat_STAT_KICK_SCANNED, 20),
        ]);
        let mut m = Metrics::new("x".into(), &[(c, 8, 4096, 3)]);
        m.derive();
        // 100*(200-10)/400
        assert_eq!(m.se_eff, 47.5);
        // 100*(50-10)/(400-200+50)
        assert_eq!(m.dom_eff, 16.0);
        // 100*(200-50)/200
        assert_eq!(m.fast_rate, 75.0);
        assert_eq!(m.success_rate, 95.0);
        assert_eq!(m.mmtests_se_eff, 50.0);
        assert_eq!(m.mmtests_dom_eff, 20.0);
        // (100+20)/200: the kick search's probes count
        assert_eq!(m.scan_per_wakeup, 0.6);
        assert_eq!(m.avg_domain_scanned, 2.0);
        assert_eq!(m.llcs["0"].util_pct, 50.0);
        assert_eq!(m.llcs["0"].nr_idle_scan, 3);
    }

    /// Published raw schedstat counters with the derived rows mmtests printed beside them,
    /// from Mel Gorman's LKML reports (tbench4 over all client counts, 2-socket
    /// CascadeLake, 80 CPUs):
    /// - rows 0-1: "[PATCH 05/10] sched/fair: Do not replace recent_used_cpu with the new
    ///   target", 2020-12-03, Message-Id 20201203141124.7391-6-mgorman@techsingularity.net
    ///   (columns 5.10.0-rc6 idlecandidate-v1r10, altrecent-v1r10);
    /// - rows 2-3: "Re: [RFC PATCH v7] sched/fair: select idle cpu from idle cpumask for
    ///   task wakeup" (Aubrey Li's patch), 2020-12-10, Message-ID
    ///   20201210113441.GS3371@techsingularity.net (columns 5.10.0-rc6 schedstat-v1r1,
    ///   idlemask-v7r1).
    ///
    /// Fields: SIS Search, SIS Domain Search, SIS Scanned, SIS Domain Scanned, SIS
    /// Failures, then SIS Search Efficiency, SIS Domain Search Eff, SIS Fast Success Rate,
    /// SIS Success Rate (printed with 2 decimals).
    type PublishedRow = (u64, u64, u64, u64, u64, f64, f64, f64, f64);
    const MEL_GORMAN_ROWS: &[PublishedRow] = &[
        (
            5653107942,
            3365067916,
            112173512543,
            109885472517,
            2923185114,
            5.04,
            3.06,
            40.47,
            48.29,
        ),
        (
            5726545742,
            3319768543,
            99194352541,
            96787575342,
            2950166441,
            5.77,
            3.43,
            42.03,
            48.48,
        ),
        (
            5596677950,
            3268344934,
            15909069113,
            13580736097,
            2944874939,
            35.18,
            24.07,
            41.60,
            47.38,
        ),
        (
            5586381168,
            3229088045,
            16568899405,
            14211606282,
            2843113421,
            33.72,
            22.72,
            42.20,
            49.11,
        ),
    ];

    fn metrics_of(search: u64, domain_search: u64, scanned: u64, failed: u64) -> Metrics {
        let c = counters(&[
            (bi::sis_stat_STAT_SEARCH, search),
            (bi::sis_stat_STAT_DOMAIN_SEARCH, domain_search),
            (bi::sis_stat_STAT_SCANNED, scanned),
            // our counting: one fast-path scan per search, the rest is the domain's
            (bi::sis_stat_STAT_DOMAIN_SCANNED, scanned - search),
            (bi::sis_stat_STAT_FAILED, failed),
        ]);
        let mut m = Metrics::new(String::new(), &[(c, 80, 0, 0)]);
        m.derive();
        m
    }

    #[test]
    fn reproduces_published_mmtests_rows() {
        let r2 = |v: f64| format!("{v:.2}");
        for (i, &(search, dsearch, scanned, dscanned, failed, se, dom, fast, succ)) in
            MEL_GORMAN_ROWS.iter().enumerate()
        {
            let m = metrics_of(search, dsearch, scanned, failed);
            // mmtests' "SIS Domain Scanned" is dom_eff's denominator
            let den = DERIVED.iter().find(|d| d.name == "dom_eff").unwrap();
            let get = |n: &str| m.counter(n).unwrap();
            let den_v: i128 = den
                .den
                .iter()
                .map(|(n, k)| *k as i128 * get(n) as i128)
                .sum();
            assert_eq!(den_v, dscanned as i128, "row {i}: SIS Domain Scanned");
            assert_eq!(
                r2(m.mmtests_se_eff),
                r2(se),
                "row {i}: SIS Search Efficiency"
            );
            assert_eq!(
                r2(m.mmtests_dom_eff),
                r2(dom),
                "row {i}: SIS Domain Search Eff"
            );
            assert_eq!(r2(m.fast_rate), r2(fast), "row {i}: SIS Fast Success Rate");
            assert_eq!(r2(m.success_rate), r2(succ), "row {i}: SIS Success Rate");
            // schedstat_parse.py's se_eff counts idle CPUs FOUND per runqueue scanned:
            // (search-failed)/scanned = mmtests' search/scanned x the success rate, so it
            // follows from the two published figures (each rounded to 0.005).
            let from_published = se * succ / 100.0;
            assert!(
                (m.se_eff - from_published).abs() < 0.005,
                "row {i}: se_eff {} vs {se} x {succ} / 100 = {from_published}",
                m.se_eff
            );
            // and its dom_eff divides the domain searches that found a CPU by the
            // published SIS Domain Scanned
            let want = 100.0 * (dsearch - failed) as f64 / dscanned as f64;
            assert_eq!(m.dom_eff, want, "row {i}: dom_eff");
            assert!(m.se_eff < m.mmtests_se_eff && m.dom_eff < m.mmtests_dom_eff);
        }
    }

    #[test]
    fn descriptions_spell_the_formulas() {
        for d in DERIVED {
            let desc = field_desc(d.name);
            assert!(
                desc.contains(&d.formula()),
                "{}: description '{desc}' lacks the formula {}",
                d.name,
                d.formula()
            );
            for (n, _) in d.num.iter().chain(d.den) {
                assert!(
                    COUNTERS.iter().any(|(c, _)| c == n),
                    "{}: no counter {n}",
                    d.name
                );
            }
        }
        assert_eq!(DERIVED[0].formula(), "100*(search-failed)/scanned");
        assert_eq!(
            DERIVED[1].formula(),
            "100*(domain_search-failed)/(scanned-search+domain_search)"
        );
    }

    #[test]
    fn zero_division_safe() {
        let mut m = Metrics::new(String::new(), &[([0; NR_STATS], 0, 0, 0)]);
        m.derive();
        for d in DERIVED {
            assert_eq!(d.eval(&|n| m.counter(n).unwrap()), 0.0, "{}", d.name);
        }
        assert_eq!(
            (
                m.se_eff,
                m.dom_eff,
                m.fast_rate,
                m.success_rate,
                m.avg_domain_scanned
            ),
            (0.0, 0.0, 0.0, 0.0, 0.0)
        );
        assert_eq!(m.llcs["0"].util_pct, 0.0);
    }

    #[test]
    fn delta_subtracts_counters_keeps_instant_values() {
        let a = Metrics::new(
            "a".into(),
            &[(counters(&[(bi::sis_stat_STAT_SEARCH, 10)]), 4, 0, 4)],
        );
        let b = Metrics::new(
            "b".into(),
            &[(counters(&[(bi::sis_stat_STAT_SEARCH, 25)]), 4, 2048, 1)],
        );
        let d = b.delta(&a);
        assert_eq!(d.search, 15);
        assert_eq!(d.llcs["0"].search, 15);
        assert_eq!(d.llcs["0"].nr_idle_scan, 1);
        assert_eq!(d.features, "b");
    }

    /// --prog-stats: per callback, the calls and run time of the interval are the
    /// differences of the kernel's cumulative run_cnt and run_time_ns, ns/call their ratio;
    /// a callback not called in the interval reads 0 calls and 0 ns/call (no division by
    /// zero); a counter that went back (a restarted scheduler's new program) counts from 0;
    /// a program absent from the previous read counts all it has.
    #[test]
    fn prog_stats_per_interval() {
        let with = |progs: &[(&str, u64, u64)]| Metrics {
            progs: progs
                .iter()
                .map(|&(n, c, ns)| (n.to_string(), ProgMetrics::of(c, ns)))
                .collect(),
            ..Default::default()
        };
        let a = with(&[
            ("select_cpu", 1_000, 500_000),
            ("tick", 40, 9_000),
            ("enqueue", 5_000_000, 9_000_000_000),
        ]);
        let b = with(&[
            ("select_cpu", 1_600, 560_000),
            ("tick", 40, 9_000),
            ("enqueue", 300, 450_000),
            ("dispatch", 10, 2_500),
        ]);
        let d = b.delta(&a);
        assert_eq!(d.progs["select_cpu"], ProgMetrics::of(600, 60_000));
        assert_eq!(d.progs["select_cpu"].ns_per_call, 100.0);
        // not called in the interval
        assert_eq!(d.progs["tick"], ProgMetrics::of(0, 0));
        assert_eq!(d.progs["tick"].ns_per_call, 0.0);
        // reset: counted from 0, not wrapped around
        assert_eq!(d.progs["enqueue"].calls, 300);
        assert_eq!(d.progs["enqueue"].ns_per_call, 1_500.0);
        // new
        assert_eq!(d.progs["dispatch"].ns_per_call, 250.0);
        let out = formatted(&d);
        assert!(
            out.lines()
                .any(|l| l == "  select_cpu     calls       600 ns/call     100.0"),
            "{out}"
        );
        // without --prog-stats: no progs line
        assert!(!formatted(&Metrics::default().delta(&Metrics::default())).contains("progs"));
    }

    /// The loader's CPU share over an interval: its CPU time and the clock both as the
    /// differences of two reads, 100 * cpu / elapsed; printed in the table.
    #[test]
    fn loader_cpu_share_per_interval() {
        let mut a = Metrics::default();
        a.set_loader_cpu(7_000_000, 10_000_000_000);
        let mut b = Metrics::default();
        // 0.3 ms of CPU in 1.5 s: 0.02 % of one CPU
        b.set_loader_cpu(7_300_000, 11_500_000_000);
        let d = b.delta(&a);
        assert_eq!((d.loader_cpu_ns, d.elapsed_ns), (300_000, 1_500_000_000));
        assert!(
            (d.loader_cpu_pct - 0.02).abs() < 1e-12,
            "{}",
            d.loader_cpu_pct
        );
        let out = formatted(&d);
        assert!(
            out.lines()
                .any(|l| l == "loader cpu% 0.020 (of one CPU: 300.0 us CPU in 1.500 s)"),
            "{out}"
        );
        // no time between the reads: 0, not a division by zero
        assert_eq!(b.delta(&b).loader_cpu_pct, 0.0);
    }

    /// The monitor's hits line names each feature that has a hit counter, from the tables.
    #[test]
    fn hits_line_from_the_tables() {
        let mut c = [0u64; NR_STATS];
        c[bi::sis_stat_STAT_HIT_WA_WEIGHT as usize] = 7;
        let m = Metrics::new(String::new(), &[(c, 4, 0, 0)]);
        let out = formatted(&m);
        let line = out.lines().find(|l| l.starts_with("hits ")).unwrap();
        assert_eq!(
            line,
            "hits SIS_UTIL 0 SIS_PROP 0 SIS_CORE 0 WA_IDLE_PREV 0 WA_WEIGHT 7 TTWU_QUEUE_DESCHED 0 \
             NEWIDLE_SKIP_IPI 0 KICK_SKIP_REDUNDANT 0"
        );
    }

    /// The fake stats server of `serve` (testing::stats_server), and the options that reach it.
    fn fake_server_with(
        serve: impl Fn(std::os::unix::net::UnixStream) + Send + Sync + 'static,
    ) -> (tempfile::TempDir, StatsConnOpts) {
        let (dir, stats_socket) = fake_stats_server("stats-test-", serve);
        let opts = StatsConnOpts {
            stats_socket,
            stats_timeout: 1.5,
        };
        (dir, opts)
    }

    /// A server that answers each request line with `answer` after `delay` (None: never).
    fn fake_server(answer: Option<String>, delay: Duration) -> (tempfile::TempDir, StatsConnOpts) {
        use std::io::{BufRead, BufReader};
        fake_server_with(move |conn| {
            let mut w = conn.try_clone().unwrap();
            let mut r = BufReader::new(conn);
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                line.clear();
                std::thread::sleep(delay);
                if let Some(a) = &answer {
                    if w.write_all(a.as_bytes()).is_err() {
                        return;
                    }
                }
            }
        })
    }

    fn report_line() -> String {
        let m = Metrics::new("SIS_UTIL".into(), &[([0; NR_STATS], 4, 0, 0)]);
        let resp = serde_json::json!({"errno": 0, "args": {"resp": m}});
        serde_json::to_string(&resp).unwrap() + "\n"
    }

    /// monitor against the fake server, in a thread: its result, or None when it has not
    /// returned within `limit` (it hangs).
    fn monitor_within(conn: StatsConnOpts, limit: Duration) -> Option<Result<()>> {
        let opts = MonitorOpts {
            interval: 0.05,
            count: Some(1),
            json: true,
            conn,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(monitor(&opts, &|| false));
        });
        rx.recv_timeout(limit).ok()
    }

    /// A server that never answers: monitor ends after --stats-timeout (1.5 s) with one
    /// line, instead of hanging.
    #[test]
    fn monitor_gives_up_on_a_silent_server() {
        let (_d, conn) = fake_server(None, Duration::ZERO);
        let e = gives_up_in_4s(conn, "a server that never answers");
        assert!(
            e.contains("no answer from the stats server in 1.5 s"),
            "{e}"
        );
    }

    /// monitor on `conn` (`what`) ends within 4 s with one line of error: that line. A
    /// monitor still running after 10 s fails the test.
    fn gives_up_in_4s(conn: StatsConnOpts, what: &str) -> String {
        let t = Instant::now();
        let e = monitor_within(conn, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("monitor hangs on {what}"))
            .unwrap_err();
        let e = format!("{e:#}");
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
        e
    }

    /// A server that answers what is not a report: one line, at once.
    #[test]
    fn monitor_names_a_garbled_server() {
        for garbage in [
            "hello\n",
            "{\"errno\":0,\"args\":{\"resp\":{\"x\":1}}}\n",
            "{\"errno\":22,\"args\":{\"resp\":\"bad\"}}\n",
        ] {
            let (_d, conn) = fake_server(Some(garbage.into()), Duration::ZERO);
            let e = monitor_within(conn, Duration::from_secs(10))
                .expect("monitor hangs on a garbled server")
                .unwrap_err();
            let e = format!("{e:#}");
            assert!(e.contains("not scx_sisutil's statistics"), "{garbage}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    /// A server that answers late (2 s, past the first read's 1.5 s: a third of the 4.5 s
    /// --stats-timeout): the read is retried on the same connection and the report
    /// printed; the same through the client ab uses. The answer comes 2.5 s before the
    /// timeout, a margin for a loaded host delaying the server's thread.
    #[test]
    fn late_answers_are_waited_for() {
        let (_d, mut conn) = fake_server(Some(report_line()), Duration::from_secs(2));
        conn.stats_timeout = 4.5;
        monitor_within(conn.clone(), Duration::from_secs(10))
            .expect("monitor hangs")
            .expect("monitor gives up on a late answer");
        let mut c = StatsConn::connect(&conn, "test").unwrap();
        for _ in 0..2 {
            let v = c.request().expect("a late answer");
            assert_eq!(v["features"], "SIS_UTIL");
        }
    }

    /// The review's trickling server (a byte every 0.2 s, never a newline: each read
    /// returned before its timeout, and the old client waited forever): one deadline for
    /// the whole answer ends monitor after --stats-timeout (1.5 s), one line. 4 s of margin
    /// on a loaded host; a client without the deadline never returns (10 s limit).
    #[test]
    fn monitor_gives_up_on_a_trickling_server() {
        let (_d, conn) = fake_server_with(|mut conn| {
            let mut req = [0u8; 256];
            let _ = conn.read(&mut req);
            let _ = conn.write_all(b"{");
            while conn.write_all(b" ").is_ok() {
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let e = gives_up_in_4s(conn, "a trickling server");
        assert!(
            e.contains("no answer from the stats server in 1.5 s"),
            "{e}"
        );
    }

    /// A server that accepts and closes at once (the old monitor retried forever): after
    /// CLOSED_TRIES connections, about CLOSED_TRIES * RETRY_FIRST = 1.25 s, one line.
    #[test]
    fn monitor_gives_up_on_a_closing_server() {
        let (_d, conn) = fake_server_with(drop);
        let e = gives_up_in_4s(conn, "a closing server (retried forever)");
        assert!(e.contains("closed 5 connections in a row"), "{e}");
    }

    /// Ctrl-C while waiting for an answer (a silent server, a 60 s --stats-timeout): the
    /// flag is checked inside the read loop, and monitor returns within READ_STEP (100 ms;
    /// 2 s of margin), not at the timeout.
    #[test]
    fn shutdown_ends_a_wait_for_an_answer() {
        let (_d, mut conn) = fake_server(None, Duration::ZERO);
        conn.stats_timeout = 60.0;
        let opts = MonitorOpts {
            interval: 0.05,
            count: Some(1),
            json: true,
            conn,
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let s = stop.clone();
        std::thread::spawn(move || {
            let _ = tx.send(monitor(&opts, &|| {
                s.load(std::sync::atomic::Ordering::Relaxed)
            }));
        });
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        rx.recv_timeout(Duration::from_secs(10))
            .expect("monitor waits out its timeout after Ctrl-C")
            .expect("an interrupted monitor ends without an error");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }

    /// A --stats-socket that is not a socket (connect(2) says ECONNREFUSED, read as "not
    /// started yet" and waited for) is named at once: a regular file, a directory.
    #[test]
    fn a_path_that_is_not_a_socket_is_refused_at_once() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("passwd");
        std::fs::write(&f, "root:x:0:0\n").unwrap();
        for p in [f, d.path().to_path_buf()] {
            let conn = StatsConnOpts {
                stats_socket: p.clone(),
                stats_timeout: 1.5,
            };
            let e = monitor_within(conn.clone(), Duration::from_secs(5))
                .expect("monitor waits on a path that is not a socket")
                .unwrap_err();
            let e = format!("{e:#}");
            assert!(e.contains("is not a socket"), "{p:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
            let e = format!("{:#}", connect_once(&conn, "ab").err().unwrap());
            assert!(e.contains("is not a socket"), "{p:?}: {e}");
        }
    }

    /// A report's features string is printed without its control characters.
    #[test]
    fn features_printed_without_escapes() {
        let m = Metrics::new("SIS_UTIL\u{1b}]0;pwned\u{7}\r\nfake".into(), &[]);
        let text = formatted(&m);
        let first = text.lines().next().unwrap();
        assert_eq!(first, "features: SIS_UTIL?]0;pwned???fake");
        assert!(!text.contains('\u{1b}') && !text.contains('\r'));
    }

    #[test]
    fn monitor_count_0_is_refused() {
        use clap::Parser;
        let e = crate::Cli::try_parse_from(["scx_sisutil", "monitor", "--count", "0"]).unwrap_err();
        assert!(e.to_string().contains("--count"), "{e}");
        assert!(crate::Cli::try_parse_from(["scx_sisutil", "monitor", "--count", "1"]).is_ok());
        assert!(
            crate::Cli::try_parse_from(["scx_sisutil", "monitor", "--stats-timeout", "0"]).is_err()
        );
    }

    #[test]
    fn interval_validation() {
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("abc").is_err());
        assert_eq!(parse_interval("0.5").unwrap(), 0.5);
    }
}
