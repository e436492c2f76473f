// SPDX-License-Identifier: GPL-2.0-only
//! SIS_UTIL scan-depth arithmetic (Chen Yu, "sched/fair: Introduce SIS_UTIL
//! to search idle CPU based on sum of util_avg", v4, 2022), the SIS_SMALL_LLC
//! rule from its review thread, the per-CPU utilization filter (the kernel's PELT) and
//! the `scan-table` subcommand that prints the depth for a range of
//! utilizations.

use anyhow::{bail, Result};

use crate::sched::features::bit;
use crate::sched::opts::DEFAULT_IMBALANCE_PCT;
use crate::sched::pelt::{self, Pelt};

/// The kernel's SCHED_CAPACITY_SCALE (intf.h's SCHED_CAPACITY).
pub const SCHED_CAPACITY_SCALE: u64 = crate::bpf_intf::sis_consts_SCHED_CAPACITY as u64;

/// LLCs of at most this many CPUs get SIS_SMALL_LLC's boost.
const SMALL_LLC_MAX_WEIGHT: u64 = 16;
/// PELT's half-life, ns: y^32 = 1/2 with the kernel's 1024 x 1024 ns periods (33.55 ms).
pub const UTIL_HALF_LIFE_NS: f64 = pelt::HALF_LIFE_NS as f64;
/// The SIS_UTIL commit message's table columns (utilization in percent).
const DEFAULT_UTIL_PCTS: [u64; 11] = [0, 5, 15, 25, 35, 45, 55, 65, 75, 85, 86];

/// Kernel's update_idle_cpu_scan() (kernel/sched/fair.c, SIS_UTIL), in the
/// same u64 integer arithmetic, returning the value it stores in
/// `sd_share->nr_idle_scan`.
///
/// Returns 0 for `llc_weight == 0` (the kernel never sees an empty LLC).
/// The products saturate instead of wrapping; this only matters for a
/// sum_util far beyond any real LLC (x > ~36e6), where the depth is 0 anyway.
pub fn nr_idle_scan(sum_util: u64, llc_weight: u64, imbalance_pct: u64) -> u64 {
    if llc_weight == 0 {
        return 0;
    }
    // The number of CPUs to search drops as sum_util increases; when
    // sum_util hits 100/pct (85% for pct 117) or above, the scan stops.
    //
    // let y = SCHED_CAPACITY_SCALE - p * x^2                       [1]
    // and y' = y / SCHED_CAPACITY_SCALE
    //
    // x is the ratio of sum_util compared to the CPU capacity:
    // x = sum_util / (llc_weight * SCHED_CAPACITY_SCALE)
    // y' is the ratio of CPUs to be scanned in the LLC domain,
    // and the number of CPUs to scan is calculated by:
    //
    // nr_scan = llc_weight * y'                                    [2]
    //
    // When x hits the threshold of overloaded, AKA, when
    // x = 100 / pct, y drops to 0. According to [1],
    // p should be SCHED_CAPACITY_SCALE * pct^2 / 10000
    //
    // Scale x by SCHED_CAPACITY_SCALE:
    // x' = sum_util / llc_weight;                                  [3]
    //
    // and finally [1] becomes:
    // y = SCHED_CAPACITY_SCALE -
    //     x'^2 * pct^2 / (10000 * SCHED_CAPACITY_SCALE)            [4]

    // equation [3]
    let x = sum_util / llc_weight;

    // equation [4]
    let tmp = x
        .saturating_mul(x)
        .saturating_mul(imbalance_pct)
        .saturating_mul(imbalance_pct)
        / (10000 * SCHED_CAPACITY_SCALE);
    let tmp = tmp.min(SCHED_CAPACITY_SCALE);
    let y = SCHED_CAPACITY_SCALE - tmp;

    // equation [2]
    y * llc_weight / SCHED_CAPACITY_SCALE
}

