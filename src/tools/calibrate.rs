// SPDX-License-Identifier: GPL-2.0-only
//! `scx_sisutil calibrate`: how far must a wake-up's LLC scan walk to find an idle CPU,
//! and how far did the policy let it? SIS_UTIL ("sched/fair: Introduce SIS_UTIL to search
//! idle CPU based on sum of util_avg") estimates that depth from the LLC's utilization sum
//! for want of "a crystal ball"; the scheduler records the real distance (src/bpf/calib.bpf.h)
//! per LLC and 10 % utilization bucket while this command runs, and this reports and plots it
//! against SIS_UTIL's curve. The records and the loader's side of them (with SIS_FIT) are
//! src/sched/sis_fit.rs.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::sched::features;
use crate::sched::sis_fit::{
    depth_p95, fit_bucket, read_records, FitRow, Rec, BUCKETS, CTL_LEASE, CTL_PCT, CTL_PIN,
    CTL_WEIGHT, LEASE_NS, MAX_LLCS, RECS_PIN,
};
use crate::sched::sis_util_depth::{sum_util_for_pct, DepthRules};

#[derive(clap::Args, Debug, Clone)]
pub struct CalibrateOpts {
    /// Seconds of recording per report
    #[arg(long, default_value_t = 5.0, value_parser = crate::sched::stats::parse_interval)]
    pub interval: f64,
    /// Number of reports (1..=100000); the plot covers them all
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub count: u64,
    /// One JSON object per report: {"buckets": [...], ...}
    #[arg(long)]
    pub json: bool,
    /// Write a PNG of SIS_UTIL's depth curve against the measured depth_p95
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// Measure nothing: plot the last report of FILE (written by --json) to --plot
    #[arg(long, value_name = "FILE.json", requires = "plot")]
    pub from_json: Option<PathBuf>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Bucket {
    pub util_pct_lo: u64,
    pub util_pct_hi: u64,
    /// wake-ups that reached the LLC scan (skipped scans included)
    pub wakeups: u64,
    /// mean depth the policy allowed (0 skipped; every allowed CPU when unbounded)
    pub mean_allowed_depth: f64,
    /// wake-ups with an idle CPU within the allowed depth
    pub found_within_depth: u64,
    /// wake-ups that stopped short of an idle CPU, or skipped the scan while one was idle
    pub missed_idle: u64,
    /// CPUs examined by scans when no CPU was idle
    pub wasted_scan: u64,
    /// wake-ups with no idle allowed CPU in the LLC
    pub no_idle: u64,
    /// the depth that finds an idle CPU for 95 % of the wake-ups that had one (null: none had)
    pub depth_p95: Option<u64>,
    /// SIS_UTIL's nr_idle_scan at the bucket's middle (the loader's imbalance_pct)
    pub sis_util_depth: u64,
}

#[derive(serde::Serialize, serde::Deserialize, Debug)]
struct Report {
    interval_s: f64,
    features: String,
    llc_weights: Vec<u64>,
    /// the loader's imbalance_pct (reports without it: the default)
    #[serde(default = "default_imbalance_pct")]
    imbalance_pct: u64,
    buckets: Vec<Bucket>,
}

fn default_imbalance_pct() -> u64 {
    crate::sched::opts::DEFAULT_IMBALANCE_PCT
}

/// The last report of a `--json` run in `path` (`opt`: the option that named it, for the
/// error), read by tools::safe_io::read_input (as root, nothing the path points to is
/// trusted: no symlink followed, no FIFO waited on, a regular file of at most 64 MiB), and
/// checked by [`check_report`]. Whatever is wrong is one error.
fn read_report(path: &Path, opt: &str) -> Result<Report> {
    let bytes = crate::tools::safe_io::read_input(path, opt)?;
    let text = String::from_utf8_lossy(&bytes);
    let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) else {
        bail!("{opt}: {} holds no report", path.display());
    };
    let r: Report = serde_json::from_str(line)
        .with_context(|| format!("{opt}: {} is not a calibrate --json report", path.display()))?;
    check_report(&r).with_context(|| format!("{opt}: {}", path.display()))?;
    Ok(r)
}

