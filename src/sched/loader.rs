// SPDX-License-Identifier: GPL-2.0-only
//! The loader's side of the scheduler's maps: the per-interval util and scan-depth update
//! (UtilUpdate), the feature map's pin, and the verifier's record (typed map reads are
//! src/sched/bpf_maps.rs'). Used by the scheduler
//! (src/sched/scheduler.rs) and by `placement-cost --loader` (src/tools/cost.rs).

use anyhow::{Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::bpf_skel::*;
use crate::sched::features;
use crate::sched::sis_util_depth::{DepthRules, UtilFilter};

/// A CPU's idle time up to `now` from its two words, read while BPF writes them
/// (src/bpf/idle.bpf.h): a period is open while `idle_start` is set; BPF closes it by
/// clearing `idle_start` FIRST and adding its length to `idle_ns` after. So `idle_ns` is read
/// first: when `idle_start` then still reads set, that period's add had not happened at the
/// first read either, and a period is never counted both open and in `idle_ns`. A period
/// closed around the reads (cleared, not yet added, or added after the `idle_ns` read) is
/// counted by the next interval's read instead: never twice.
pub fn idle_total(
    mut idle_ns: impl FnMut() -> u64,
    mut idle_start: impl FnMut() -> u64,
    now: u64,
) -> u64 {
    let ns = idle_ns();
    std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    let start = idle_start();
    let open = if start != 0 && now > start {
        now - start
    } else {
        0
    };
    ns + open
}

/// The loader's per-interval work: one util sample per CPU, the per-LLC sum, SIS_UTIL's
/// depth (update_idle_cpu_scan, done here because sched_ext tasks are not in the fair
/// class's load balance), written to the BPF side's cpu_ctxs and llc_ctxs (`update`). The
/// step itself (`step`: idle totals in, utils and depths out) is the one `shadow` feeds
/// with the idle time it traces beside the kernel's wake-ups (src/tools/shadow_depth.rs).
pub struct UtilUpdate {
    /// per LLC: its CPUs
    llcs: Vec<Vec<usize>>,
    filters: Vec<UtilFilter>,
    prev_idle: Vec<u64>,
    prev_sample: u64,
    imbalance_pct: u64,
    /// the last step's util per CPU, and per LLC (util_sum, depth)
    util: Vec<u64>,
    llc_out: Vec<(u64, u64)>,
}

impl UtilUpdate {
    pub fn new(llcs: Vec<Vec<usize>>, nr_cpu_ids: usize, imbalance_pct: u64) -> Self {
        let nr_llcs = llcs.len();
        UtilUpdate {
            llcs,
            filters: vec![UtilFilter::default(); nr_cpu_ids],
            prev_idle: vec![0; nr_cpu_ids],
            prev_sample: 0,
            imbalance_pct,
            util: vec![0; nr_cpu_ids],
            llc_out: vec![(0, 0); nr_llcs],
        }
    }

    /// One sample at `now` (CLOCK_MONOTONIC ns, the clock of bpf_ktime_get_ns()) from each
    /// CPU's idle time up to `now` (`idle_total(cpu)`, ns): each CPU's util and
    /// each LLC's util sum and depth by `rules`, with SIS_FIT from its row of `fit`
    /// (sis_fit::fit_table) (`llcs()`). False for the first sample, which only sets the
    /// baseline (nothing computed).
    pub fn step(
        &mut self,
        rules: DepthRules,
        now: u64,
        fit: &[[Option<u64>; crate::sched::sis_fit::BUCKETS]],
        mut idle_total: impl FnMut(usize) -> u64,
    ) -> bool {
        let period = now.saturating_sub(self.prev_sample);
        let first = self.prev_sample == 0;
        self.prev_sample = now;

        for (l, cpus) in self.llcs.iter().enumerate() {
            let mut sum = 0u64;
            for &cpu in cpus {
                let total = idle_total(cpu);
                let d_idle = total.saturating_sub(self.prev_idle[cpu]).min(period);
                self.prev_idle[cpu] = total;
                if first {
                    continue;
                }
                let util = self.filters[cpu].update(period - d_idle, period);
                self.util[cpu] = util;
                sum += util;
            }
            if first {
                continue;
            }
            let depth = rules.depth(sum, cpus.len() as u64, self.imbalance_pct, fit.get(l));
            self.llc_out[l] = (sum, depth);
        }
        !first
    }

    /// The last step's (util_sum, depth) of each LLC.
    pub fn llcs(&self) -> &[(u64, u64)] {
        &self.llc_out
    }

    /// One sample at `now` (CLOCK_MONOTONIC ns) of the idle time BPF accounts in
    /// `cpu_ctxs` (idle_total()): `step`, then each CPU's util and each LLC's util sum and
    /// depth written to `cpu_ctxs` and `llc_ctxs`.
    pub fn update(
        &mut self,
        rules: DepthRules,
        now: u64,
        cpu_ctxs: &mut [crate::bpf_intf::cpu_ctx],
        llc_ctxs: &mut [crate::bpf_intf::llc_ctx],
        fit: &[[Option<u64>; crate::sched::sis_fit::BUCKETS]],
    ) {
        let read = |cpu: usize| {
            let cc = &cpu_ctxs[cpu];
            idle_total(
                // SAFETY: fields of the mmapped .bss, written concurrently by BPF
                || unsafe { std::ptr::read_volatile(&cc.idle_ns) },
                || unsafe { std::ptr::read_volatile(&cc.idle_start) },
                now,
            )
        };
        if !self.step(rules, now, fit, read) {
            return;
        }
        for cpus in &self.llcs {
            for &cpu in cpus {
                unsafe { std::ptr::write_volatile(&mut cpu_ctxs[cpu].util, self.util[cpu]) };
            }
        }
        for (lc, &(sum, depth)) in llc_ctxs.iter_mut().zip(&self.llc_out) {
            lc.util_sum = sum;
            // update_idle_cpu_scan() (commit 70fb5ccf2ebb, after Mel Gorman's review): "if
            // ((int)y != sd_share->nr_idle_scan) WRITE_ONCE(...)", a shared line is not
            // written when it would not change
            if unsafe { std::ptr::read_volatile(&lc.nr_idle_scan) } != depth {
                unsafe { std::ptr::write_volatile(&mut lc.nr_idle_scan, depth) };
            }
        }
    }
}

/// What ends the run loop's wait: the interval is due (with the CLOCK_MONOTONIC ns read
/// at the wake-up, for the update), or stats requests are pending.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    Interval(u64),
    Requests(usize),
}