/// SIS_SMALL_LLC (K Prateek Nayak's review of "sched/fair: Introduce SIS_UTIL to search
/// idle CPU based on sum of util_avg", v4, 2022):
/// `if (llc_weight <= 16) nr_scan = nr_scan * 32 / llc_weight;`
/// i.e. x2 for 16 CPUs, x4 for 8, x32 for 1. Larger LLCs are unchanged.
///
/// The result is capped at `llc_weight`. select_idle_cpu()'s loop walks the
/// LLC's CPUs once and stops when they are exhausted, so a depth above
/// llc_weight can never examine more CPUs than llc_weight does: capping
/// changes nothing observable except the reported value, which then stays a
/// real CPU count (comparable across policies and LLC sizes in stats).
pub fn small_llc_depth(nr_scan: u64, llc_weight: u64) -> u64 {
    if llc_weight == 0 || llc_weight > SMALL_LLC_MAX_WEIGHT {
        return nr_scan;
    }
    (nr_scan.saturating_mul(32) / llc_weight).min(llc_weight)
}

/// The loader-side depth features of a feature word, decoded in this one place: the rules
/// the loader applies to nr_idle_scan before it writes an LLC's depth (the wake path reads
/// only the depth). A new loader-side depth feature is a field here, its bit in `of` and
/// its step in `depth`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DepthRules {
    /// SIS_SMALL_LLC: small_llc_depth() on LLCs of at most 16 CPUs
    pub small_llc: bool,
    /// SIS_FIT: an LLC's calibrated depth (src/sched/sis_fit.rs) where its bucket has one
    pub fit: bool,
}

impl DepthRules {
    /// The rules on in the feature word `feat`.
    pub fn of(feat: u64) -> Self {
        DepthRules {
            small_llc: feat & bit::SIS_SMALL_LLC != 0,
            fit: feat & bit::SIS_FIT != 0,
        }
    }

    /// The feature bits of the rules on (`of`'s inverse).
    pub fn bits(self) -> u64 {
        let on = |on: bool, b: u64| if on { b } else { 0 };
        on(self.small_llc, bit::SIS_SMALL_LLC) | on(self.fit, bit::SIS_FIT)
    }

    /// The depth the loader writes for an LLC of `llc_weight` CPUs at `sum_util`:
    /// nr_idle_scan(), small_llc_depth() with SIS_SMALL_LLC, then with SIS_FIT the LLC's
    /// calibrated depth (`fit`, its row of sis_fit::fit_table) where it has one.
    pub fn depth(
        self,
        sum_util: u64,
        llc_weight: u64,
        imbalance_pct: u64,
        fit: Option<&[Option<u64>; crate::sched::sis_fit::BUCKETS]>,
    ) -> u64 {
        let nr_scan = nr_idle_scan(sum_util, llc_weight, imbalance_pct);
        self.apply(nr_scan, sum_util, llc_weight, fit)
    }

    /// The rules on a given nr_idle_scan (`nr_scan`: the loader's, or the one a kernel
    /// stored, for `shadow`'s counterfactual): small_llc_depth() with SIS_SMALL_LLC, then
    /// with SIS_FIT the LLC's calibrated depth at `sum_util` where it has one.
    pub fn apply(
        self,
        nr_scan: u64,
        sum_util: u64,
        llc_weight: u64,
        fit: Option<&[Option<u64>; crate::sched::sis_fit::BUCKETS]>,
    ) -> u64 {
        let depth = if self.small_llc {
            small_llc_depth(nr_scan, llc_weight)
        } else {
            nr_scan
        };
        if !self.fit {
            return depth;
        }
        crate::sched::sis_fit::fit_depth(fit, sum_util, llc_weight).unwrap_or(depth)
    }
}

