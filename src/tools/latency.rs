// SPDX-License-Identifier: GPL-2.0-only
//! `scx_sisutil latency`: wake-up latency (runnable -> running) of every task, per nice
//! level, from the scheduler tracepoints (src/bpf/tools/waitlat.bpf.c). Independent of the
//! scheduler in charge: EEVDF, scx_sisutil or any other sched_ext scheduler.
//! Its histograms are the monitor's (src/sched/wait_hist.rs).
//!
//! With `--long-wait-ms MS` it also records every wait of MS or more with its start and end
//! (CLOCK_MONOTONIC, the BPF side's bpf_ktime_get_ns), and runs a stall probe: a SCHED_FIFO
//! thread (the RT class runs before sched_ext and the fair class: no scheduler under test
//! delays it) that sleeps 50 ms at a time and logs each oversleep of STALL_MIN_NS or more
//! with its start and end: times when the machine itself stood still (under QEMU TCG the
//! host does not run a guest for seconds on a busy host; the guest clock runs on). Each long
//! wait is reported with the stall time inside it, and each nice level with its longest
//! wait net of that stall time (`net_max_us`): a stall lengthens only the waits it falls in.

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};
use serde::Serialize;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bpf_intf as bi;
use crate::sched::wait_hist::{quantile, NR_BUCKETS};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/waitlat_skel.rs"));
}

const NR_NICE: usize = bi::sis_consts_WAIT_NR_NICE as usize;

#[derive(clap::Args, Debug, Clone)]
pub struct LatencyOpts {
    /// Seconds to measure (0.1..=86400); SIGINT/SIGTERM end it early
    #[arg(long, default_value_t = 10.0, value_parser = parse_duration)]
    pub duration: f64,
    /// One JSON object instead of the table
    #[arg(long)]
    pub json: bool,
    /// Also record every wait of MS ms or more (1..=3600000) with its start and end, run
    /// the stall probe, and report the stall time inside each such wait
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub long_wait_ms: Option<u64>,
}

fn parse_duration(s: &str) -> std::result::Result<f64, String> {
    crate::sched::stats::parse_secs(s, "duration", 0.1, 86400.0)
}

/// The stall probe's period and the oversleep it logs as a stall: 200 ms, as the guest
/// scripts' probe before it (shorter oversleeps are the guest's own timer slack and the
/// round robin of QEMU's vCPUs).
const PROBE_PERIOD_NS: u64 = 50_000_000;
pub const STALL_MIN_NS: u64 = 200_000_000;
/// Long waits listed one by one in the report (the worst net of stalls first).
const LONG_WAITS_LISTED: usize = 20;

#[derive(Debug, Default, Clone, Serialize)]
pub struct Level {
    pub nice: i32,
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// exact longest measured wait
    pub max_us: f64,
    pub max_pid: u64,
    /// tasks of this nice still runnable and not run when the measurement ended
    pub pending: u64,
    /// the longest of their waits so far
    pub pending_max_us: f64,
    /// with --long-wait-ms: the longest wait (measured or pending) minus the stall time
    /// inside it (waits under the threshold count whole)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_max_us: Option<f64>,
    #[serde(skip)]
    pub buckets: Vec<u64>,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub duration_s: f64,
    /// seconds to load, attach and arm the tracer (under load, seconds)
    pub attach_s: f64,
    /// the sched_ext scheduler in charge ("none": the kernel's fair class)
    pub scheduler: String,
    pub levels: Vec<Level>,
    pub all: Level,
    /// wake-ups not tracked (pending map full)
    pub dropped: u64,
    /// with --long-wait-ms: the long waits and the machine's stalls
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long: Option<LongReport>,
}

