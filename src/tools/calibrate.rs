// SPDX-License-Identifier: GPL-2.0-only
//! `scx_sisutil calibrate`: how far must a wake-up's LLC scan walk to find an idle CPU,
//! and how far did the policy let it? SIS_UTIL ("sched/fair: Introduce SIS_UTIL to search
//! idle CPU based on sum of util_avg") estimates that depth from the LLC's utilization sum
//! for want of "a crystal ball"; the scheduler records the real distance (src/bpf/calib.bpf.h)
//! per LLC and 10 % utilization bucket while this command runs, and this reports and plots it
//! against SIS_UTIL's curve. Also the loader's side: sizing, pinning, the lease that turns
//! recording on, and SIS_FIT's fitted depth.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::bpf_intf as bi;
use crate::bpf_skel::BpfSkel;
use crate::features;
use crate::loader::MappedWords;
use crate::sis_util_depth::{scan_depth, sum_util_for_pct, SCHED_CAPACITY_SCALE};

pub const BUCKETS: usize = bi::calib_consts_CALIB_BUCKETS as usize;
const EXACT: usize = bi::calib_consts_CALIB_EXACT as usize;
const HIST: usize = bi::calib_consts_CALIB_HIST as usize;
const MAX_LLCS: usize = bi::sis_consts_MAX_LLCS as usize;
const CTL_LEASE: u32 = bi::calib_consts_CALIB_CTL_LEASE;
const CTL_PCT: u32 = bi::calib_consts_CALIB_CTL_IMBALANCE_PCT;
const CTL_WEIGHT: u32 = bi::calib_consts_CALIB_CTL_WEIGHT;
/// Words of calib_ctl (the lease, imbalance_pct, each LLC's weight).
pub const CTL_WORDS: usize = bi::calib_consts_CALIB_CTL_NR as usize;
/// u64 fields of struct calib_rec before hist[]
const REC_HEAD: usize = 7;
const REC_WORDS: usize = REC_HEAD + HIST;

pub const RECS_PIN: &str = "/sys/fs/bpf/scx_sisutil/calib_recs";
pub const CTL_PIN: &str = "/sys/fs/bpf/scx_sisutil/calib_ctl";
/// How long one request keeps recording on: a few seconds after calibrate's last read.
const LEASE_NS: u64 = 3_000_000_000;
/// SIS_FIT uses a bucket's depth_p95 from this many wake-ups that had an idle CPU.
pub const FIT_MIN_SAMPLES: u64 = 50;

/// One struct calib_rec, summed over CPUs (and LLCs when aggregated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub wakeups: u64,
    pub depth_sum: u64,
    pub found: u64,
    pub missed: u64,
    pub wasted: u64,
    pub no_idle: u64,
    pub skipped: u64,
    pub hist: [u64; HIST],
}

impl Default for Rec {
    fn default() -> Self {
        Rec {
            wakeups: 0,
            depth_sum: 0,
            found: 0,
            missed: 0,
            wasted: 0,
            no_idle: 0,
            skipped: 0,
            hist: [0; HIST],
        }
    }
}

impl Rec {
    fn from_words(w: &[u64]) -> Rec {
        let mut r = Rec {
            wakeups: w[0],
            depth_sum: w[1],
            found: w[2],
            missed: w[3],
            wasted: w[4],
            no_idle: w[5],
            skipped: w[6],
            ..Default::default()
        };
        r.hist.copy_from_slice(&w[REC_HEAD..REC_WORDS]);
        r
    }

    fn add(&mut self, o: &Rec) {
        self.wakeups += o.wakeups;
        self.depth_sum += o.depth_sum;
        self.found += o.found;
        self.missed += o.missed;
        self.wasted += o.wasted;
        self.no_idle += o.no_idle;
        self.skipped += o.skipped;
        for (a, b) in self.hist.iter_mut().zip(o.hist.iter()) {
            *a += b;
        }
    }

