// SPDX-License-Identifier: GPL-2.0-only
//! Open, load and attach the BPF scheduler; the run loop (util/depth updates,
//! stats requests); detach and clean up on Drop.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{debug, info, warn};
use scx_stats::prelude::*;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};
use std::mem::MaybeUninit;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bpf_skel::*;
use crate::sched::bpf_maps::{intf_slice, lookup_percpu_as, lookup_u64, u64_words, MappedWords};
use crate::sched::clock::{monotonic_ns, process_cpu_ns};
use crate::sched::features;
use crate::sched::loader::{
    pin_features, prog_run_stats, verified_insns, IntervalWait, UtilUpdate, Wake,
};
use crate::sched::opts::RunOpts;
use crate::sched::sis_util_depth::DepthRules;
use crate::sched::stats::{Counters, Metrics, ProgMetrics, NR_STATS};
use crate::sched::topology::{copy_same_c_type, TopoDesc};

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    stats_server: StatsServer<(), Metrics>,
    /// per LLC: its CPUs
    llcs: Vec<Vec<usize>>,
    util: UtilUpdate,
    /// sis_features through its mmap: no bpf() call per interval
    feat_word: Option<MappedWords>,
    /// calibrate's control words (its lease) through their mmap: no bpf() call per interval
    calib_ctl: Option<MappedWords>,
    interval: Duration,
    /// The fitted depths (used with SIS_FIT): per LLC, each utilization bucket's (None: too
    /// few samples)
    fit: Vec<[Option<u64>; crate::sched::sis_fit::BUCKETS]>,
    last_fit: Option<Instant>,
    /// --prog-stats: read the programs' run-time statistics into each report
    prog_stats: bool,
    /// loaded with SCX_OPS_ALLOW_QUEUED_WAKEUP (--allow-queued-wakeup)
    allow_queued_wakeup: bool,
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
        info!("scx_sisutil {}", crate::sched::opts::full_version());
        let mut skel = Self::open_load(opts, &desc, &llcs, open_object)?;
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
        crate::sched::sis_fit::init_loader(&mut skel, &llcs, opts.imbalance_pct)?;

        let struct_ops = Some(scx_ops_attach!(skel, sisutil_ops)?);
        // Pinned only once attached, so that `features` never finds a map that no running
        // scheduler reads; a failure from here on unpins in Drop.
        let mut sched = Self {
            skel,
            struct_ops,
            stats_server: StatsServer::new(crate::sched::stats::server_data()),
            util: UtilUpdate::new(llcs.clone(), desc.nr_cpu_ids(), opts.imbalance_pct),
            llcs,
            feat_word: None,
            calib_ctl: None,
            interval: Duration::from_millis(opts.interval_ms),
            fit: vec![],
            last_fit: None,
            prog_stats: opts.prog_stats,
            allow_queued_wakeup: opts.allow_queued_wakeup,
        };
        sched.publish()?;
        info!(
            "scx_sisutil attached; features: {}",
            features::to_words(feat).join(" ")
        );
        sched.feat_word =
            MappedWords::map_or_warn(&sched.skel.maps.sis_features, 1, "the feature word");
        sched.calib_ctl = MappedWords::map_or_warn(
            &sched.skel.maps.calib_ctl,
            crate::sched::sis_fit::CTL_WORDS,
            "calibrate's lease",
        );
        Ok(sched)
    }

    /// Open the BPF object, fill its read-only topology and settings, load it.
    fn open_load(
        opts: &RunOpts,
        desc: &TopoDesc,
        llcs: &[Vec<usize>],
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<BpfSkel<'a>> {
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
        let mut builder = BpfSkelBuilder::default();
        builder.obj_builder.debug(opts.verbose > 1);
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            sisutil_ops,
            opts.libbpf.clone().into_bpf_open_opts()
        )?;
        // sisutil_ + the feature layout + scx_ops_open!'s version suffix (features::ops_name)
        let name = crate::sched::features::ops_name();
        let field = &mut skel.struct_ops.sisutil_ops_mut().name;
        field.fill(0);
        let room = field.len() - 1;
        for (d, b) in field.iter_mut().zip(name.bytes().take(room)) {
            *d = b as _;
        }
        skel.struct_ops.sisutil_ops_mut().exit_dump_len = opts.exit_dump_len;
        skel.struct_ops.sisutil_ops_mut().flags = *scx_utils::compat::SCX_OPS_KEEP_BUILTIN_IDLE
            | *scx_utils::compat::SCX_OPS_ENQ_MIGRATION_DISABLED
            | queued_wakeup_flag(
                opts.allow_queued_wakeup,
                *scx_utils::compat::SCX_OPS_ALLOW_QUEUED_WAKEUP,
            )?;

        let rodata = skel.maps.rodata_data.as_mut().context("no rodata")?;
        unsafe { copy_same_c_type(&*sis_topo, &mut rodata.topo) };
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.imbalance_pct = opts.imbalance_pct;
        rodata.shard_cpus = opts.shard_cpus;
        crate::sched::sis_fit::size_records(&mut skel, llcs.len())?;
        Ok(scx_ops_load!(skel, sisutil_ops, uei)?)
    }

    /// Once attached: the feature map's and the calibration's pins, the stats server.
    fn publish(&mut self) -> Result<()> {
        pin_features(&mut self.skel)?;
        crate::sched::sis_fit::pin(&mut self.skel)?;
        self.stats_server = StatsServer::new(crate::sched::stats::server_data()).launch()?;
        // statistics are root-only, like the feature map
        let sock = std::path::Path::new(crate::sched::stats::STATS_SOCKET);
        if let Err(e) = std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o600)) {
            warn!("cannot restrict {sock:?}: {e}");
        }
        Ok(())
    }

    fn features(&self) -> u64 {
        if let Some(f) = &self.feat_word {
            return f.read(0);
        }
        lookup_u64(&self.skel.maps.sis_features, 0).unwrap_or(0)
    }

    /// One interval of the loader's work (UtilUpdate) at `now` (CLOCK_MONOTONIC ns), on the
    /// scheduler's .bss.
    fn update_util(&mut self, now: u64) {
        let rules = DepthRules::of(self.features());
        self.update_calib(rules.fit, now);
        let Some(bss) = self.skel.maps.bss_data.as_mut() else {
            return;
        };
        self.util.update(
            rules,
            now,
            intf_slice(&mut bss.cpu_ctxs),
            intf_slice(&mut bss.llc_ctxs),
            &self.fit,
        );
    }

    /// Depth calibration: recording on while `calibrate` holds its lease or SIS_FIT is on;
    /// with SIS_FIT, the per-LLC fit from the records, refreshed each second.
    fn update_calib(&mut self, sis_fit: bool, now: u64) {
        let on =
            sis_fit || crate::sched::sis_fit::lease_held(&self.skel, self.calib_ctl.as_ref(), now);
        if let Some(bss) = self.skel.maps.bss_data.as_mut() {
            if (bss.calib_on != 0) != on {
                unsafe { std::ptr::write_volatile(&mut bss.calib_on, on as u64) };
            }
        }
        if !sis_fit {
            self.last_fit = None;
            return;
        }
        if self
            .last_fit
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.fit = crate::sched::sis_fit::fit_from_records(&self.skel, self.llcs.len());
            self.last_fit = Some(Instant::now());
        }
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
                    for (t, w) in c.iter_mut().zip(u64_words(&v)) {
                        *t += w;
                    }
                }
            }
            let (util_sum, depth) = bss.map_or((0, 0), |b| {
                (b.llc_ctxs[l].util_sum, b.llc_ctxs[l].nr_idle_scan)
            });
            per_llc.push((c, cpus.len() as u64, util_sum, depth));
        }
        let mut m = Metrics::new(features::to_words(self.features()).join(" "), &per_llc);
        m.allow_queued_wakeup = self.allow_queued_wakeup as u64;
        self.read_wait(&mut m);
        m.set_loader_cpu(process_cpu_ns(), monotonic_ns());
        if self.prog_stats {
            for (name, calls, ns) in prog_run_stats(&self.skel) {
                m.progs.insert(name, ProgMetrics::of(calls, ns));
            }
        }
        m
    }

    /// Sum the per-CPU wait histograms (intf.h's struct wait_hist).
    fn read_wait(&self, m: &mut Metrics) {
        let nb = crate::sched::wait_hist::NR_BUCKETS;
        let (mut hist, mut count, mut sum) = (vec![0u64; nb], 0u64, 0u64);
        let hists = lookup_percpu_as::<crate::bpf_intf::wait_hist, _>(
            &self.skel.maps.wait_hists,
            0,
            "the wait histograms",
        );
        for w in hists.unwrap_or_default() {
            for (h, c) in hist.iter_mut().zip(&w.bucket) {
                *h += c;
            }
            count += w.count;
            sum += w.sum_ns;
        }
        m.set_wait(hist, count, sum);
    }

    fn exited(&mut self) -> bool {
        uei_exited!(&self.skel, uei)
    }

    pub fn run(&mut self, shutdown: Arc<AtomicBool>) -> Result<UserExitInfo> {
        let (res_ch, req_ch) = self.stats_server.channels();
        let mut wait = IntervalWait::new(self.interval, Some(req_ch));
        while !shutdown.load(Ordering::Relaxed) && !self.exited() {
            match wait.wait(&mut monotonic_ns) {
                Wake::Interval(now) => self.update_util(now),
                Wake::Requests(n) => {
                    for _ in 0..n {
                        res_ch.send(self.read_metrics())?;
                    }
                }
            }
        }
        let _ = self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }
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
        crate::sched::sis_fit::unpin(&mut self.skel);
        let _ = std::fs::remove_dir(features::PIN_DIR);
        info!("scx_sisutil detached");
    }
}

