// SPDX-License-Identifier: GPL-2.0-only
//! SIS_FIT and the calibration records it fits from: the scheduler records the real
//! distance a wake-up's LLC scan walked to find an idle CPU (src/bpf/calib.bpf.h) per LLC
//! and 10 % utilization bucket; this is the loader's side of it (sizing, pinning, the lease
//! that turns recording on for `calibrate`) and SIS_FIT's fitted depth per bucket. The
//! `calibrate` command (src/tools/calibrate.rs) reads the same records.

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf_intf as bi;
use crate::bpf_skel::BpfSkel;
use crate::sched::bpf_maps::MappedWords;
use crate::sched::stats::add_fields;

pub const BUCKETS: usize = bi::calib_consts_CALIB_BUCKETS as usize;
pub const EXACT: usize = bi::calib_consts_CALIB_EXACT as usize;
pub const HIST: usize = bi::calib_consts_CALIB_HIST as usize;
pub const MAX_LLCS: usize = bi::sis_consts_MAX_LLCS as usize;
pub const CTL_LEASE: u32 = bi::calib_consts_CALIB_CTL_LEASE;
pub const CTL_PCT: u32 = bi::calib_consts_CALIB_CTL_IMBALANCE_PCT;
pub const CTL_WEIGHT: u32 = bi::calib_consts_CALIB_CTL_WEIGHT;
/// Words of calib_ctl (the lease, imbalance_pct, each LLC's weight).
pub const CTL_WORDS: usize = bi::calib_consts_CALIB_CTL_NR as usize;

/// calibrate's records and control words, pinned beside the feature word.
pub const RECS_PIN: &str = concat!(crate::sched::features::pin_dir!(), "/calib_recs");
pub const CTL_PIN: &str = concat!(crate::sched::features::pin_dir!(), "/calib_ctl");
/// How long one request keeps recording on: a few seconds after calibrate's last read.
pub const LEASE_NS: u64 = 3_000_000_000;
/// SIS_FIT uses a bucket's depth_p95 from this many wake-ups that had an idle CPU.
pub const FIT_MIN_SAMPLES: u64 = 50;

/// One struct calib_rec (intf.h, through bindgen), summed over CPUs (and LLCs when
/// aggregated).
pub type Rec = bi::calib_rec;

/// SIS_FIT's depth per utilization bucket of one LLC (None: SIS_UTIL's depth stays).
pub type FitRow = [Option<u64>; BUCKETS];

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

impl PartialEq for Rec {
    fn eq(&self, o: &Rec) -> bool {
        (self.wakeups, self.depth_sum, self.found, self.missed)
            == (o.wakeups, o.depth_sum, o.found, o.missed)
            && (self.wasted, self.no_idle, self.skipped) == (o.wasted, o.no_idle, o.skipped)
            && self.hist == o.hist
    }
}

impl Eq for Rec {}

impl Rec {
    pub fn add(&mut self, o: &Rec) {
        add_fields!(self, o; wakeups, depth_sum, found, missed, wasted, no_idle, skipped);
        for (a, b) in self.hist.iter_mut().zip(o.hist.iter()) {
            *a += b;
        }
    }

    pub fn sub(&self, o: &Rec) -> Rec {
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
pub fn read_records<M: MapCore>(map: &M) -> Result<Vec<Rec>> {
    let n = map.max_entries();
    let mut out = Vec::with_capacity(n as usize);
    for key in 0..n {
        let mut sum = Rec::default();
        for r in crate::sched::bpf_maps::lookup_percpu_as::<Rec, _>(map, key, RECS_PIN)? {
            sum.add(&r);
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
        None => crate::sched::bpf_maps::lookup_u64(&skel.maps.calib_ctl, CTL_LEASE),
    };
    until.is_some_and(|until| until > now)
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
                *slot = fit_bucket(r.reachable(), r.wakeups, depth_p95(&r.hist));
            }
            row
        })
        .collect()
}

/// One bucket's SIS_FIT depth from its `wakeups`, the `reach` of them that had an idle CPU
/// and their depth_p95: that depth from FIT_MIN_SAMPLES such wake-ups on, 0 when
/// FIT_MIN_SAMPLES or more wake-ups almost never (under 5 %) had one, else None (too few
/// samples: SIS_UTIL's depth stays).
pub fn fit_bucket(reach: u64, wakeups: u64, p95: Option<u64>) -> Option<u64> {
    if reach >= FIT_MIN_SAMPLES {
        p95
    } else if wakeups >= FIT_MIN_SAMPLES && reach * 20 < wakeups {
        Some(0)
    } else {
        None
    }
}

/// The LLC's SIS_FIT depth at its current util sum (the bucket calib.bpf.h records it in),
/// capped at its weight; None (SIS_UTIL's depth stays) while the bucket has too few samples.
pub fn fit_depth(fit: Option<&[Option<u64>; BUCKETS]>, util_sum: u64, weight: u64) -> Option<u64> {
    if weight == 0 {
        return None;
    }
    fit?[util_bucket(util_sum, weight)].map(|d| d.min(weight))
}

/// The 10 % utilization bucket of an LLC of `weight` CPUs at `util_sum` (calib.bpf.h's:
/// util_sum * 10 / (weight * 1024), the last one holding 90 % and over); 0 for no CPUs.
pub fn util_bucket(util_sum: u64, weight: u64) -> usize {
    if weight == 0 {
        return 0;
    }
    ((util_sum * 10 / (weight * bi::sis_consts_SCHED_CAPACITY as u64)) as usize).min(BUCKETS - 1)
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

    /// The record Rust reads is intf.h's: its size and the histogram's place.
    #[test]
    fn rec_is_intf_h_calib_rec() {
        assert_eq!(std::mem::size_of::<Rec>(), (7 + HIST) * 8);
        assert_eq!(std::mem::offset_of!(Rec, hist), 7 * 8);
        let mut b = vec![0u8; std::mem::size_of::<Rec>()];
        b[8..16].copy_from_slice(&5u64.to_ne_bytes());
        b[7 * 8..8 * 8].copy_from_slice(&9u64.to_ne_bytes());
        let r = crate::sched::bpf_maps::value_as::<Rec>(&b).unwrap();
        assert_eq!((r.wakeups, r.depth_sum, r.hist[0]), (0, 5, 9));
        assert!(crate::sched::bpf_maps::value_as::<Rec>(&b[8..]).is_none());
    }
}