    fn sub(&self, o: &Rec) -> Rec {
        let mut r = Rec {
            wakeups: self.wakeups.saturating_sub(o.wakeups),
            depth_sum: self.depth_sum.saturating_sub(o.depth_sum),
            found: self.found.saturating_sub(o.found),
            missed: self.missed.saturating_sub(o.missed),
            wasted: self.wasted.saturating_sub(o.wasted),
            no_idle: self.no_idle.saturating_sub(o.no_idle),
            skipped: self.skipped.saturating_sub(o.skipped),
            ..Default::default()
        };
        for i in 0..HIST {
            r.hist[i] = self.hist[i].saturating_sub(o.hist[i]);
        }
        r
    }

    /// Wake-ups whose LLC had an idle allowed CPU (the ones a depth decides).
    pub fn reachable(&self) -> u64 {
        self.hist.iter().sum()
    }
}

/// The largest distance histogram bin `b` stands for.
pub fn bin_top(b: usize) -> u64 {
    if b < EXACT {
        b as u64
    } else {
        ((EXACT as u64) << (b - EXACT + 1)) - 1
    }
}

/// The smallest depth that finds an idle CPU for 95 % of the wake-ups that had one (exact
/// below CALIB_EXACT, the top of the octave bin above). None without such wake-ups.
pub fn depth_p95(hist: &[u64; HIST]) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let mut cum = 0u64;
    for (b, n) in hist.iter().enumerate() {
        cum += n;
        // cum / total >= 0.95, in integers
        if cum * 100 >= total * 95 {
            return Some(bin_top(b));
        }
    }
    Some(bin_top(HIST - 1))
}

/// Records of every LLC (index llc * BUCKETS + bucket), summed over CPUs.
fn read_records<M: MapCore>(map: &M) -> Result<Vec<Rec>> {
    let n = map.max_entries();
    let mut out = Vec::with_capacity(n as usize);
    for key in 0..n {
        let vals = map
            .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
            .context("reading the calibration records")?
            .unwrap_or_default();
        let mut sum = Rec::default();
        for v in vals {
            let words: Vec<u64> = v
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
                .collect();
            if words.len() < REC_WORDS {
                bail!(
                    "{RECS_PIN}: a record of {} bytes, expected {}",
                    v.len(),
                    REC_WORDS * 8
                );
            }
            sum.add(&Rec::from_words(&words));
        }
        out.push(sum);
    }
    Ok(out)
}

// ---- the loader's side ----

/// Before load: one record per LLC and bucket, no more (the map is per CPU).
pub fn size_records(skel: &mut crate::bpf_skel::OpenBpfSkel<'_>, nr_llcs: usize) -> Result<()> {
    skel.maps
        .calib_recs
        .set_max_entries((nr_llcs.max(1) * BUCKETS) as u32)
        .context("sizing the calibration records")
}

/// After load: each LLC's span for the distance, and what calibrate needs to draw the policy.
pub fn init_loader(skel: &mut BpfSkel<'_>, llcs: &[Vec<usize>], imbalance_pct: u64) -> Result<()> {
    let bss = skel.maps.bss_data.as_mut().context("no bss")?;
    for (l, cpus) in llcs.iter().enumerate().take(MAX_LLCS) {
        for &c in cpus {
            bss.calib_span[l][c / 64] |= 1u64 << (c % 64);
        }
    }
    let ctl = &skel.maps.calib_ctl;
    ctl.update(
        &CTL_PCT.to_ne_bytes(),
        &imbalance_pct.to_ne_bytes(),
        MapFlags::ANY,
    )?;
    for (l, cpus) in llcs.iter().enumerate().take(MAX_LLCS) {
        let key = CTL_WEIGHT + l as u32;
        ctl.update(
            &key.to_ne_bytes(),
            &(cpus.len() as u64).to_ne_bytes(),
            MapFlags::ANY,
        )?;
    }
    Ok(())
}