/// The depth the scheduler writes: nr_idle_scan(), then small_llc_depth()
/// when `small_llc`.
pub fn scan_depth(sum_util: u64, llc_weight: u64, imbalance_pct: u64, small_llc: bool) -> u64 {
    let nr_scan = nr_idle_scan(sum_util, llc_weight, imbalance_pct);
    if small_llc {
        small_llc_depth(nr_scan, llc_weight)
    } else {
        nr_scan
    }
}

/// sum_util for a utilization percentage, as the SIS_UTIL commit message's tables mean it:
/// `util_pct` percent of the LLC's capacity, `u * llc_weight * 1024 / 100`
/// (integer division, truncating).
pub fn sum_util_for_pct(util_pct: u64, llc_weight: u64) -> u64 {
    util_pct
        .saturating_mul(llc_weight)
        .saturating_mul(SCHED_CAPACITY_SCALE)
        / 100
}

/// The per-CPU utilization filter (0..=1024): the kernel's PELT util_avg arithmetic
/// (`crate::sched::pelt`: 1024 x 1024 ns periods, y^32 = 1/2, so a 33.55 ms half-life, the
/// kernel's integer decay and divider) fed with a CPU's busy time per sampling period,
/// spread evenly over it (the one approximation: the kernel updates at each switch and
/// adds its running time where it fell in the period). So a CPU constantly busy from idle
/// reaches ~512 after 32 PELT periods whatever the sampling period, and idle for as long
/// halves util. `busy_ns > period_ns` is clamped to `period_ns`; a 0 period leaves util
/// unchanged.
///
/// Differences from the kernel's cpu_util_cfs(): no util_est (the kernel's max of util_avg
/// and the enqueued tasks' util_est: a per-task estimate the loader does not have; it added
/// 0.2-2.9 points to the LLC's sum in 20 of 22 measured rows,
/// docs/results/shadow-depth-inputs-2026-11-28), no frequency or capacity invariance, and
/// busy time is the time the CPU was not running its idle task (every class, IRQs), as
/// the BPF side accounts it, not the fair class's running time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UtilFilter {
    pelt: Pelt,
}

impl UtilFilter {
    /// Feed one sampling period: the CPU was busy `busy_ns` out of
    /// `period_ns`. Returns the new util (0..=1024).
    pub fn update(&mut self, busy_ns: u64, period_ns: u64) -> u64 {
        self.pelt.update(busy_ns, period_ns)
    }

    #[cfg(test)]
    pub fn util(&self) -> u64 {
        self.pelt.util_avg()
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct ScanTableOpts {
    /// CPUs in the LLC (1..=4096)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub llc_weight: u64,
    /// imbalance_pct of the LLC domain (100..=200; the kernel's default for the LLC is 117)
    #[arg(long, default_value_t = DEFAULT_IMBALANCE_PCT,
          value_parser = clap::value_parser!(u64).range(100..=200))]
    pub imbalance_pct: u64,
    /// Utilization percentages, comma-separated (each 0..=100). Default: the SIS_UTIL commit message's columns.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(0..=100))]
    pub util: Option<Vec<u64>>,
    /// Apply SIS_SMALL_LLC (depth * 32 / llc_weight for LLCs of <= 16 CPUs)
    #[arg(long)]
    pub small_llc: bool,
    /// Print JSON: [{"util_pct":..,"nr_scan":..},...]
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Serialize, Debug, PartialEq)]
pub struct ScanRow {
    pub util_pct: u64,
    pub nr_scan: u64,
}