/// One wait of --long-wait-ms or more: [start_ns, end_ns) on CLOCK_MONOTONIC.
#[derive(Debug, Default, Clone, Serialize)]
pub struct LongWait {
    pub pid: u32,
    pub nice: i32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub wait_us: f64,
    /// the stall time inside [start_ns, end_ns)
    pub stalled_us: f64,
    /// wait_us - stalled_us
    pub net_us: f64,
    /// still waiting when the window ended (end_ns: then)
    pub pending: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct LongReport {
    pub long_wait_ms: u64,
    /// waits of long_wait_ms or more (measured and pending)
    pub count: u64,
    /// long waits lost (the ring buffer was full): their stall time is unknown
    pub dropped: u64,
    /// the worst LONG_WAITS_LISTED by net_us
    pub waits: Vec<LongWait>,
    pub stall_min_ms: f64,
    pub stall_count: u64,
    pub stall_total_ms: f64,
    pub stall_max_ms: f64,
    /// every stall, [start_ns, end_ns) on CLOCK_MONOTONIC
    pub stalls: Vec<[u64; 2]>,
}

/// The stall time inside [start, end): the sum of its overlaps with the stalls.
pub fn stalled_ns(stalls: &[[u64; 2]], start: u64, end: u64) -> u64 {
    stalls
        .iter()
        .map(|&[a, b]| end.min(b).saturating_sub(start.max(a)))
        .sum()
}

/// The stall probe: a SCHED_FIFO thread sleeping PROBE_PERIOD_NS at a time; an oversleep of
/// STALL_MIN_NS or more is a stall from when it was due to wake to when it woke.
struct StallProbe {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    stalls: Arc<Mutex<Vec<[u64; 2]>>>,
}

impl StallProbe {
    fn start() -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stalls = Arc::new(Mutex::new(Vec::new()));
        let (s, log) = (stop.clone(), stalls.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("stall-probe".into())
            .spawn(move || {
                let param = libc::sched_param { sched_priority: 90 };
                // pid 0: this thread
                if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                    let _ = tx.send(Err(std::io::Error::last_os_error()));
                    return;
                }
                let _ = tx.send(Ok(()));
                let mut last = crate::sched::clock::monotonic_ns();
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_nanos(PROBE_PERIOD_NS));
                    let now = crate::sched::clock::monotonic_ns();
                    let late = now.saturating_sub(last + PROBE_PERIOD_NS);
                    if late >= STALL_MIN_NS {
                        if let Ok(mut l) = log.lock() {
                            l.push([now - late, now]);
                        }
                    }
                    last = now;
                }
            })
            .context("starting the stall probe thread")?;
        match rx.recv() {
            Ok(Ok(())) => Ok(StallProbe {
                stop,
                thread,
                stalls,
            }),
            Ok(Err(e)) => bail!("the stall probe cannot run as SCHED_FIFO: {e}"),
            Err(_) => bail!("the stall probe thread died at its start"),
        }
    }

    fn finish(self) -> Vec<[u64; 2]> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        let v = self.stalls.lock().map(|v| v.clone()).unwrap_or_default();
        v
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn finish(l: &mut Level, sum_ns: u64, max_ns: u64) {
    l.mean_us = if l.count > 0 {
        us(sum_ns) / l.count as f64
    } else {
        0.0
    };
    // a bucket's upper end can pass the exact longest wait: no quantile above it
    let q = |p: f64| us(quantile(&l.buckets, p).min(max_ns));
    l.p50_us = q(0.50);
    l.p99_us = q(0.99);
    l.p999_us = q(0.999);
    l.max_us = us(max_ns);
}

fn current_scheduler() -> String {
    let state = std::fs::read_to_string("/sys/kernel/sched_ext/state").unwrap_or_default();
    if state.trim() == "enabled" {
        std::fs::read_to_string("/sys/kernel/sched_ext/root/ops")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "sched_ext".into())
    } else {
        "none".into()
    }
}

pub fn latency_main(opts: &LatencyOpts, shutdown: &dyn Fn() -> bool) -> Result<()> {
    let rep = measure_long(opts.duration, opts.long_wait_ms, shutdown)?;
    if opts.json {
        println!("{}", serde_json::to_string(&rep)?);
    } else {
        print_table(&rep);
    }
    Ok(())
}

/// The tracer loaded and its three programs attached, not yet armed: no wait starts.
fn load_attached(
    obj: &mut MaybeUninit<libbpf_rs::OpenObject>,
    long_wait_ns: u64,
) -> Result<skel::WaitlatSkel<'_>> {
    scx_utils::try_set_rlimit_infinity();
    let mut open = skel::WaitlatSkelBuilder::default()
        .open(obj)
        .context("opening the latency tracer")?;
    open.maps
        .rodata_data
        .as_mut()
        .context("the latency tracer has no rodata")?
        .long_wait_ns = long_wait_ns;
    // the scx headers' fentry probe of sched_ext registration: not wanted here
    open.progs.scx_lib_init_probe.set_autoload(false);
    let mut sk = open.load().context("loading the latency tracer")?;
    sk.attach()
        .context("attaching the latency tracer to the sched tracepoints")?;
    Ok(sk)
}

