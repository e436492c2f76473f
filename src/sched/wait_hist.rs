// SPDX-License-Identifier: GPL-2.0-only
//! The wait histograms' arithmetic, shared by the monitor's wait figures and `latency`:
//! 4 buckets per octave of nanoseconds, as the BPF side fills them (wait_hist.bpf.h).

use crate::bpf_intf as bi;

pub const NR_BUCKETS: usize = bi::sis_consts_WAIT_NR_BUCKETS as usize;

/// Lowest value (ns) of bucket `i`: i < 4 -> i; else (4 + i % 4) << (i / 4 - 1).
/// A value >= 4 with highest set bit `msb` is in bucket 4 * (msb - 1) + its next two bits.
#[cfg_attr(not(test), allow(dead_code))]
pub fn bucket_lo(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let (msb, sub) = (i / 4 + 1, (i % 4) as u64);
    (((4 + sub) as u128) << (msb - 2)).min(u64::MAX as u128) as u64
}

/// One past the highest value of bucket `i`.
pub fn bucket_hi(i: usize) -> u64 {
    if i < 4 {
        return i as u64 + 1;
    }
    let (msb, sub) = (i / 4 + 1, (i % 4) as u64);
    (((5 + sub) as u128) << (msb - 2)).min(u64::MAX as u128) as u64
}

/// The bucket of `ns`, as the BPF side computes it.
#[cfg_attr(not(test), allow(dead_code))]
pub fn bucket_of(ns: u64) -> usize {
    if ns < 4 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros() as usize;
    ((msb - 1) * 4 + ((ns >> (msb - 2)) & 3) as usize).min(NR_BUCKETS - 1)
}

/// The q-quantile (0..=1) of a histogram, as the upper end of the bucket it falls in
/// (conservative: at most 25 % above the true value); 0 for an empty histogram.
pub fn quantile(b: &[u64], q: f64) -> u64 {
    let n: u64 = b.iter().sum();
    if n == 0 {
        return 0;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut acc = 0;
    for (i, c) in b.iter().enumerate() {
        acc += c;
        if acc >= rank {
            return bucket_hi(i) - 1;
        }
    }
    bucket_hi(b.len() - 1) - 1
}

/// Upper end of the highest non-empty bucket (0 when empty).
pub fn hist_max(b: &[u64]) -> u64 {
    b.iter()
        .rposition(|&c| c > 0)
        .map_or(0, |i| bucket_hi(i) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let mut prev_hi = 0;
        // the highest value, u64::MAX, is in bucket 251
        assert_eq!(bucket_of(u64::MAX), 251);
        for i in 0..=251 {
            assert_eq!(
                bucket_lo(i),
                prev_hi,
                "bucket {i} starts where {} ends",
                i.max(1) - 1
            );
            prev_hi = bucket_hi(i);
        }
        for ns in [
            0u64,
            1,
            3,
            4,
            5,
            7,
            8,
            1000,
            1023,
            1024,
            123_456_789,
            5_000_000_000,
        ] {
            let b = bucket_of(ns);
            assert!(
                bucket_lo(b) <= ns && ns < bucket_hi(b),
                "{ns} in bucket {b}"
            );
        }
    }

    #[test]
    fn quantiles_are_bucket_upper_ends() {
        let mut b = vec![0u64; NR_BUCKETS];
        // 99 waits of 1000 ns, one of 1_000_000 ns
        b[bucket_of(1000)] = 99;
        b[bucket_of(1_000_000)] = 1;
        let p50 = quantile(&b, 0.5);
        assert!((1000..1250).contains(&p50), "{p50}");
        assert_eq!(quantile(&b, 0.99), p50);
        let p999 = quantile(&b, 0.999);
        assert!((1_000_000..1_250_000).contains(&p999), "{p999}");
        assert_eq!(hist_max(&b), p999);
        assert_eq!(quantile(&[0; 8], 0.5), 0);
        assert_eq!(hist_max(&[0; 8]), 0);
    }

    /// The histograms Rust reads are intf.h's: sizes and the fields after the buckets.
    #[test]
    fn hist_structs_are_intf_h() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<bi::wait_hist>(), (NR_BUCKETS + 2) * 8);
        assert_eq!(offset_of!(bi::wait_hist, count), NR_BUCKETS * 8);
        assert_eq!(size_of::<bi::lat_hist>(), (NR_BUCKETS + 4) * 8);
        assert_eq!(offset_of!(bi::lat_hist, max_pid), (NR_BUCKETS + 3) * 8);
        let mut b = vec![0u8; size_of::<bi::lat_hist>()];
        b[(NR_BUCKETS + 2) * 8..(NR_BUCKETS + 3) * 8].copy_from_slice(&7u64.to_ne_bytes());
        let h = crate::sched::bpf_maps::value_as::<bi::lat_hist>(&b).unwrap();
        assert_eq!((h.count, h.max_ns, h.max_pid), (0, 7, 0));
    }
}
