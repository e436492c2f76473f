// SPDX-License-Identifier: GPL-2.0-only
//! CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns(): the loader's, the tools' and
//! `placement-cost --trace-test-runs`' lines (tests/placement_cost.rs includes this file to
//! read the same clock); and the process's CPU clock (the loader's own share in `monitor`).

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// This process's CPU time, all threads, ns: the utime+stime of /proc/self/stat before
/// their rounding to clock ticks (both are the kernel's sum_exec_runtime of the threads).
#[allow(dead_code)] // tests/placement_cost.rs includes this file and reads only the monotonic clock
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to fill
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
