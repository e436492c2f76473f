// SPDX-License-Identifier: GPL-2.0-only
//! Open, load and attach the BPF scheduler; the run loop (util/depth updates,
//! stats requests); detach and clean up on Drop.

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{debug, info, warn};
use scx_stats::prelude::*;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bpf_skel::*;
use crate::features;
use crate::stats::{Counters, Metrics, NR_STATS};
use crate::topology::{copy_same_c_type, TopoDesc};
use crate::util::{scan_depth, UtilFilter};
use crate::RunOpts;

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    stats_server: StatsServer<(), Metrics>,
    /// per LLC: its CPUs
    llcs: Vec<Vec<usize>>,
    util: UtilUpdate,
    /// sis_features through its mmap: no bpf() call per interval
    feat_word: Option<FeatureWord>,
    interval: Duration,
    /// SIS_FIT: per LLC, the fitted depth of each utilization bucket (None: too few samples)
    fit: Vec<[Option<u64>; crate::calibrate::BUCKETS]>,
    last_fit: Option<Instant>,
}

/// The feature word of a `sis_features` map (BPF_F_MMAPABLE), read through a shared
/// read-only mapping: `scx_sisutil features` writes it with bpf(), the reader sees it.
pub struct FeatureWord {
    ptr: *mut libc::c_void,
    len: usize,
}

impl FeatureWord {
    pub fn map<M: AsFd>(map: &M) -> Result<Self> {
        let len = 4096usize.max(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize);
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            anyhow::bail!(
                "mapping the feature word: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(FeatureWord { ptr, len })
    }

    pub fn read(&self) -> u64 {
        // SAFETY: a live, page-aligned mapping of the array's one u64 value
        unsafe { std::ptr::read_volatile(self.ptr as *const u64) }
    }
}

impl Drop for FeatureWord {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A .bss array of an intf.h type, as that type: every skeleton generates its own copy of
/// the structs, with the same size.
pub fn intf_slice<T, U>(s: &mut [T]) -> &mut [U] {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>());
    // the skeleton's copy drops intf.h's aligned(64); the variable itself is aligned
    assert_eq!(s.as_ptr() as usize % std::mem::align_of::<U>(), 0);
    // SAFETY: same size, aligned; both are plain-integer repr(C) structs of intf.h
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut U, s.len()) }
}