/// A report's values within what a machine can give (a hand-made or corrupt file is one
/// error, not a plot of nonsense): this build's bucket count and bounds; imbalance_pct
/// 100..=200 (the loader's range); 1..=MAX_LLCS LLC weights of 1..=MAX_CPUS each; a
/// positive finite interval; per bucket, found + missed + no idle = wake-ups (checked
/// sums: no overflow passes), and the depths (mean allowed, p95, SIS_UTIL's) at most the
/// largest LLC; the features known names.
fn check_report(r: &Report) -> Result<()> {
    const MAX_CPUS: u64 = crate::bpf_intf::sis_consts_MAX_CPUS as u64;
    if r.buckets.len() != BUCKETS {
        bail!(
            "{} buckets, not {BUCKETS}: not this build's report",
            r.buckets.len()
        );
    }
    if !(100..=200).contains(&r.imbalance_pct) {
        bail!("imbalance_pct {} is not 100..=200", r.imbalance_pct);
    }
    if r.llc_weights.is_empty()
        || r.llc_weights.len() > MAX_LLCS
        || r.llc_weights.iter().any(|w| !(1..=MAX_CPUS).contains(w))
    {
        bail!(
            "llc_weights must be 1..={MAX_LLCS} LLCs of 1..={MAX_CPUS} CPUs, got {} LLCs{}",
            r.llc_weights.len(),
            r.llc_weights
                .iter()
                .find(|w| !(1..=MAX_CPUS).contains(*w))
                .map_or(String::new(), |w| format!(" (one of {w} CPUs)"))
        );
    }
    if !(r.interval_s.is_finite() && r.interval_s > 0.0) {
        bail!(
            "interval_s {} is not a positive number of seconds",
            r.interval_s
        );
    }
    let words: Vec<&str> = r.features.split_whitespace().collect();
    features::apply(0, &words).context("the report's features")?;
    let w = r.llc_weights.iter().copied().max().unwrap_or(1);
    for (i, b) in r.buckets.iter().enumerate() {
        let lo = i as u64 * 10;
        let what = format!("bucket {}-{} %", lo, lo + 10);
        if b.util_pct_lo != lo || b.util_pct_hi != lo + 10 {
            bail!(
                "bucket {i} covers {}-{} %, not {what}",
                b.util_pct_lo,
                b.util_pct_hi
            );
        }
        let sum = b
            .found_within_depth
            .checked_add(b.missed_idle)
            .and_then(|x| x.checked_add(b.no_idle));
        if sum != Some(b.wakeups) {
            bail!(
                "{what}: found {} + missed {} + no idle {} is not its {} wake-ups",
                b.found_within_depth,
                b.missed_idle,
                b.no_idle,
                b.wakeups
            );
        }
        let depth_ok = b.mean_allowed_depth.is_finite()
            && (0.0..=w as f64).contains(&b.mean_allowed_depth)
            && b.depth_p95.is_none_or(|d| d <= w)
            && b.sis_util_depth <= w;
        if !depth_ok {
            bail!(
                "{what}: depths (mean allowed {}, p95 {:?}, utilization-based {}) beyond the LLC of {w} CPUs",
                b.mean_allowed_depth,
                b.depth_p95,
                b.sis_util_depth
            );
        }
    }
    Ok(())
}

/// SIS_FIT's row from a saved `calibrate --json` report (`shadow --fit`): each bucket by
/// sis_fit::fit_bucket(), as the scheduler fits its own records; the report sums the LLCs,
/// so one row serves every LLC. Returns the row and how many buckets it fits.
pub fn fit_from_report(path: &Path) -> Result<(FitRow, usize)> {
    let r = read_report(path, "--fit")?;
    let mut row: FitRow = [None; BUCKETS];
    for (slot, b) in row.iter_mut().zip(&r.buckets) {
        // check_report: found + missed + no_idle = wakeups, no overflow
        let reach = b.found_within_depth + b.missed_idle;
        *slot = fit_bucket(reach, b.wakeups, b.depth_p95);
    }
    let n = row.iter().filter(|d| d.is_some()).count();
    Ok((row, n))
}

/// `--from-json`: the last report of a `--json` run, plotted as the run would have (the
/// features named in the title as this build spells the word, not as the file did).
fn plot_report(path: &Path, out: &crate::tools::plot::PlotOut) -> Result<u64> {
    let r = read_report(path, "--from-json")?;
    let words: Vec<&str> = r.features.split_whitespace().collect();
    let feat = features::apply(0, &words).context("--from-json: the report's features")?;
    let rules = DepthRules::of(feat);
    let w = r.llc_weights.iter().copied().max().unwrap_or(1);
    let named = features::to_words(feat).join(" ");
    plot(&r.buckets, w, r.imbalance_pct, rules, &named, out)
}