/// The run loop's wait (scheduler.rs `run()`): the thread sleeps until the next interval,
/// then answers the stats requests that came meanwhile before the interval's update. It
/// never blocks on a channel: crossbeam's blocking receives (`recv_timeout`, the wait this
/// replaces, and `recv`) spin and call sched_yield() before they sleep, every call. At 50
/// intervals a second that was the loader's whole CPU use: 48.8 % of one CPU idle and
/// 77.5 % under hackbench in an 8-CPU TCG guest (docs/results/guest-user-2026-11-27),
/// where each spin's `pause` hands the host thread to the other vCPUs. Here: one sleep, one
/// clock read and one non-blocking look at the channel per interval. An answer waits for
/// the next interval at most (20 ms by default).
pub struct IntervalWait {
    interval_ns: u64,
    /// the next interval's deadline, CLOCK_MONOTONIC ns (0: at once)
    next: u64,
    requests: Option<crossbeam::channel::Receiver<()>>,
}

impl IntervalWait {
    /// Every `interval`; stats requests from `requests` (the stats server's channel).
    pub fn new(interval: Duration, requests: Option<crossbeam::channel::Receiver<()>>) -> Self {
        IntervalWait {
            interval_ns: interval.as_nanos().max(1) as u64,
            next: 0,
            requests,
        }
    }

    /// The next interval's deadline, CLOCK_MONOTONIC ns (0 before the first wait).
    pub fn deadline(&self) -> u64 {
        self.next
    }

    /// Pending requests first, then the interval: sleep until it is due. The next deadline
    /// is one interval after the last; after a late wake-up (more than an interval late),
    /// one interval after it, without catching up.
    pub fn wait(&mut self, clock: &mut dyn FnMut() -> u64) -> Wake {
        loop {
            let n = self.requests.as_ref().map_or(0, |r| r.try_iter().count());
            if n > 0 {
                return Wake::Requests(n);
            }
            let now = clock();
            if self.due(now) {
                return Wake::Interval(now);
            }
            std::thread::sleep(Duration::from_nanos(self.next - now));
        }
    }

    /// Whether the interval is due at `now` (CLOCK_MONOTONIC ns), without sleeping; when
    /// it is, the next deadline is set as `wait` sets it (`shadow`'s poll loop samples at
    /// the loader's cadence with it).
    pub fn due(&mut self, now: u64) -> bool {
        if now < self.next {
            return false;
        }
        self.next = if self.next == 0 || now - self.next >= self.interval_ns {
            now + self.interval_ns
        } else {
            self.next + self.interval_ns
        };
        true
    }
}