/// The loader's per-interval work: one util sample per CPU, the per-LLC sum, SIS_UTIL's
/// depth (update_idle_cpu_scan, done here because sched_ext tasks are not in the fair
/// class's load balance), written to the BPF side's cpu_ctxs and llc_ctxs.
pub struct UtilUpdate {
    /// per LLC: its CPUs
    llcs: Vec<Vec<usize>>,
    filters: Vec<UtilFilter>,
    prev_idle: Vec<u64>,
    prev_sample: u64,
    imbalance_pct: u64,
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns().
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl<'a> Scheduler<'a> {
    pub fn init(
        opts: &RunOpts,
        feat: u64,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        // refuse a pin directory that is not ours before anything is attached
        features::check_pin_dir()?;
        let topo = scx_utils::Topology::new().context("reading the CPU topology")?;
        let desc = TopoDesc::from_scx(&topo);
        let llcs = desc.llcs();
        let sis_topo = desc.build()?;
        info!(
            "topology: {} CPUs, {} LLCs ({}), SMT {}",
            desc.cpus.len(),
            llcs.len(),
            llcs.iter()
                .map(|l| l.len().to_string())
                .collect::<Vec<_>>()
                .join("+"),
            if sis_topo.smt != 0 { "on" } else { "off" }
        );

        info!("scx_sisutil {}", crate::full_version());
        let mut builder = BpfSkelBuilder::default();
        builder.obj_builder.debug(opts.verbose > 1);
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            sisutil_ops,
            opts.libbpf.clone().into_bpf_open_opts()
        )?;
        skel.struct_ops.sisutil_ops_mut().exit_dump_len = opts.exit_dump_len;
        skel.struct_ops.sisutil_ops_mut().flags = *scx_utils::compat::SCX_OPS_KEEP_BUILTIN_IDLE
            | *scx_utils::compat::SCX_OPS_ENQ_MIGRATION_DISABLED;

        let rodata = skel.maps.rodata_data.as_mut().context("no rodata")?;
        unsafe { copy_same_c_type(&*sis_topo, &mut rodata.topo) };
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.imbalance_pct = opts.imbalance_pct;
        crate::calibrate::size_records(&mut skel, llcs.len())?;

        let mut skel = scx_ops_load!(skel, sisutil_ops, uei)?;
        info!("verifier: {}", verified_insns(&skel));

        skel.maps
            .sis_features
            .update(&0u32.to_ne_bytes(), &feat.to_ne_bytes(), MapFlags::ANY)
            .context("setting the feature word")?;
        {
            let bss = skel.maps.bss_data.as_mut().context("no bss")?;
            for (l, cpus) in llcs.iter().enumerate() {
                bss.llc_ctxs[l].weight = cpus.len() as u64;
                // an idle LLC scans all of it until the first measurement
                bss.llc_ctxs[l].nr_idle_scan = cpus.len() as u64;
            }
        }
        crate::calibrate::init_loader(&mut skel, &llcs, opts.imbalance_pct)?;

        let struct_ops = Some(scx_ops_attach!(skel, sisutil_ops)?);
        // Pinned only once attached, so that `features` never finds a map that no running
        // scheduler reads; a failure from here on unpins in Drop.
        let mut sched = Self {
            skel,
            struct_ops,
            stats_server: StatsServer::new(crate::stats::server_data()),
            llcs: vec![],
            util: UtilUpdate::new(vec![], 0, opts.imbalance_pct),
            feat_word: None,
            interval: Duration::from_millis(opts.interval_ms),
            fit: vec![],
            last_fit: None,
        };
        pin_features(&mut sched.skel)?;
        crate::calibrate::pin(&mut sched.skel)?;
        sched.stats_server = StatsServer::new(crate::stats::server_data()).launch()?;
        // statistics are root-only, like the feature map
        let sock = std::path::Path::new("/var/run/scx/root/stats");
        if let Err(e) = std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o600)) {
            warn!("cannot restrict {sock:?}: {e}");
        }
        info!(
            "scx_sisutil attached; features: {}",
            features::to_words(feat).join(" ")
        );

        sched.util = UtilUpdate::new(llcs.clone(), desc.nr_cpu_ids(), opts.imbalance_pct);
        sched.llcs = llcs;
        sched.feat_word = match FeatureWord::map(&sched.skel.maps.sis_features) {
            Ok(f) => Some(f),
            Err(e) => {
                warn!("{e:#}: reading it with bpf() each interval");
                None
            }
        };
        Ok(sched)
    }

    fn features(&self) -> u64 {
        if let Some(f) = &self.feat_word {
            return f.read();
        }
        self.skel
            .maps
            .sis_features
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or_default()))
            .unwrap_or(0)
    }

    /// One interval of the loader's work (UtilUpdate), on the scheduler's .bss.
    fn update_util(&mut self) {
        let feat = self.features();
        let now = monotonic_ns();
        let sis_fit = self.update_calib(feat, now);
        let Some(bss) = self.skel.maps.bss_data.as_mut() else {
            return;
        };
        self.util.update(
            feat,
            now,
            intf_slice(&mut bss.cpu_ctxs),
            intf_slice(&mut bss.llc_ctxs),
            sis_fit.then_some(&self.fit[..]),
        );
    }

    /// Depth calibration: recording on while `calibrate` holds its lease or SIS_FIT is on;
    /// with SIS_FIT, the per-LLC fit from the records, refreshed each second. Returns
    /// whether SIS_FIT's depths apply.
    fn update_calib(&mut self, feat: u64, now: u64) -> bool {
        let sis_fit = feat & crate::bpf_intf::sis_feature_FEAT_SIS_FIT as u64 != 0;
        let on = sis_fit || crate::calibrate::lease_held(&self.skel, now);
        if let Some(bss) = self.skel.maps.bss_data.as_mut() {
            if (bss.calib_on != 0) != on {
                unsafe { std::ptr::write_volatile(&mut bss.calib_on, on as u64) };
            }
        }
        if !sis_fit {
            self.last_fit = None;
            return false;
        }
        if self
            .last_fit
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.fit = crate::calibrate::fit_from_records(&self.skel, self.llcs.len());
            self.last_fit = Some(Instant::now());
        }
        true
    }

    fn read_metrics(&self) -> Metrics {
        let mut per_llc = vec![];
        let bss = self.skel.maps.bss_data.as_ref();
        for (l, cpus) in self.llcs.iter().enumerate() {
            let mut c: Counters = [0; NR_STATS];
            if let Ok(Some(vals)) = self
                .skel
                .maps
                .sis_stats
                .lookup_percpu(&(l as u32).to_ne_bytes(), MapFlags::ANY)
            {
                for v in vals {
                    for (i, chunk) in v.chunks_exact(8).take(NR_STATS).enumerate() {
                        c[i] += u64::from_ne_bytes(chunk.try_into().unwrap_or_default());
                    }
                }
            }
            let (util_sum, depth) = bss.map_or((0, 0), |b| {
                (b.llc_ctxs[l].util_sum, b.llc_ctxs[l].nr_idle_scan)
            });
            per_llc.push((c, cpus.len() as u64, util_sum, depth));
        }
        let mut m = Metrics::new(features::to_words(self.features()).join(" "), &per_llc);
        self.read_wait(&mut m);
        m
    }

    /// Sum the per-CPU wait histograms (vtime.bpf.h: struct wait_hist).
    fn read_wait(&self, m: &mut Metrics) {
        let nb = crate::latency::NR_BUCKETS;
        let (mut hist, mut count, mut sum) = (vec![0u64; nb], 0u64, 0u64);
        if let Ok(Some(vals)) = self
            .skel
            .maps
            .wait_hists
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        {
            for v in vals {
                let w: Vec<u64> = v
                    .chunks_exact(8)
                    .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
                    .collect();
                if w.len() < nb + 2 {
                    continue;
                }
                for (h, c) in hist.iter_mut().zip(&w[..nb]) {
                    *h += c;
                }
                count += w[nb];
                sum += w[nb + 1];
            }
        }
        m.set_wait(hist, count, sum);
    }

    fn exited(&mut self) -> bool {
        uei_exited!(&self.skel, uei)
    }

    pub fn run(&mut self, shutdown: Arc<AtomicBool>) -> Result<UserExitInfo> {
        let (res_ch, req_ch) = self.stats_server.channels();
        let mut next = Instant::now();
        while !shutdown.load(Ordering::Relaxed) && !self.exited() {
            if Instant::now() >= next {
                self.update_util();
                next += self.interval;
                if next < Instant::now() {
                    next = Instant::now() + self.interval;
                }
            }
            let wait = next.saturating_duration_since(Instant::now());
            match req_ch.recv_timeout(wait) {
                Ok(()) => res_ch.send(self.read_metrics())?,
                Err(crossbeam::channel::RecvTimeoutError::Timeout) => {}
                Err(e) => Err(e)?,
            }
        }
        let _ = self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }
}