/// Waits start from now: only once sched_switch's program is attached too (waitlat.bpf.c,
/// `armed`), or a wake-up seen without it leaves a start that a later wait inherits.
fn arm(sk: &mut skel::WaitlatSkel<'_>) -> Result<()> {
    match sk.maps.bss_data.as_deref_mut() {
        Some(b) => {
            b.armed = 1;
            Ok(())
        }
        None => bail!("the latency tracer has no .bss (cannot arm it)"),
    }
}

/// The ring buffer of the long waits (`long_waits`), each pushed onto `longs` as it is read.
fn long_wait_ring(
    map: &dyn libbpf_rs::MapCore,
    longs: &Rc<RefCell<Vec<LongWait>>>,
) -> Result<libbpf_rs::RingBuffer<'static>> {
    let mut b = libbpf_rs::RingBufferBuilder::new();
    let l = longs.clone();
    b.add(map, move |d: &[u8]| {
        if d.len() >= 24 {
            let u = |i: usize| u64::from_ne_bytes(d[i..i + 8].try_into().unwrap_or_default());
            let i = |i: usize| i32::from_ne_bytes(d[i..i + 4].try_into().unwrap_or_default());
            l.borrow_mut().push(LongWait {
                start_ns: u(0),
                end_ns: u(8),
                pid: i(16) as u32,
                nice: i(20),
                ..Default::default()
            });
        }
        0
    })
    .context("the latency tracer's long-wait ring buffer")?;
    b.build()
        .context("the latency tracer's long-wait ring buffer")
}

/// The wait histograms per nice level (every level, empty ones too) and over all, summed
/// over the CPUs.
fn read_levels(sk: &skel::WaitlatSkel<'_>) -> Result<(Vec<Level>, Level)> {
    let mut levels: Vec<Level> = (0..NR_NICE)
        .map(|k| Level {
            nice: k as i32 - 20,
            buckets: vec![0; NR_BUCKETS],
            ..Default::default()
        })
        .collect();
    let mut all = Level {
        nice: 0,
        buckets: vec![0; NR_BUCKETS],
        ..Default::default()
    };
    let (mut all_sum, mut all_max) = (0u64, 0u64);
    for (k, l) in levels.iter_mut().enumerate() {
        let hists = crate::sched::bpf_maps::lookup_percpu_as::<bi::lat_hist, _>(
            &sk.maps.lat_hists,
            k as u32,
            "the latency histograms",
        )?;
        let (mut sum, mut max) = (0u64, 0u64);
        for w in hists {
            for (b, c) in l.buckets.iter_mut().zip(&w.bucket) {
                *b += c;
            }
            l.count += w.count;
            sum += w.sum_ns;
            if w.max_ns > max {
                max = w.max_ns;
                l.max_pid = w.max_pid;
            }
        }
        for (a, b) in all.buckets.iter_mut().zip(&l.buckets) {
            *a += b;
        }
        all.count += l.count;
        all_sum += sum;
        if max > all_max {
            all_max = max;
            all.max_pid = l.max_pid;
        }
        finish(l, sum, max);
    }
    finish(&mut all, all_sum, all_max);
    Ok((levels, all))
}

/// The tasks still waiting at `now` (the `pending` map), each counted in its level and in
/// `all` with its wait so far, and a long wait (`pending`) where it is `long_ns` or more.
fn read_pending(
    sk: &skel::WaitlatSkel<'_>,
    now: u64,
    long_ns: u64,
    levels: &mut [Level],
    all: &mut Level,
    longs: &RefCell<Vec<LongWait>>,
) {
    for key in sk.maps.pending.keys() {
        if let Ok(Some(v)) = sk.maps.pending.lookup(&key, MapFlags::ANY) {
            if v.len() < 12 {
                continue;
            }
            let since = u64::from_ne_bytes(v[0..8].try_into().unwrap_or_default());
            let nice = i32::from_ne_bytes(v[8..12].try_into().unwrap_or_default());
            let waited = now.saturating_sub(since);
            if long_ns > 0 && waited >= long_ns {
                longs.borrow_mut().push(LongWait {
                    start_ns: since,
                    end_ns: now,
                    pid: u32::from_ne_bytes(key[0..4].try_into().unwrap_or_default()),
                    nice,
                    pending: true,
                    ..Default::default()
                });
            }
            if let Some(l) = levels.get_mut((nice + 20).clamp(0, NR_NICE as i32 - 1) as usize) {
                l.pending += 1;
                l.pending_max_us = l.pending_max_us.max(us(waited));
            }
            all.pending += 1;
            all.pending_max_us = all.pending_max_us.max(us(waited));
        }
    }
}

