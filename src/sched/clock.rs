// SPDX-License-Identifier: GPL-2.0-only
//! CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns(): the loader's, the tools' and
//! `placement-cost --trace-test-runs`' lines (tests/placement_cost.rs includes this file to
//! read the same clock).

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to fill
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