impl UtilUpdate {
    pub fn new(llcs: Vec<Vec<usize>>, nr_cpu_ids: usize, imbalance_pct: u64) -> Self {
        UtilUpdate {
            llcs,
            filters: vec![UtilFilter::default(); nr_cpu_ids],
            prev_idle: vec![0; nr_cpu_ids],
            prev_sample: 0,
            imbalance_pct,
        }
    }

    /// One sample at `now` (CLOCK_MONOTONIC ns, the clock of bpf_ktime_get_ns()); with
    /// `fit` (SIS_FIT), each LLC's depth comes from its calibrated curve where it has one.
    pub fn update(
        &mut self,
        feat: u64,
        now: u64,
        cpu_ctxs: &mut [crate::bpf_intf::cpu_ctx],
        llc_ctxs: &mut [crate::bpf_intf::llc_ctx],
        fit: Option<&[[Option<u64>; crate::calibrate::BUCKETS]]>,
    ) {
        let small_llc = feat & crate::bpf_intf::sis_feature_FEAT_SIS_SMALL_LLC as u64 != 0;
        let skip_same = feat & crate::bpf_intf::sis_feature_FEAT_KICK_SKIP_REDUNDANT as u64 != 0;
        let period = now.saturating_sub(self.prev_sample);
        let first = self.prev_sample == 0;
        self.prev_sample = now;

        for (l, cpus) in self.llcs.iter().enumerate() {
            let mut sum = 0u64;
            for &cpu in cpus {
                let cc = &mut cpu_ctxs[cpu];
                // idle_start first: an idle period that ends in between is then counted once
                let start = unsafe { std::ptr::read_volatile(&cc.idle_start) };
                let idle_ns = unsafe { std::ptr::read_volatile(&cc.idle_ns) };
                let open = if start != 0 && now > start {
                    now - start
                } else {
                    0
                };
                let idle_total = idle_ns + open;
                let d_idle = idle_total.saturating_sub(self.prev_idle[cpu]).min(period);
                self.prev_idle[cpu] = idle_total;
                if first {
                    continue;
                }
                let util = self.filters[cpu].update(period - d_idle, period);
                unsafe { std::ptr::write_volatile(&mut cc.util, util) };
                sum += util;
            }
            if first {
                continue;
            }
            let lc = &mut llc_ctxs[l];
            let mut depth = scan_depth(sum, cpus.len() as u64, self.imbalance_pct, small_llc);
            if let Some(fit) = fit {
                depth = crate::calibrate::fit_depth(fit.get(l), sum, cpus.len() as u64)
                    .unwrap_or(depth);
            }
            lc.util_sum = sum;
            // Mel Gorman's review of SIS_UTIL: do not write a shared line that would not change
            if !skip_same || unsafe { std::ptr::read_volatile(&lc.nr_idle_scan) } != depth {
                unsafe { std::ptr::write_volatile(&mut lc.nr_idle_scan, depth) };
                lc.updates += 1;
            }
        }
    }
}