/// The verifier's work per program (veristat's verified_insns): `name=N ...`, so that a
/// change that makes the wake path harder to verify shows in the log and in the VM tests.
pub fn verified_insns(skel: &BpfSkel<'_>) -> String {
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

/// The kernel's BPF run-time statistics (`--prog-stats`), on while this is held: the fd of
/// BPF_ENABLE_STATS(BPF_STATS_RUN_TIME). The kernel counts while any such fd is open, so
/// dropping it (or the process ending) restores the state before, with nothing written to
/// kernel.bpf_stats_enabled.
pub struct ProgStats {
    _fd: std::os::fd::OwnedFd,
}

impl ProgStats {
    pub fn enable() -> Result<Self> {
        use std::os::fd::FromRawFd;
        let fd = unsafe {
            libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
        };
        if fd < 0 {
            anyhow::bail!(
                "--prog-stats: the kernel refused BPF_ENABLE_STATS (run time): {} (it needs root \
                 (CAP_SYS_ADMIN) and Linux 5.8 or later)",
                std::io::Error::from_raw_os_error(-fd)
            );
        }
        Ok(Self {
            _fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
        })
    }
}

/// Each struct_ops program's cumulative (name without `sisutil_`, run_cnt, run_time_ns) as
/// the kernel reports them (bpf_prog_get_info_by_fd); a program whose info cannot be read is
/// left out.
pub fn prog_run_stats(skel: &BpfSkel<'_>) -> Vec<(String, u64, u64)> {
    use libbpf_rs::libbpf_sys as sys;
    use libbpf_rs::skel::Skel;
    use std::os::fd::{AsFd, AsRawFd};
    skel.object()
        .progs()
        .filter_map(|p| {
            let mut info = sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            let ret =
                unsafe { sys::bpf_prog_get_info_by_fd(p.as_fd().as_raw_fd(), &mut info, &mut len) };
            if ret != 0 || info.type_ != sys::BPF_PROG_TYPE_STRUCT_OPS {
                return None;
            }
            let name = p.name().to_string_lossy();
            let name = name.strip_prefix("sisutil_").unwrap_or(&name).to_string();
            Some((name, info.run_cnt, info.run_time_ns))
        })
        .collect()
}

pub fn pin_features(skel: &mut BpfSkel<'_>) -> Result<()> {
    // made if missing, checked and chmod 0700 through its fd (no symlink followed)
    let _dir = features::prepare_pin_dir()?;
    // a pin left by an instance that was killed
    let _ = std::fs::remove_file(features::PIN_PATH);
    skel.maps
        .sis_features
        .pin(features::PIN_PATH)
        .with_context(|| format!("pinning {}", features::PIN_PATH))?;
    std::fs::set_permissions(features::PIN_PATH, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_intf::{cpu_ctx, llc_ctx};
    use std::cell::RefCell;

    /// Every interleaving of the loader's two reads with BPF's close of a period (idle_exit
    /// in idle.bpf.h: clear idle_start, then add the period to idle_ns), for a CPU idle
    /// since 1_000 with 500 of earlier idle time, closed at 5_000, read at now = 6_000: the
    /// total is the open view (500 + 5_000), the closed one (500 + 4_000) or the one not
    /// yet added (500), never the period counted twice (500 + 4_000 + 5_000).
    /// --prog-stats' switch: as root the kernel gives the fd, and kernel.bpf_stats_enabled
    /// is neither written nor changed, while it is held or after (the sysctl shows only its
    /// own writes; the fd counts on the kernel's static key, dropped with it). The counting
    /// itself is shown in a guest (docs/results/prog-stats-2026-11-27). Without root, one
    /// clear line, not a panic.
    #[test]
    fn prog_stats_on_while_held_and_restored() {
        const SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";
        let read = || std::fs::read_to_string(SYSCTL).map(|s| s.trim().to_string());
        let before = read();
        match ProgStats::enable() {
            Ok(held) => {
                assert_eq!(read().ok(), before.as_ref().ok().cloned());
                drop(held);
                assert_eq!(read().ok(), before.ok());
            }
            Err(e) => {
                assert!(unsafe { libc::geteuid() } != 0, "refused as root: {e:#}");
                let msg = format!("{e:#}");
                assert!(
                    msg.starts_with("--prog-stats: the kernel refused BPF_ENABLE_STATS")
                        && !msg.contains('\n'),
                    "{msg}"
                );
            }
        }
    }

    /// Refused (here: a thread without CAP_SYS_ADMIN in its effective set, as a non-root
    /// user or a container would be): the one clear line, not a panic.
    #[test]
    fn prog_stats_refused_is_one_line() {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const CAP_SYS_ADMIN: u32 = 21;
        // capabilities are per thread: only this one loses it
        let msg = std::thread::spawn(|| {
            let mut h = Header {
                version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
                pid: 0,
            };
            let mut d = [Data::default(); 2];
            unsafe {
                assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
                d[0].effective &= !(1 << CAP_SYS_ADMIN);
                assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
            }
            ProgStats::enable().err().map(|e| format!("{e:#}"))
        })
        .join()
        .unwrap();
        let msg = msg.expect("BPF_ENABLE_STATS granted without CAP_SYS_ADMIN");
        assert!(
            msg.starts_with("--prog-stats: the kernel refused BPF_ENABLE_STATS (run time): ")
                && msg.contains("Operation not permitted")
                && !msg.contains('\n'),
            "{msg}"
        );
    }

    #[test]
    fn idle_total_never_counts_a_period_twice() {
        // the clear lands before read p1, the add before read p2 (2: after both reads)
        for p1 in 0..=2 {
            for p2 in p1..=2 {
                let cpu = RefCell::new((500u64, 1_000u64, 0usize));
                let read = |field: usize| {
                    let mut c = cpu.borrow_mut();
                    if c.2 == p1 {
                        c.1 = 0;
                    }
                    if c.2 == p2 {
                        c.0 = 4_500;
                    }
                    c.2 += 1;
                    if field == 0 {
                        c.0
                    } else {
                        c.1
                    }
                };
                let t = idle_total(|| read(0), || read(1), 6_000);
                assert!(
                    [5_500, 4_500, 500].contains(&t),
                    "clear before read {p1}, add before read {p2}: {t}"
                );
            }
        }
        // no writer: the open period counted; busy: idle_ns alone
        assert_eq!(idle_total(|| 500, || 1_000, 6_000), 5_500);
        assert_eq!(idle_total(|| 500, || 0, 6_000), 500);
        assert_eq!(idle_total(|| 500, || 7_000, 6_000), 500);
    }

    const S: u64 = 1_000_000_000;

    /// The run loop's wait on a clock the test moves: the first call is an interval at
    /// once, then one every interval from the last deadline (a late wake-up within an
    /// interval keeps the period, one later than that restarts it); pending requests come
    /// first, all of them counted, and only once.
    #[test]
    fn interval_wait_deadlines_and_requests() {
        use std::cell::Cell;
        let t = Cell::new(5 * S);
        let mut clock = || t.get();
        let (tx, rx) = crossbeam::channel::unbounded();
        let mut w = IntervalWait::new(Duration::from_nanos(20), Some(rx));
        assert_eq!(w.wait(&mut clock), Wake::Interval(5 * S));
        assert_eq!(w.deadline(), 5 * S + 20);
        t.set(5 * S + 27); // 7 late: the next is due at 40, not 47
        assert_eq!(w.wait(&mut clock), Wake::Interval(5 * S + 27));
        assert_eq!(w.deadline(), 5 * S + 40);
        t.set(5 * S + 40);
        assert_eq!(w.wait(&mut clock), Wake::Interval(5 * S + 40));
        t.set(5 * S + 100); // more than an interval late: due again at 120
        assert_eq!(w.wait(&mut clock), Wake::Interval(5 * S + 100));
        assert_eq!(w.deadline(), 5 * S + 120);
        tx.send(()).unwrap();
        tx.send(()).unwrap();
        t.set(5 * S + 120);
        assert_eq!(w.wait(&mut clock), Wake::Requests(2));
        assert_eq!(w.wait(&mut clock), Wake::Interval(5 * S + 120));

        // a real clock: a request sent from another thread during the sleep is seen when the
        // sleep ends (the next interval at the latest), before that interval. Margin: the
        // thread sends 20 ms into a 1 s interval, so it has 980 ms to be scheduled (with a
        // 30 ms interval and no delay this failed once at host load 3.8: the sender ran
        // after the deadline and the interval came first)
        let (tx, rx) = crossbeam::channel::unbounded();
        let mut w = IntervalWait::new(Duration::from_millis(1000), Some(rx));
        let mut clock = crate::sched::clock::monotonic_ns;
        assert!(matches!(w.wait(&mut clock), Wake::Interval(_)));
        let due = w.deadline();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(()).unwrap()
        });
        assert_eq!(w.wait(&mut clock), Wake::Requests(1));
        assert!(matches!(w.wait(&mut clock), Wake::Interval(t) if t >= due));
    }

    /// UtilUpdate on hand-worked samples: each CPU's busy time from the idle time BPF
    /// accounts (closed periods in idle_ns, an open one from idle_start), through the
    /// kernel's PELT (UtilFilter: its arithmetic is sched::pelt's tests'), summed per LLC,
    /// and SIS_UTIL's depth of that sum written.
    #[test]
    fn util_update_from_idle_time() {
        use crate::sched::pelt::HALF_LIFE_NS;
        use crate::sched::sis_util_depth::UtilFilter;
        // SAFETY: plain-integer repr(C) structs of intf.h: all zeroes is their initial state
        let mut cpus: Vec<cpu_ctx> = vec![unsafe { std::mem::zeroed() }; 6];
        let mut llcs: Vec<llc_ctx> = vec![unsafe { std::mem::zeroed() }; 2];
        for l in llcs.iter_mut() {
            l.nr_idle_scan = 99;
        }
        let mut u = UtilUpdate::new(vec![vec![0, 1, 2, 3], vec![4, 5]], 6, 117);
        // CPU 3 has been idle since 0.5 s before the first sample
        cpus[3].idle_start = 9 * S + S / 2;
        u.update(DepthRules::default(), 10 * S, &mut cpus, &mut llcs, &[]);
        // the first sample only sets the baseline
        assert!(cpus.iter().all(|c| c.util == 0));
        assert_eq!((llcs[0].nr_idle_scan, llcs[1].nr_idle_scan), (99, 99));

        // one second (30 half-lives: the filter's past is gone): CPU 0 idle 750 ms, CPU 1
        // never, CPU 2 all of it, CPU 3 still in its open period, CPUs 4 and 5 busy
        cpus[0].idle_ns += 3 * S / 4;
        cpus[2].idle_ns += S;
        u.update(DepthRules::default(), 11 * S, &mut cpus, &mut llcs, &[]);
        let busy = [S / 4, S, 0, 0, S, S];
        let mut f = [UtilFilter::default(); 6];
        let want: Vec<u64> = f
            .iter_mut()
            .zip(busy)
            .map(|(f, b)| f.update(b, S))
            .collect();
        let util: Vec<u64> = cpus.iter().map(|c| c.util).collect();
        assert_eq!(util, want);
        // a quarter and whole CPUs, as PELT has them
        assert!(util[0].abs_diff(256) <= 1 && util[1] >= 1020, "{util:?}");
        let sum0 = want[..4].iter().sum::<u64>();
        assert_eq!(
            (llcs[0].util_sum, llcs[1].util_sum),
            (sum0, want[4] + want[5])
        );
        // nr_idle_scan of ~1280 of 4096: x' = 320, y = 1024 - 320^2 * 117^2 / (10000 *
        // 1024) = 888, nr = 4 * 888 / 1024 = 3; LLC 1 is full: 0
        let d0 = crate::sched::sis_util_depth::scan_depth(sum0, 4, 117, false);
        assert_eq!(d0, 3);
        assert_eq!((llcs[0].nr_idle_scan, llcs[1].nr_idle_scan), (d0, 0));

        // one half-life: CPUs 1 and 2 idle all of it, CPU 0 busy, CPU 3's period closed at
        // its start (counted once: it was open at the last sample), so busy: each util
        // moves half way to the period's (256 -> 640, 1024 -> 512, 0 -> 0, 0 -> 512)
        cpus[1].idle_ns += HALF_LIFE_NS;
        cpus[2].idle_ns += HALF_LIFE_NS;
        cpus[3].idle_ns += 11 * S - cpus[3].idle_start;
        cpus[3].idle_start = 0;
        u.update(
            DepthRules::default(),
            11 * S + HALF_LIFE_NS,
            &mut cpus,
            &mut llcs,
            &[],
        );
        let busy = [HALF_LIFE_NS, 0, 0, HALF_LIFE_NS];
        let want: Vec<u64> = f[..4]
            .iter_mut()
            .zip(busy)
            .map(|(f, b)| f.update(b, HALF_LIFE_NS))
            .collect();
        let util: Vec<u64> = cpus.iter().map(|c| c.util).collect();
        assert_eq!(util[..4], want[..]);
        for (u, half) in util.iter().zip([640, 512, 0, 512]) {
            assert!(u.abs_diff(half) <= 3, "{util:?}");
        }
        assert_eq!(llcs[0].util_sum, want.iter().sum::<u64>());
    }
}