/// One row per utilization percentage: the depth scan_depth() gives for
/// sum_util_for_pct(util_pct). Validates the options' ranges.
pub fn scan_table(opts: &ScanTableOpts) -> Result<Vec<ScanRow>> {
    if !(1..=4096).contains(&opts.llc_weight) {
        bail!("--llc-weight must be 1..=4096, got {}", opts.llc_weight);
    }
    if !(100..=200).contains(&opts.imbalance_pct) {
        bail!(
            "--imbalance-pct must be 100..=200, got {}",
            opts.imbalance_pct
        );
    }
    let utils: &[u64] = opts.util.as_deref().unwrap_or(&DEFAULT_UTIL_PCTS);
    if utils.is_empty() {
        bail!("--util must list at least one percentage");
    }
    if let Some(bad) = utils.iter().find(|&&u| u > 100) {
        bail!("--util values must be 0..=100, got {}", bad);
    }
    Ok(utils
        .iter()
        .map(|&u| ScanRow {
            util_pct: u,
            nr_scan: scan_depth(
                sum_util_for_pct(u, opts.llc_weight),
                opts.llc_weight,
                opts.imbalance_pct,
                opts.small_llc,
            ),
        })
        .collect())
}

/// `scan-table` subcommand: a text table (header `util%  nr_scan`, two
/// right-aligned columns) or, with --json, the rows as one JSON array line.
pub fn scan_table_main(opts: &ScanTableOpts) -> Result<()> {
    let rows = scan_table(opts)?;
    if opts.json {
        println!("{}", serde_json::to_string(&rows)?);
    } else {
        println!("util%  nr_scan");
        for r in &rows {
            println!("{:>5}  {:>7}", r.util_pct, r.nr_scan);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn opts(llc_weight: u64) -> ScanTableOpts {
        ScanTableOpts {
            llc_weight,
            imbalance_pct: DEFAULT_IMBALANCE_PCT,
            util: None,
            small_llc: false,
            json: false,
        }
    }

    fn depths(o: &ScanTableOpts) -> Vec<u64> {
        scan_table(o).unwrap().iter().map(|r| r.nr_scan).collect()
    }

    #[test]
    fn commit_message_tables_exact() {
        // Copied from the SIS_UTIL commit message (util 0,5,15,...,85,86).
        let o = opts(112);
        let rows = scan_table(&o).unwrap();
        let utils: Vec<u64> = rows.iter().map(|r| r.util_pct).collect();
        assert_eq!(utils, DEFAULT_UTIL_PCTS.to_vec());
        assert_eq!(depths(&o), [112, 111, 108, 102, 93, 81, 65, 47, 25, 1, 0]);
        assert_eq!(depths(&opts(16)), [16, 15, 15, 14, 13, 11, 9, 6, 3, 0, 0]);
    }

    #[test]
    fn matches_real_valued_quadratic() {
        // Independent model: floor(w * (1 - min((s/(w*1024) * pct/100)^2, 1))).
        // The kernel form truncates x' and tmp downwards, so it can only be
        // above the model: x' loses < 1 (tmp < 2*pct/100 lower near the
        // threshold), tmp's division < 1 more, each worth w/1024 CPUs.
        for w in 1..=256u64 {
            for pct in [100u64, 110, 117, 125, 150, 200] {
                for s in (0..=w * 1024).step_by(11) {
                    let xr = s as f64 / (w * 1024) as f64 * pct as f64 / 100.0;
                    let model = (w as f64 * (1.0 - (xr * xr).min(1.0))).floor() as i64;
                    let got = nr_idle_scan(s, w, pct) as i64;
                    let tol = ((2 * pct + 100) * w).div_ceil(100 * 1024) as i64;
                    assert!(
                        got >= model && got - model <= tol,
                        "w={w} pct={pct} s={s}: {got} vs {model}"
                    );
                }
            }
        }
    }

    #[test]
    fn full_depth_at_zero_none_at_86_monotone() {
        for w in 1..=256u64 {
            for pct in [100u64, 110, 117, 125, 150, 200] {
                assert_eq!(nr_idle_scan(0, w, pct), w);
                let mut prev = u64::MAX;
                for s in (0..=w * 1024 + 64).step_by(3) {
                    let d = nr_idle_scan(s, w, pct);
                    assert!(d <= prev && d <= w, "w={w} pct={pct} s={s}");
                    prev = d;
                }
                let mut prev = u64::MAX;
                for u in 0..=100 {
                    let d = scan_depth(sum_util_for_pct(u, w), w, pct, false);
                    assert!(d <= prev, "w={w} pct={pct} u={u}");
                    prev = d;
                }
            }
            for u in 86..=100 {
                assert_eq!(
                    nr_idle_scan(sum_util_for_pct(u, w), w, 117),
                    0,
                    "w={w} u={u}"
                );
            }
        }
        assert_eq!(nr_idle_scan(123, 0, 117), 0);
    }

    #[test]
    fn small_llc() {
        // 16 CPUs: doubled (capped at 16).
        assert_eq!(small_llc_depth(5, 16), 10);
        assert_eq!(small_llc_depth(8, 16), 16);
        assert_eq!(small_llc_depth(15, 16), 16);
        // 8 CPUs: x4, capped at 8.
        assert_eq!(small_llc_depth(1, 8), 4);
        assert_eq!(small_llc_depth(2, 8), 8);
        assert_eq!(small_llc_depth(3, 8), 8);
        assert_eq!(small_llc_depth(0, 8), 0);
        // 32 CPUs: unchanged.
        for d in 0..=32 {
            assert_eq!(small_llc_depth(d, 32), d);
        }
        // Through the table: 16 CPUs, the commit's row doubled and capped.
        let mut o = opts(16);
        o.small_llc = true;
        let plain = [16u64, 15, 15, 14, 13, 11, 9, 6, 3, 0, 0];
        let want: Vec<u64> = plain.iter().map(|d| (d * 2).min(16)).collect();
        assert_eq!(depths(&o), want);
        o.llc_weight = 32;
        assert_eq!(depths(&o), depths(&opts(32)));
        assert_eq!(scan_depth(0, 8, 117, true), 8);
    }

    /// The loader-side depth features decoded from their own bits (no other bit moves
    /// them), and each applied by `depth`: SIS_SMALL_LLC doubles a 16-CPU LLC's 6 at 65 %,
    /// SIS_FIT takes the LLC's calibrated depth where its bucket has one, else SIS_UTIL's.
    #[test]
    fn depth_rules_decode_their_bits_and_apply_them() {
        let (small, fit) = (bit::SIS_SMALL_LLC, bit::SIS_FIT);
        let none = DepthRules::default();
        assert_eq!(DepthRules::of(!(small | fit)), none);
        assert_eq!(
            DepthRules::of(small),
            DepthRules {
                small_llc: true,
                fit: false
            }
        );
        assert_eq!(
            DepthRules::of(fit),
            DepthRules {
                small_llc: false,
                fit: true
            }
        );

        for r in [
            none,
            DepthRules::of(small),
            DepthRules::of(fit),
            DepthRules::of(small | fit),
        ] {
            assert_eq!(DepthRules::of(r.bits()), r);
        }
        assert_eq!(DepthRules::of(fit).bits(), fit);
        let sum = sum_util_for_pct(65, 16);
        assert_eq!(none.depth(sum, 16, 117, None), 6);
        assert_eq!(DepthRules::of(small).depth(sum, 16, 117, None), 12);
        let mut row = [None; crate::sched::sis_fit::BUCKETS];
        row[6] = Some(2);
        assert_eq!(DepthRules::of(fit).depth(sum, 16, 117, Some(&row)), 2);
        assert_eq!(none.depth(sum, 16, 117, Some(&row)), 6);
        assert_eq!(DepthRules::of(fit | small).depth(sum, 16, 117, None), 12);
        row[6] = None;
        assert_eq!(DepthRules::of(fit).depth(sum, 16, 117, Some(&row)), 6);
    }

    /// The filter is PELT's: from idle, busy for one half-life (32 periods of 1024 x 1024
    /// ns) reaches ~512 whatever the sampling period; then busy on, > 1000; idle for a
    /// half-life halves it.
    #[test]
    fn filter_step_response() {
        const P: u64 = crate::sched::pelt::PELT_PERIOD_NS;
        for period in [P, 4 * P, 16 * P, 20 * MS] {
            let mut f = UtilFilter::default();
            assert_eq!(f.util(), 0);
            let run = |f: &mut UtilFilter, busy: bool, ns: u64| {
                let mut t = 0;
                while t < ns {
                    let s = period.min(ns - t);
                    f.update(if busy { s } else { 0 }, s);
                    t += s;
                }
            };
            run(&mut f, true, 32 * P);
            assert!(f.util().abs_diff(512) <= 3, "period {period}: {}", f.util());
            run(&mut f, true, 168 * P);
            let busy = f.util();
            assert!(busy > 1000 && busy <= 1024, "period {period}: {busy}");
            run(&mut f, false, 32 * P);
            assert!(
                f.util().abs_diff(busy / 2) <= 3,
                "period {period}: {} vs {busy}",
                f.util()
            );
        }
    }

    #[test]
    fn filter_edge_cases() {
        // busy_ns > period_ns is clamped: same as fully busy.
        let (mut a, mut b) = (UtilFilter::default(), UtilFilter::default());
        assert_eq!(a.update(10 * MS, 4 * MS), b.update(4 * MS, 4 * MS));
        assert_eq!(a, b);
        // Long busy tends to 1024, never above (the kernel's truncations keep it a little under).
        let full = a.update(u64::MAX, 10_000 * MS);
        assert!((1020..=1024).contains(&full), "{full}");
        // Period 0 leaves util unchanged.
        let before = a;
        assert_eq!(a.update(5 * MS, 0), full);
        assert_eq!(a, before);
        // Half busy converges to 512.
        let mut h = UtilFilter::default();
        for _ in 0..1000 {
            h.update(2 * MS, 4 * MS);
        }
        assert!(h.util().abs_diff(512) <= 1, "{}", h.util());
    }

    #[test]
    fn validation_errors() {
        let err = |o: &ScanTableOpts| scan_table(o).unwrap_err().to_string();
        assert_eq!(err(&opts(0)), "--llc-weight must be 1..=4096, got 0");
        assert!(err(&opts(4097)).contains("--llc-weight"));
        let mut o = opts(16);
        o.imbalance_pct = 99;
        assert_eq!(err(&o), "--imbalance-pct must be 100..=200, got 99");
        o.imbalance_pct = 201;
        assert_eq!(err(&o), "--imbalance-pct must be 100..=200, got 201");
        let mut o = opts(16);
        o.util = Some(vec![5, 101]);
        assert_eq!(err(&o), "--util values must be 0..=100, got 101");
        o.util = Some(vec![]);
        assert!(err(&o).contains("--util"));
        o.util = Some(vec![0, 100]);
        assert_eq!(depths(&o), [16, 0]);
    }

    #[test]
    fn clap_parsing_and_json() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            o: ScanTableOpts,
        }
        let c = Cli::try_parse_from([
            "x",
            "--llc-weight",
            "16",
            "--util",
            "0,50,100",
            "--small-llc",
        ])
        .unwrap();
        assert_eq!(c.o.imbalance_pct, 117);
        let rows = scan_table(&c.o).unwrap();
        assert_eq!(
            rows.iter().map(|r| r.util_pct).collect::<Vec<_>>(),
            [0, 50, 100]
        );
        let json = serde_json::to_string(&rows).unwrap();
        assert!(
            json.starts_with(r#"[{"util_pct":0,"nr_scan":16},{"util_pct":50,"#),
            "{json}"
        );
        assert!(Cli::try_parse_from(["x", "--llc-weight", "0"]).is_err());
        assert!(Cli::try_parse_from(["x", "--llc-weight", "8", "--imbalance-pct", "99"]).is_err());
        assert!(Cli::try_parse_from(["x", "--llc-weight", "8", "--util", "5,101"]).is_err());
    }
}