/// The policy curve: the loader's depth at `pct` % for an LLC of `weight` CPUs (SIS_UTIL's,
/// with SIS_SMALL_LLC when on; SIS_FIT's calibrated curve is what calibrate measures).
fn sis_util_depth(pct: u64, weight: u64, imbalance_pct: u64, rules: DepthRules) -> u64 {
    rules.depth(sum_util_for_pct(pct, weight), weight, imbalance_pct, None)
}

/// Per bucket, over every LLC.
pub fn buckets(
    recs: &[Rec],
    weights: &[u64],
    imbalance_pct: u64,
    rules: DepthRules,
) -> Vec<Bucket> {
    let nr_llcs = recs.len() / BUCKETS;
    let w = weights.iter().copied().max().unwrap_or(1).max(1);
    (0..BUCKETS)
        .map(|b| {
            let mut r = Rec::default();
            for l in 0..nr_llcs {
                r.add(&recs[l * BUCKETS + b]);
            }
            let lo = b as u64 * 10;
            Bucket {
                util_pct_lo: lo,
                util_pct_hi: lo + 10,
                wakeups: r.wakeups,
                mean_allowed_depth: if r.wakeups > 0 {
                    r.depth_sum as f64 / r.wakeups as f64
                } else {
                    0.0
                },
                found_within_depth: r.found,
                missed_idle: r.missed,
                wasted_scan: r.wasted,
                no_idle: r.no_idle,
                depth_p95: depth_p95(&r.hist),
                sis_util_depth: sis_util_depth(lo + 5, w, imbalance_pct, rules),
            }
        })
        .collect()
}

fn open_pinned(path: &str) -> Result<MapHandle> {
    // the directory first: a symlinked or foreign one is named, not reported as missing
    features::check_pin_dir()?;
    match Path::new(path).try_exists() {
        Ok(true) => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("calibrate needs root (the scheduler's maps are root-only)")
        }
        _ => bail!(
            "no running scx_sisutil with depth calibration found ({path} does not exist): start it with `sudo scx_sisutil`"
        ),
    }
    MapHandle::from_pinned_path(path).with_context(|| format!("cannot open {path}"))
}

fn ctl_read(ctl: &MapHandle, key: u32) -> u64 {
    crate::sched::bpf_maps::lookup_u64(ctl, key).unwrap_or(0)
}

fn renew_lease(ctl: &MapHandle) -> Result<()> {
    let until = crate::sched::clock::monotonic_ns() + LEASE_NS;
    ctl.update(
        &CTL_LEASE.to_ne_bytes(),
        &until.to_ne_bytes(),
        MapFlags::ANY,
    )
    .context("turning recording on (calib_ctl)")
}