/// With --long-wait-ms: the long waits net of the stalls the probe saw (`net_of_stalls`),
/// from the tracer's short-wait maxima and its dropped count.
fn long_report(
    sk: &skel::WaitlatSkel<'_>,
    stalls: Vec<[u64; 2]>,
    (levels, all): (&mut [Level], &mut Level),
    longs: &RefCell<Vec<LongWait>>,
    long_wait_ms: u64,
) -> Result<LongReport> {
    let long_dropped = sk.maps.bss_data.as_ref().map_or(0, |b| b.long_dropped);
    let mut short = vec![0u64; NR_NICE];
    for (k, m) in short.iter_mut().enumerate() {
        let per_cpu = crate::sched::bpf_maps::lookup_percpu_as::<u64, _>(
            &sk.maps.short_max,
            k as u32,
            "the latency tracer's short-wait maxima",
        )?;
        *m = per_cpu.into_iter().max().unwrap_or(0);
    }
    let waits = std::mem::take(&mut *longs.borrow_mut());
    Ok(net_of_stalls(
        levels,
        all,
        &short,
        waits,
        stalls,
        long_wait_ms,
        long_dropped,
    ))
}

/// Trace for `duration` seconds (or until `shutdown`), draining `rb` meanwhile, then
/// `detach` and drain it: the window's end (CLOCK_MONOTONIC ns) and its length (s).
fn trace_window(
    detach: impl FnOnce(),
    rb: Option<&libbpf_rs::RingBuffer<'_>>,
    duration: f64,
    shutdown: &dyn Fn() -> bool,
) -> Result<(u64, f64)> {
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(duration);
    while Instant::now() < end && !shutdown() {
        let step = Duration::from_millis(50).min(end.saturating_duration_since(Instant::now()));
        match rb {
            Some(rb) => {
                // EINTR (a signal that asks to stop) is no failure: the loop checks
                let _ = rb.poll(step);
            }
            None => std::thread::sleep(step),
        }
    }
    let now = crate::sched::clock::monotonic_ns();
    let elapsed = t0.elapsed().as_secs_f64();
    // detach first: the maps stop changing while they are read (under load, reading takes
    // a while and the pending map would fill with wake-ups from after `now`)
    detach();
    if let Some(rb) = rb {
        rb.consume()
            .context("draining the latency tracer's long-wait ring buffer")?;
    }
    Ok((now, elapsed))
}