/// --allow-queued-wakeup's ops flag: the kernel's SCX_OPS_ALLOW_QUEUED_WAKEUP (`have`, 0 on a
/// kernel without it: refused in one line), none when not asked for.
fn queued_wakeup_flag(want: bool, have: u64) -> Result<u64> {
    match (want, have) {
        (false, _) => Ok(0),
        (true, 0) => bail!(
            "--allow-queued-wakeup: this kernel's sched_ext has no SCX_OPS_ALLOW_QUEUED_WAKEUP \
             (Linux 6.15+); run without it"
        ),
        (true, f) => Ok(f),
    }
}

#[cfg(test)]
mod tests {
    use super::queued_wakeup_flag;

    /// Asked for: the kernel's bit, or one line of refusal on a kernel without it; not asked
    /// for: no bit, whatever the kernel has.
    #[test]
    fn queued_wakeup_flag_only_when_asked_and_there() {
        assert_eq!(queued_wakeup_flag(false, 0x20).unwrap(), 0);
        assert_eq!(queued_wakeup_flag(false, 0).unwrap(), 0);
        assert_eq!(queued_wakeup_flag(true, 0x20).unwrap(), 0x20);
        let e = queued_wakeup_flag(true, 0).unwrap_err().to_string();
        assert!(
            e.contains("SCX_OPS_ALLOW_QUEUED_WAKEUP") && !e.contains('\n'),
            "{e}"
        );
    }
}