pub fn calibrate_main(opts: &CalibrateOpts, shutdown: &AtomicBool) -> Result<()> {
    // a bad --plot fails now, not after the measuring
    let plot_out = opts
        .plot
        .as_deref()
        .map(crate::tools::plot::check_out)
        .transpose()?;
    if let (Some(json), Some(out)) = (&opts.from_json, &plot_out) {
        let n = plot_report(json, out)?;
        eprintln!("calibrate: wrote {} ({n} bytes)", out.path().display());
        return Ok(());
    }
    if unsafe { libc::geteuid() } != 0 {
        bail!("calibrate needs root (the scheduler's maps are root-only)");
    }
    features::check_running()?;
    let recs_map = open_pinned(RECS_PIN)?;
    let ctl = open_pinned(CTL_PIN)?;
    let nr_llcs = recs_map.max_entries() as usize / BUCKETS;
    if nr_llcs == 0 || recs_map.max_entries() as usize % BUCKETS != 0 {
        bail!(
            "{RECS_PIN} has {} entries: not this build's records",
            recs_map.max_entries()
        );
    }
    let pct = ctl_read(&ctl, CTL_PCT);
    let weights: Vec<u64> = (0..nr_llcs.min(MAX_LLCS))
        .map(|l| ctl_read(&ctl, CTL_WEIGHT + l as u32))
        .collect();

    renew_lease(&ctl)?;
    let first = read_records(&recs_map)?;
    let mut prev = first.clone();
    let mut last_feat = String::new();
    for _ in 0..opts.count {
        let end = Instant::now() + Duration::from_secs_f64(opts.interval);
        while Instant::now() < end {
            if shutdown.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            renew_lease(&ctl)?;
            std::thread::sleep(
                Duration::from_millis(200).min(end.saturating_duration_since(Instant::now())),
            );
        }
        renew_lease(&ctl)?;
        let cur = read_records(&recs_map)?;
        let delta: Vec<Rec> = cur.iter().zip(prev.iter()).map(|(c, p)| c.sub(p)).collect();
        prev = cur;
        let feat = features::read_live()?;
        let rules = DepthRules::of(feat);
        last_feat = features::to_words(feat).join(" ");
        let report = Report {
            interval_s: opts.interval,
            features: last_feat.clone(),
            llc_weights: weights.clone(),
            imbalance_pct: pct,
            buckets: buckets(&delta, &weights, pct, rules),
        };
        if opts.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print_table(&report);
        }
    }
    if let Some(out) = &plot_out {
        let total: Vec<Rec> = prev
            .iter()
            .zip(first.iter())
            .map(|(c, p)| c.sub(p))
            .collect();
        let feat = features::read_live()?;
        let rules = DepthRules::of(feat);
        let b = buckets(&total, &weights, pct, rules);
        let w = weights.iter().copied().max().unwrap_or(1);
        let n = plot(&b, w, pct, rules, &last_feat, out)?;
        eprintln!("calibrate: wrote {} ({n} bytes)", out.path().display());
    }
    Ok(())
}

fn print_table(r: &Report) {
    println!(
        "depth calibration over {:.1} s; LLC weights {:?}; {}",
        r.interval_s, r.llc_weights, r.features
    );
    println!(
        "{:>7} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "util%",
        "wakeups",
        "mean_depth",
        "found",
        "missed",
        "wasted",
        "no_idle",
        "depth_p95",
        "sis_util"
    );
    for b in &r.buckets {
        println!(
            "{:>3}-{:<3} {:>9} {:>12.2} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            b.util_pct_lo,
            b.util_pct_hi,
            b.wakeups,
            b.mean_allowed_depth,
            b.found_within_depth,
            b.missed_idle,
            b.wasted_scan,
            b.no_idle,
            b.depth_p95.map_or("-".to_string(), |d| d.to_string()),
            b.sis_util_depth
        );
    }
}

/// matplotlib script for crate::tools::plot::render (data, title, out defined there)
const PLOT_PY: &str = r#"
d = data
fig, ax = plt.subplots(figsize=(8.0, 5.0))
ax.plot([c[0] for c in d["curve"]], [c[1] for c in d["curve"]], "-", color="tab:blue",
        linewidth=2, label=d["curve_label"])
b = [x for x in d["buckets"] if x["wakeups"] > 0]
p95 = [x for x in b if x["depth_p95"] is not None]
ax.plot([x["util_pct_lo"] + 5 for x in p95], [x["depth_p95"] for x in p95], "-o",
        color="tab:red", markersize=4, label="measured depth_p95")
ax.plot([x["util_pct_lo"] + 5 for x in b], [x["mean_allowed_depth"] for x in b], "--o",
        color="tab:green", markersize=4, label="mean allowed depth")
ax.set_xlim(0, 100)
ax.set_ylim(bottom=0)
top = ax.get_ylim()[1]
ax.set_ylim(0, top * 1.12)
for x in d["buckets"]:
    ax.text(x["util_pct_lo"] + 5, top * 1.10, "n=%d" % x["wakeups"], ha="center", va="top",
            fontsize=7, color="dimgray")
ax.set_xticks(range(0, 101, 10))
ax.set_xlabel("LLC utilization % (buckets of 10 %; n = wake-ups in the bucket)")
ax.set_ylabel("depth (CPUs)")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=8, loc="lower left")
import textwrap
ax.set_title("\n".join(l for t in title.split("\n") for l in textwrap.wrap(t, 95)), fontsize=9)
fig.tight_layout()
fig.savefig(out, format="png", dpi=100)
"#;

