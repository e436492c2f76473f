// SPDX-License-Identifier: GPL-2.0-only
// docs/results/guest-user-2026-11-27: the loader wait before (crossbeam recv_timeout, as in
// scheduler.rs run() before commit d461535) and after (park_timeout to a deadline), and a
// 20 ms sleep loop, each 250 intervals of 20 ms: the thread CPU time per interval. A scratch
// crate (crossbeam-channel =0.5.17, libc); `wb 250`.
use std::time::{Duration, Instant};
fn tcpu() -> u64 { let mut t = libc::timespec{tv_sec:0,tv_nsec:0}; unsafe{libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID,&mut t)}; t.tv_sec as u64*1_000_000_000+t.tv_nsec as u64 }
fn mono() -> u64 { let mut t = libc::timespec{tv_sec:0,tv_nsec:0}; unsafe{libc::clock_gettime(libc::CLOCK_MONOTONIC,&mut t)}; t.tv_sec as u64*1_000_000_000+t.tv_nsec as u64 }
fn main() {
    let n: u32 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(250);
    let iv = Duration::from_millis(20);
    let (_tx, rx) = crossbeam_channel::unbounded::<()>();
    // old: scheduler.rs run() before d461535
    let c0 = tcpu(); let t0 = Instant::now();
    let mut next = Instant::now();
    for _ in 0..n {
        if Instant::now() >= next { next += iv; if next < Instant::now() { next = Instant::now() + iv; } }
        let wait = next.saturating_duration_since(Instant::now());
        let _ = rx.recv_timeout(wait);
    }
    let (c1, t1) = (tcpu(), t0.elapsed());
    // new: park_timeout to an ns deadline
    let c2 = tcpu(); let t2 = Instant::now();
    let mut next = 0u64;
    for _ in 0..n {
        loop { let now = mono(); if now >= next { next = if next == 0 { now + 20_000_000 } else { next + 20_000_000 }; break; } std::thread::park_timeout(Duration::from_nanos(next - now)); }
    }
    let (c3, t3) = (tcpu(), t2.elapsed());
    let c4 = tcpu(); let t4 = Instant::now();
    for _ in 0..n { std::thread::sleep(iv); }
    let (c5, t5) = (tcpu(), t4.elapsed());
    let f = |c: u64, t: Duration| format!("{:.2} us CPU/interval, {:.4} % of one CPU over {:.1} s", c as f64/1e3/n as f64, 100.0*c as f64/t.as_nanos() as f64, t.as_secs_f64());
    println!("old recv_timeout: {}", f(c1-c0, t1));
    println!("new park_timeout: {}", f(c3-c2, t3));
    println!("control sleep 20 ms: {}", f(c5-c4, t5));
}