/// Trace wake-ups for `duration` seconds (or until `shutdown`) and report them; with
/// `long_wait_ms`, the long waits and the stall probe too (the module's doc).
pub fn measure_long(
    duration: f64,
    long_wait_ms: Option<u64>,
    shutdown: &dyn Fn() -> bool,
) -> Result<Report> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("must run as root: the tracer is loaded through bpf() (try sudo)");
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing; needs CONFIG_DEBUG_INFO_BTF=y)");
    }
    let loading = Instant::now();
    let mut obj = MaybeUninit::uninit();
    let long_ns = long_wait_ms.map_or(0, |ms| ms * 1_000_000);
    let mut sk = load_attached(&mut obj, long_ns)?;
    // the long waits, drained from the ring buffer while tracing (it holds ~131000)
    let longs: Rc<RefCell<Vec<LongWait>>> = Rc::default();
    let rb = if long_ns > 0 {
        Some(long_wait_ring(&sk.maps.long_waits, &longs)?)
    } else {
        None
    };
    // the probe runs before the first wait can start and until after the last one ends
    let probe = if long_ns > 0 {
        Some(StallProbe::start()?)
    } else {
        None
    };
    arm(&mut sk)?;
    let attach_s = loading.elapsed().as_secs_f64();
    // one line on stderr once wake-ups are traced: a caller can start its load after it
    eprintln!("scx_sisutil latency: tracing");

    let links = &mut sk.links;
    let detach = || {
        links.waitlat_wakeup = None;
        links.waitlat_wakeup_new = None;
        links.waitlat_switch = None;
    };
    let (now, elapsed) = trace_window(detach, rb.as_ref(), duration, shutdown)?;
    let stalls = probe.map(StallProbe::finish);
    // a second line once the window is over: a caller can stop its load now, so that the
    // maps are read with the CPUs free (tests/guest/fair-mixed.sh waits for it)
    eprintln!("scx_sisutil latency: window over after {elapsed:.1} s, reading");

    let (mut levels, mut all) = read_levels(&sk)?;

    // tasks still waiting: their wait so far
    read_pending(&sk, now, long_ns, &mut levels, &mut all, &longs);
    let dropped = sk.maps.bss_data.as_ref().map_or(0, |b| b.dropped);
    let long = match stalls {
        Some(stalls) => Some(long_report(
            &sk,
            stalls,
            (&mut levels, &mut all),
            &longs,
            long_wait_ms.unwrap_or(0),
        )?),
        None => None,
    };
    let rep = Report {
        duration_s: elapsed,
        attach_s,
        scheduler: current_scheduler(),
        levels: levels
            .into_iter()
            .filter(|l| l.count > 0 || l.pending > 0)
            .collect(),
        all,
        dropped,
        long,
    };
    Ok(rep)
}

/// Each long wait's stall time and net wait; each level's longest net wait (`short`: the
/// longest wait under the threshold per nice + 20, which counts whole).
fn net_of_stalls(
    levels: &mut [Level],
    all: &mut Level,
    short: &[u64],
    mut waits: Vec<LongWait>,
    stalls: Vec<[u64; 2]>,
    long_wait_ms: u64,
    dropped: u64,
) -> LongReport {
    for (l, &s) in levels.iter_mut().zip(short) {
        l.net_max_us = Some(us(s));
    }
    all.net_max_us = Some(us(short.iter().copied().max().unwrap_or(0)));
    for w in waits.iter_mut() {
        let d = w.end_ns.saturating_sub(w.start_ns);
        let st = stalled_ns(&stalls, w.start_ns, w.end_ns);
        w.wait_us = us(d);
        w.stalled_us = us(st);
        w.net_us = us(d - st.min(d));
        if let Some(l) = levels.get_mut((w.nice + 20).clamp(0, NR_NICE as i32 - 1) as usize) {
            l.net_max_us = Some(l.net_max_us.unwrap_or(0.0).max(w.net_us));
        }
        all.net_max_us = Some(all.net_max_us.unwrap_or(0.0).max(w.net_us));
    }
    let count = waits.len() as u64;
    waits.sort_by(|a, b| b.net_us.total_cmp(&a.net_us));
    waits.truncate(LONG_WAITS_LISTED);
    let lens: Vec<u64> = stalls.iter().map(|[a, b]| b - a).collect();
    LongReport {
        long_wait_ms,
        count,
        dropped,
        waits,
        stall_min_ms: STALL_MIN_NS as f64 / 1e6,
        stall_count: stalls.len() as u64,
        stall_total_ms: lens.iter().sum::<u64>() as f64 / 1e6,
        stall_max_ms: lens.iter().copied().max().unwrap_or(0) as f64 / 1e6,
        stalls,
    }
}