pub fn pin(skel: &mut BpfSkel<'_>) -> Result<()> {
    for (map, path) in [
        (&mut skel.maps.calib_recs, RECS_PIN),
        (&mut skel.maps.calib_ctl, CTL_PIN),
    ] {
        let _ = std::fs::remove_file(path);
        map.pin(path).with_context(|| format!("pinning {path}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

pub fn unpin(skel: &mut BpfSkel<'_>) {
    for (map, path) in [
        (&mut skel.maps.calib_recs, RECS_PIN),
        (&mut skel.maps.calib_ctl, CTL_PIN),
    ] {
        if map.is_pinned() {
            let _ = map.unpin(path);
        }
    }
}

/// Does calibrate still want records (its lease, CLOCK_MONOTONIC ns, not expired)? Read
/// through the map's mmap when there is one, else with one bpf() lookup.
pub fn lease_held(skel: &BpfSkel<'_>, mapped: Option<&MappedWords>, now: u64) -> bool {
    let until = match mapped {
        Some(m) => Some(m.read(CTL_LEASE as usize)),
        None => crate::loader::lookup_u64(&skel.maps.calib_ctl, CTL_LEASE),
    };
    until.is_some_and(|until| until > now)
}

/// Is SIS_FIT on in the feature word `feat` (the loader then writes the fitted depths)?
pub fn fit_on(feat: u64) -> bool {
    feat & bi::sis_feature_FEAT_SIS_FIT as u64 != 0
}

/// SIS_FIT's table: per LLC, each bucket's depth_p95 once it has FIT_MIN_SAMPLES wake-ups
/// with an idle CPU; 0 for a bucket whose wake-ups (FIT_MIN_SAMPLES or more) almost never
/// had one (under 5 %): there is nothing to find.
pub fn fit_from_records(skel: &BpfSkel<'_>, nr_llcs: usize) -> Vec<[Option<u64>; BUCKETS]> {
    let recs = read_records(&skel.maps.calib_recs).unwrap_or_default();
    fit_table(&recs, nr_llcs)
}

pub fn fit_table(recs: &[Rec], nr_llcs: usize) -> Vec<[Option<u64>; BUCKETS]> {
    (0..nr_llcs)
        .map(|l| {
            let mut row = [None; BUCKETS];
            for (b, slot) in row.iter_mut().enumerate() {
                let Some(r) = recs.get(l * BUCKETS + b) else {
                    continue;
                };
                let reach = r.reachable();
                *slot = if reach >= FIT_MIN_SAMPLES {
                    depth_p95(&r.hist)
                } else if r.wakeups >= FIT_MIN_SAMPLES && reach * 20 < r.wakeups {
                    Some(0)
                } else {
                    None
                };
            }
            row
        })
        .collect()
}

/// The LLC's SIS_FIT depth at its current util sum (the bucket calib.bpf.h records it in),
/// capped at its weight; None (SIS_UTIL's depth stays) while the bucket has too few samples.
pub fn fit_depth(fit: Option<&[Option<u64>; BUCKETS]>, util_sum: u64, weight: u64) -> Option<u64> {
    if weight == 0 {
        return None;
    }
    let b = ((util_sum * 10 / (weight * SCHED_CAPACITY_SCALE)) as usize).min(BUCKETS - 1);
    fit?[b].map(|d| d.min(weight))
}

// ---- the command ----

#[derive(clap::Args, Debug, Clone)]
pub struct CalibrateOpts {
    /// Seconds of recording per report
    #[arg(long, default_value_t = 5.0, value_parser = crate::stats::parse_interval)]
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
}

#[derive(serde::Serialize, Debug, Clone, PartialEq)]
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

#[derive(serde::Serialize, Debug)]
struct Report {
    interval_s: f64,
    features: String,
    llc_weights: Vec<u64>,
    buckets: Vec<Bucket>,
}

/// The policy curve: SIS_UTIL's depth at `pct` % for an LLC of `weight` CPUs.
fn sis_util_depth(pct: u64, weight: u64, imbalance_pct: u64, small_llc: bool) -> u64 {
    scan_depth(
        sum_util_for_pct(pct, weight),
        weight,
        imbalance_pct,
        small_llc,
    )
}

/// Per bucket, over every LLC.
pub fn buckets(recs: &[Rec], weights: &[u64], imbalance_pct: u64, small_llc: bool) -> Vec<Bucket> {
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
                sis_util_depth: sis_util_depth(lo + 5, w, imbalance_pct, small_llc),
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
    crate::loader::lookup_u64(ctl, key).unwrap_or(0)
}

fn renew_lease(ctl: &MapHandle) -> Result<()> {
    let until = crate::loader::monotonic_ns() + LEASE_NS;
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
        .map(crate::plot::check_out)
        .transpose()?;
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
        let small = crate::sis_util_depth::small_llc_on(feat);
        last_feat = features::to_words(feat).join(" ");
        let report = Report {
            interval_s: opts.interval,
            features: last_feat.clone(),
            llc_weights: weights.clone(),
            buckets: buckets(&delta, &weights, pct, small),
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
        let small = crate::sis_util_depth::small_llc_on(feat);
        let b = buckets(&total, &weights, pct, small);
        let w = weights.iter().copied().max().unwrap_or(1);
        let n = plot(&b, w, pct, small, &last_feat, out)?;
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

/// matplotlib script for crate::plot::render (data, title, out defined there)
const PLOT_PY: &str = r#"
d = data
fig, ax = plt.subplots(figsize=(7.2, 4.6))
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
ax.set_xlabel("LLC utilization %")
ax.set_ylabel("depth (CPUs)")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=8)
ax.set_title(title, fontsize=8)
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
    small_llc: bool,
    features: &str,
    out: &crate::plot::PlotOut,
) -> Result<u64> {
    let curve: Vec<(u64, u64)> = (0..=100u64)
        .map(|pct| (pct, sis_util_depth(pct, weight, imbalance_pct, small_llc)))
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
        "scx_sisutil calibrate: LLC of {weight} CPUs; on: {}",
        on.join(" ")
    );
    crate::plot::render(PLOT_PY, &data, out, &title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_and_bins() {
        let mut h = [0u64; HIST];
        assert_eq!(depth_p95(&h), None);
        h[1] = 90;
        h[3] = 5;
        h[10] = 5;
        assert_eq!(depth_p95(&h), Some(3));
        h[1] = 94;
        assert_eq!(depth_p95(&h), Some(3)); // 99/104 >= 95 %
        let mut h = [0u64; HIST];
        h[2] = 1;
        h[EXACT] = 99; // 64..127
        assert_eq!(depth_p95(&h), Some(127));
        assert_eq!(bin_top(EXACT + 3), 1023);
    }

    #[test]
    fn fit_needs_samples_and_caps_at_weight() {
        let mut recs = vec![Rec::default(); 2 * BUCKETS];
        recs[3].hist[5] = FIT_MIN_SAMPLES;
        recs[3].wakeups = FIT_MIN_SAMPLES;
        recs[4].hist[5] = FIT_MIN_SAMPLES - 1;
        recs[4].wakeups = 1000;
        recs[BUCKETS + 9].wakeups = 10;
        let t = fit_table(&recs, 2);
        assert_eq!(t[0][3], Some(5));
        assert_eq!(t[0][4], Some(0)); // 49 of 1000 had an idle CPU
        assert_eq!(t[1][9], None);
        // 35 % of an 8-CPU LLC is bucket 3
        assert_eq!(fit_depth(t.first(), 35 * 8 * 1024 / 100, 8), Some(5));
        assert_eq!(fit_depth(t.first(), 35 * 4 * 1024 / 100, 4), Some(4));
        assert_eq!(fit_depth(t.get(1), 0, 8), None);
    }

    /// `--plot` through matplotlib (python3-matplotlib, which tools/setup installs): a PNG
    /// from buckets with and without a depth_p95.
    #[test]
    fn plot_writes_a_png() {
        let mut recs = vec![Rec::default(); BUCKETS];
        recs[2].wakeups = 100;
        recs[2].hist[3] = 100;
        recs[8].wakeups = 50;
        recs[8].no_idle = 50;
        let b = buckets(&recs, &[8], 117, false);
        let dir = tempfile::tempdir().unwrap();
        let out = crate::plot::check_out(&dir.path().join("calib.png")).unwrap();
        plot(&b, 8, 117, false, "SIS_UTIL NO_SIS_PROP", &out).unwrap();
        let png = std::fs::read(out.path()).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(png.len() > 10_000, "{} bytes", png.len());
    }
}