/// `--plot`: depth (CPUs) against utilization: the utilization-based depth curve for an
/// LLC of `weight` (every 1 %), the measured depth_p95 and the mean depth the policy
/// allowed, per bucket (matplotlib, as `placement-cost --plot`).
fn plot(
    b: &[Bucket],
    weight: u64,
    imbalance_pct: u64,
    rules: DepthRules,
    features: &str,
    out: &crate::tools::plot::PlotOut,
) -> Result<u64> {
    let curve: Vec<(u64, u64)> = (0..=100u64)
        .map(|pct| (pct, sis_util_depth(pct, weight, imbalance_pct, rules)))
        .collect();
    let data = serde_json::json!({
        "curve": curve,
        "curve_label": format!("nr_idle_scan (imbalance_pct {imbalance_pct})"),
        "buckets": b,
    });
    let on: Vec<&str> = features
        .split_whitespace()
        .filter(|w| !w.starts_with("NO_"))
        .collect();
    let title = format!(
        "scx_sisutil calibrate: LLC of {weight} CPUs\non: {}",
        on.join(" ")
    );
    crate::tools::plot::render(PLOT_PY, &data, out, &title)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--plot` through matplotlib (python3-matplotlib, which tools/setup installs): a PNG
    /// from buckets with and without a depth_p95.
    #[test]
    fn plot_writes_a_png() {
        let mut recs = vec![Rec::default(); BUCKETS];
        recs[2].wakeups = 100;
        recs[2].hist[3] = 100;
        recs[8].wakeups = 50;
        recs[8].no_idle = 50;
        let b = buckets(&recs, &[8], 117, DepthRules::default());
        let dir = tempfile::tempdir().unwrap();
        let out = crate::tools::plot::check_out(&dir.path().join("calib.png")).unwrap();
        plot(
            &b,
            8,
            117,
            DepthRules::default(),
            "SIS_UTIL NO_SIS_PROP",
            &out,
        )
        .unwrap();
        let png = std::fs::read(out.path()).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(png.len() > 10_000, "{} bytes", png.len());
    }

    /// `shadow --fit`: a committed report gives SIS_FIT's row by the scheduler's rule
    /// (sis_fit::fit_bucket); a missing file, a symlink, a file that is not a report, a
    /// report with another bucket count or counts that do not add up are one error each.
    #[test]
    fn fit_from_a_report_and_bad_fit_files() {
        let dir = tempfile::tempdir().unwrap();
        let good = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/results/calibrate-2026-11-23/sis_util.json");
        let (row, n) = fit_from_report(&good).unwrap();
        let text = std::fs::read_to_string(&good).unwrap();
        let r: Report = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        for (b, d) in r.buckets.iter().zip(row) {
            let reach = b.wakeups - b.no_idle;
            let want = if reach >= crate::sched::sis_fit::FIT_MIN_SAMPLES {
                b.depth_p95
            } else if b.wakeups >= crate::sched::sis_fit::FIT_MIN_SAMPLES && reach * 20 < b.wakeups
            {
                Some(0)
            } else {
                None
            };
            assert_eq!(d, want, "{b:?}");
        }
        assert_eq!(n, row.iter().flatten().count());
        assert!(n > 0);
        let err = |p: &std::path::Path| format!("{:#}", fit_from_report(p).unwrap_err());
        assert!(err(&dir.path().join("none.json")).starts_with("--fit: reading"));
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(err(&link).starts_with("--fit: reading"), "{}", err(&link));
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"buckets\": 3}\n").unwrap();
        assert!(err(&bad).contains("is not a calibrate --json report"));
        let mut r2: Report = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        r2.buckets.pop();
        std::fs::write(&bad, serde_json::to_string(&r2).unwrap()).unwrap();
        assert!(err(&bad).contains("buckets, not 10"), "{}", err(&bad));
        let mut r3: Report = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        r3.buckets[0].no_idle += 1;
        std::fs::write(&bad, serde_json::to_string(&r3).unwrap()).unwrap();
        assert!(err(&bad).contains("is not its"), "{}", err(&bad));
        for e in [err(&bad), err(&link)] {
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    /// `--from-json`: the committed reports plot; a file that is not one is one error.
    #[test]
    fn plot_from_json_report() {
        let dir = tempfile::tempdir().unwrap();
        let json = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/results/calibrate-2026-11-23/sis_util.json");
        let out = crate::tools::plot::check_out(&dir.path().join("c.png")).unwrap();
        assert!(plot_report(&json, &out).unwrap() > 10_000);
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"buckets\": 1}\n").unwrap();
        let e = plot_report(&bad, &out).unwrap_err();
        assert!(
            format!("{e:#}").contains("not a calibrate --json report"),
            "{e:#}"
        );
        std::fs::write(&bad, "\n").unwrap();
        assert!(plot_report(&bad, &out).is_err());
    }

    /// The review's nonsense reports, each one error of one line (they plotted): an
    /// imbalance_pct of 0 or 2^64-1, an LLC of 0 CPUs, a negative interval, counts that add
    /// up only by overflow (found = missed = 2^63: the old check passed them), a depth
    /// beyond the LLC, a bucket out of place; and a FIFO or an oversized file refused at
    /// once (they blocked, or filled memory).
    #[test]
    // long: one table of bad reports, a case a line, and the loop that feeds each to the tool
    fn nonsense_reports_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let good = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/results/calibrate-2026-11-23/sis_util.json");
        let text = std::fs::read_to_string(&good).unwrap();
        let base = || -> Report { serde_json::from_str(text.lines().last().unwrap()).unwrap() };
        let bad = dir.path().join("bad.json");
        type Change = Box<dyn Fn(&mut Report)>;
        let cases: Vec<(&str, Change)> = vec![
            ("imbalance_pct 0 is not", Box::new(|r| r.imbalance_pct = 0)),
            (
                "imbalance_pct 18446744073709551615",
                Box::new(|r| r.imbalance_pct = u64::MAX),
            ),
            ("(one of 0 CPUs)", Box::new(|r| r.llc_weights = vec![0])),
            ("got 0 LLCs", Box::new(|r| r.llc_weights.clear())),
            ("interval_s -1 is not", Box::new(|r| r.interval_s = -1.0)),
            (
                "is not its 5 wake-ups",
                Box::new(|r| {
                    let b = &mut r.buckets[3];
                    (b.found_within_depth, b.missed_idle, b.no_idle, b.wakeups) =
                        (1 << 63, 1 << 63, 5, 5);
                }),
            ),
            (
                "beyond the LLC",
                Box::new(|r| r.buckets[4].depth_p95 = Some(1 << 40)),
            ),
            (
                "beyond the LLC",
                Box::new(|r| r.buckets[4].mean_allowed_depth = -1.0),
            ),
            (
                "bucket 2 covers 0-30 %",
                Box::new(|r| r.buckets[2].util_pct_lo = 0),
            ),
            (
                "unknown feature '?[2J'",
                Box::new(|r| r.features = "SIS_UTIL \u{1b}[2J".into()),
            ),
        ];
        let out = crate::tools::plot::check_out(&dir.path().join("c.png")).unwrap();
        for (want, f) in &cases {
            let mut r = base();
            f(&mut r);
            std::fs::write(&bad, serde_json::to_string(&r).unwrap()).unwrap();
            for e in [
                format!("{:#}", fit_from_report(&bad).unwrap_err()),
                format!("{:#}", plot_report(&bad, &out).unwrap_err()),
            ] {
                assert!(e.contains(want), "{want}: {e}");
                assert_eq!(e.lines().count(), 1, "{e}");
            }
        }
        assert!(!out.path().exists());
        // the base report itself passes (the cases fail for their change alone)
        std::fs::write(&bad, serde_json::to_string(&base()).unwrap()).unwrap();
        fit_from_report(&bad).unwrap();
        // a FIFO: refused at once (a blocking open waits for a writer forever)
        let fifo = dir.path().join("fifo.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) of a NUL-terminated path
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let f2 = fifo.clone();
        std::thread::spawn(move || tx.send(format!("{:#}", fit_from_report(&f2).unwrap_err())));
        // 5 s: the open either returns at once or never; a loaded host stays far below
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("--fit on a FIFO still blocked after 5 s");
        assert!(e.contains("not a regular file"), "{e}");
        // a sparse 65 MiB file: refused by its size, not read
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(crate::tools::safe_io::MAX_INPUT + 1)
            .unwrap();
        let t = std::time::Instant::now();
        let e = format!("{:#}", plot_report(&big, &out).unwrap_err());
        assert!(e.contains("more than the 64 MiB"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }
}