fn print_table(r: &Report) {
    println!(
        "wake-up latency (runnable -> running), {:.1} s, scheduler {}; us (p50/p99/p99.9: bucket upper ends)",
        r.duration_s, r.scheduler
    );
    println!(
        "{:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>8} {:>12}",
        "nice", "wake-ups", "mean", "p50", "p99", "p99.9", "max", "pending", "pending_max"
    );
    let row = |name: String, l: &Level| {
        println!(
            "{:>5} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>11.1} {:>8} {:>12.1}",
            name,
            l.count,
            l.mean_us,
            l.p50_us,
            l.p99_us,
            l.p999_us,
            l.max_us,
            l.pending,
            l.pending_max_us
        )
    };
    for l in &r.levels {
        row(l.nice.to_string(), l);
    }
    row("all".into(), &r.all);
    if r.dropped > 0 {
        println!(
            "({} wake-ups not tracked: too many runnable tasks)",
            r.dropped
        );
    }
    if let Some(lr) = &r.long {
        println!(
            "machine stalls (the probe overslept >= {} ms): {}, {:.0} ms in all, longest {:.0} ms",
            lr.stall_min_ms, lr.stall_count, lr.stall_total_ms, lr.stall_max_ms
        );
        println!(
            "waits of {} ms or more: {}{}; the longest net of the stalls inside them:",
            lr.long_wait_ms,
            lr.count,
            if lr.dropped > 0 {
                format!(" ({} lost: the ring buffer was full)", lr.dropped)
            } else {
                String::new()
            }
        );
        println!(
            "{:>8} {:>5} {:>12} {:>12} {:>12} {:>8}",
            "pid", "nice", "wait_us", "stalled_us", "net_us", "pending"
        );
        for w in lr.waits.iter().take(5) {
            println!(
                "{:>8} {:>5} {:>12.0} {:>12.0} {:>12.0} {:>8}",
                w.pid, w.nice, w.wait_us, w.stalled_us, w.net_us, w.pending
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::wait_hist::{bucket_hi, bucket_of};

    /// The tracer on the host kernel (root and bpf(), as the sis_test host tests): a thread
    /// at nice 7 sleeps 1 ms 200 times; its wake-ups are counted at nice 7 with waits that
    /// are ordered (p50 <= p99 <= max) and no longer than the test itself.
    #[test]
    fn tracer_counts_wakeups_per_nice() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let go = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (g, d) = (go.clone(), done.clone());
        let th = std::thread::spawn(move || {
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
            assert_eq!(unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 7) }, 0);
            while !g.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            for _ in 0..200 {
                std::thread::sleep(Duration::from_millis(1));
            }
            d.store(true, Ordering::Relaxed);
        });
        let t0 = Instant::now();
        // traced until the 200 sleeps are over (a loaded host stretches them), 60 s at most
        let rep = measure_long(60.0, None, &|| {
            go.store(true, Ordering::Relaxed);
            done.load(Ordering::Relaxed)
        })
        .expect("the tracer loads on the host (needs root)");
        th.join().unwrap();
        let l = rep
            .levels
            .iter()
            .find(|l| l.nice == 7)
            .expect("no wake-up at nice 7");
        // Each 1 ms sleep ends in one wake-up. One whose timer fires before the thread has
        // switched out finds it still on its CPU (ttwu_runnable): no wait, nothing to record;
        // a loaded host makes that race happen about once in 200 (199 seen in CI's run).
        // Margin: 190 allows 5 % lost; 10 runs at a host load of ~14 passed, and the same
        // 200 sleeps at nice 7 in a python3 process counted 204-210 (its own wake-ups too).
        assert!(
            l.count >= 190,
            "nice 7: {} wake-ups, want >= 190 of 200",
            l.count
        );
        // quantiles are bucket upper ends: at most the upper end of the max's bucket
        let max_hi = us(bucket_hi(bucket_of((l.max_us * 1000.0).round() as u64)) - 1);
        assert!(
            l.p50_us <= l.p99_us && l.p99_us <= max_hi && l.p999_us <= l.max_us,
            "{l:?}"
        );
        assert!(l.max_us < t0.elapsed().as_secs_f64() * 1e6, "{l:?}");
        assert!(rep.all.count >= l.count);
    }

    /// Before the loader arms the tracer no wait starts, whatever the tracepoints see: a
    /// thread at nice 5 sleeping 1 ms 50 times leaves `pending` empty and every histogram
    /// at 0; armed, the same 50 sleeps are counted (>= 40: a wake-up that finds the thread
    /// still on its CPU starts no wait, ~1 in 200 on a loaded host).
    #[test]
    fn tracer_starts_no_wait_before_armed() {
        let counts = |sk: &skel::WaitlatSkel<'_>| -> Vec<u64> {
            (0..NR_NICE as u32)
                .map(|k| {
                    crate::sched::bpf_maps::lookup_percpu_as::<bi::lat_hist, _>(
                        &sk.maps.lat_hists,
                        k,
                        "the latency histograms",
                    )
                    .unwrap()
                    .iter()
                    .map(|h| h.count)
                    .sum()
                })
                .collect()
        };
        let sleeper = || {
            std::thread::spawn(|| {
                let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
                assert_eq!(unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 5) }, 0);
                for _ in 0..50 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
            .join()
            .unwrap()
        };
        let mut obj = MaybeUninit::uninit();
        let mut sk = load_attached(&mut obj, 0).expect("the tracer loads on the host (needs root)");
        sleeper();
        assert_eq!(sk.maps.pending.keys().count(), 0, "a wait started unarmed");
        assert!(counts(&sk).iter().all(|&c| c == 0), "{:?}", counts(&sk));
        arm(&mut sk).unwrap();
        sleeper();
        let at5 = counts(&sk)[25];
        assert!(at5 >= 40, "armed: {at5} waits at nice 5, want >= 40 of 50");
    }

    /// A wait's stall time is its overlap with the stalls: none, part, whole, several; a
    /// level's net maximum is its worst long wait net of stalls, or its longest short wait.
    #[test]
    fn long_waits_net_of_stalls() {
        let st = vec![[100, 200], [300, 350], [1000, 1100]];
        assert_eq!(stalled_ns(&st, 0, 100), 0);
        assert_eq!(stalled_ns(&st, 150, 320), 50 + 20);
        assert_eq!(stalled_ns(&st, 0, 2000), 250);
        assert_eq!(stalled_ns(&st, 120, 130), 10);
        let w = |nice, start_ns, end_ns| LongWait {
            nice,
            start_ns,
            end_ns,
            ..Default::default()
        };
        // stalls of 10 s and 2 s; a 30 s starvation at nice 0 spans the 2 s one
        let s = 1_000_000_000u64;
        let stalls = vec![[10 * s, 20 * s], [50 * s, 52 * s]];
        let waits = vec![
            w(0, 9 * s, 21 * s),   // 12 s, 10 of them stalled: 2 s net
            w(-20, 9 * s, 12 * s), // 3 s, 2 stalled: 1 s
            w(0, 40 * s, 70 * s),  // 30 s, 2 stalled: 28 s
        ];
        let mut levels: Vec<Level> = (0..NR_NICE)
            .map(|k| Level {
                nice: k as i32 - 20,
                ..Default::default()
            })
            .collect();
        let mut all = Level::default();
        let mut short = vec![0u64; NR_NICE];
        short[20 + 5] = 700_000_000; // a 0.7 s wait at nice 5, under the threshold
        let r = net_of_stalls(&mut levels, &mut all, &short, waits, stalls, 1000, 0);
        assert_eq!(r.count, 3);
        assert_eq!(
            (r.stall_count, r.stall_total_ms, r.stall_max_ms),
            (2, 12000.0, 10000.0)
        );
        assert_eq!(r.waits[0].net_us, 28e6);
        assert_eq!(r.waits[0].stalled_us, 2e6);
        assert_eq!(levels[20].net_max_us, Some(28e6));
        assert_eq!(levels[0].net_max_us, Some(1e6));
        assert_eq!(levels[25].net_max_us, Some(0.7e6));
        assert_eq!(all.net_max_us, Some(28e6));
    }

    /// One wait of 1000 ns: its bucket ends at 1023 ns, but no quantile passes the exact
    /// longest wait.
    #[test]
    fn quantiles_clamped_to_the_max() {
        let mut l = Level {
            buckets: vec![0; NR_BUCKETS],
            count: 1,
            ..Default::default()
        };
        l.buckets[bucket_of(1000)] = 1;
        assert!(quantile(&l.buckets, 0.5) > 1000);
        finish(&mut l, 1000, 1000);
        assert_eq!(
            (l.p50_us, l.p99_us, l.p999_us, l.max_us),
            (1.0, 1.0, 1.0, 1.0)
        );
        // below the max, quantiles stay the bucket upper ends
        l.buckets[bucket_of(1_000_000)] = 1;
        l.buckets[bucket_of(1000)] = 99;
        l.count = 100;
        finish(&mut l, 0, 1_000_000);
        assert_eq!(l.p50_us, us(quantile(&l.buckets, 0.5)));
        assert_eq!(l.p999_us, 1000.0);
    }
}