/// The verifier's work per program (veristat's verified_insns): `name=N ...`, so that a
/// change that makes the wake path harder to verify shows in the log and in the VM tests.
fn verified_insns(skel: &BpfSkel<'_>) -> String {
    use libbpf_rs::skel::Skel;
    use std::os::fd::{AsFd, AsRawFd};
    skel.object()
        .progs()
        .map(|p| {
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            let ret = unsafe {
                libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                    p.as_fd().as_raw_fd(),
                    &mut info,
                    &mut len,
                )
            };
            let n = if ret == 0 {
                info.verified_insns.to_string()
            } else {
                "?".into()
            };
            format!("{}={n}", p.name().to_string_lossy())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn pin_features(skel: &mut BpfSkel<'_>) -> Result<()> {
    features::check_pin_dir()?;
    std::fs::create_dir_all(features::PIN_DIR).with_context(|| {
        format!(
            "creating {} (is bpffs mounted on /sys/fs/bpf?)",
            features::PIN_DIR
        )
    })?;
    let _ = std::fs::set_permissions(features::PIN_DIR, std::fs::Permissions::from_mode(0o700));
    // a pin left by an instance that was killed
    let _ = std::fs::remove_file(features::PIN_PATH);
    skel.maps
        .sis_features
        .pin(features::PIN_PATH)
        .with_context(|| format!("pinning {}", features::PIN_PATH))?;
    std::fs::set_permissions(features::PIN_PATH, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

impl Drop for Scheduler<'_> {
    fn drop(&mut self) {
        let _ = self.struct_ops.take();
        // only our own pin: another instance's (refused at start) is left alone
        if self.skel.maps.sis_features.is_pinned() {
            if let Err(e) = self.skel.maps.sis_features.unpin(features::PIN_PATH) {
                debug!("unpin: {e}");
            }
        }
        crate::calibrate::unpin(&mut self.skel);
        let _ = std::fs::remove_dir(features::PIN_DIR);
        info!("scx_sisutil detached");
    }
}
