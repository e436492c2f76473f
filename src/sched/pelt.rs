// SPDX-License-Identifier: GPL-2.0-only
//! The kernel's PELT arithmetic (kernel/sched/pelt.c, sched-pelt.h) for a CPU's util_avg,
//! in the kernel's integers: 1024-unit periods of the kernel's 1024 ns "microseconds"
//! (`delta >>= 10`, then `periods = delta / 1024`: 1,048,576 ns), y^32 = 1/2 through
//! `runnable_avg_yN_inv`, `decay_load()`, `__accumulate_pelt_segments()`, the
//! `period_contrib` carry and util_avg = util_sum / (LOAD_AVG_MAX - 1024 + period_contrib).
//!
//! The loader feeds it what it has, a CPU's busy time per sampling interval, not the
//! kernel's per-switch updates: the one approximation (`Pelt::update`) is that the busy
//! time is spread evenly over the interval, i.e. the kernel's `running` weighted by the
//! busy fraction. A constantly busy or idle CPU gets the kernel's values exactly.

/// LOAD_AVG_PERIOD: y^32 = 1/2.
pub const LOAD_AVG_PERIOD: u64 = 32;
/// LOAD_AVG_MAX: the series' converged maximum in the kernel's truncating arithmetic
/// (checked by `load_avg_max_is_the_converged_series`).
pub const LOAD_AVG_MAX: u64 = 47742;
/// One PELT period in ns: 1024 units of 1024 ns.
pub const PELT_PERIOD_NS: u64 = 1024 * 1024;
/// The half-life in ns: LOAD_AVG_PERIOD periods (33.55 ms, not 32).
pub const HALF_LIFE_NS: u64 = LOAD_AVG_PERIOD * PELT_PERIOD_NS;

/// runnable_avg_yN_inv[n] = (2^32 - 1) * y^n, y = 2^(-1/32) (sched-pelt.h's generator;
/// `yn_inv_table_is_the_generators`).
const RUNNABLE_AVG_YN_INV: [u32; LOAD_AVG_PERIOD as usize] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796,
    0xd744fcc9, 0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46,
    0xb504f333, 0xb123f581, 0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9,
    0x9837f050, 0x94f4efa8, 0x91c3d373, 0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// decay_load(): val * y^n, as the kernel computes it (0 past 63 half-lives; whole
/// half-lives by shifting; the rest by the table, mul_u64_u32_shr(.., 32)).
pub fn decay_load(val: u64, n: u64) -> u64 {
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let (mut val, mut n) = (val, n);
    if n >= LOAD_AVG_PERIOD {
        val >>= n / LOAD_AVG_PERIOD;
        n %= LOAD_AVG_PERIOD;
    }
    ((u128::from(val) * u128::from(RUNNABLE_AVG_YN_INV[n as usize])) >> 32) as u64
}

/// __accumulate_pelt_segments(): the contribution of d1 (the rest of the first period,
/// decayed over `periods`), the whole periods between (c2 = LOAD_AVG_MAX -
/// decay_load(LOAD_AVG_MAX, periods) - 1024) and d3 (the new partial period, y^0).
fn accumulate_pelt_segments(periods: u64, d1: u64, d3: u64) -> u64 {
    let c1 = decay_load(d1, periods);
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - 1024;
    c1 + c2 + d3
}

/// A CPU's util_avg state, as the kernel's struct sched_avg keeps it (util_sum,
/// period_contrib), plus the ns below the kernel's 1024 ns unit carried to the next update
/// (the kernel's last_update_time advances by whole units: `+= delta << 10`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pelt {
    util_sum: u64,
    period_contrib: u64,
    rem_ns: u64,
}

impl Pelt {
    /// ___update_load_sum() + ___update_load_avg() over `period_ns` in which the CPU ran
    /// `busy_ns` (clamped to the period), spread evenly: accumulate_sum()'s contribution
    /// times busy / period is added to util_sum (the kernel adds it whole while running,
    /// nothing while idle). Returns util_avg (0..=1024).
    pub fn update(&mut self, busy_ns: u64, period_ns: u64) -> u64 {
        if period_ns == 0 {
            return self.util_avg();
        }
        let busy = busy_ns.min(period_ns);
        let total = self.rem_ns + period_ns;
        let delta = total >> 10;
        self.rem_ns = total & 1023;
        if delta == 0 {
            return self.util_avg();
        }
        // accumulate_sum()
        let mut contrib = delta;
        let d = delta + self.period_contrib;
        let periods = d / 1024;
        if periods > 0 {
            self.util_sum = decay_load(self.util_sum, periods);
            let d3 = d % 1024;
            contrib = accumulate_pelt_segments(periods, 1024 - self.period_contrib, d3);
            self.period_contrib = d3;
        } else {
            self.period_contrib = d;
        }
        // `sa->util_sum += contrib << SCHED_CAPACITY_SHIFT` while running, by the busy share
        self.util_sum +=
            ((u128::from(contrib) << 10) * u128::from(busy) / u128::from(period_ns)) as u64;
        self.util_avg()
    }

    /// util_avg = util_sum / get_pelt_divider() (LOAD_AVG_MAX - 1024 + period_contrib).
    pub fn util_avg(&self) -> u64 {
        (self.util_sum / (LOAD_AVG_MAX - 1024 + self.period_contrib)).min(1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is the generator's: (2^32 - 1) * y^n with y^32 = 1/2, truncated.
    #[test]
    fn yn_inv_table_is_the_generators() {
        let y = 0.5f64.powf(1.0 / 32.0);
        for (n, &v) in RUNNABLE_AVG_YN_INV.iter().enumerate() {
            let want = (f64::from(u32::MAX) * y.powi(n as i32)) as u32;
            assert!(v.abs_diff(want) <= 1, "n {n}: {v:#x} against {want:#x}");
        }
    }

    /// LOAD_AVG_MAX is where max = (max * y_inv >> 32) + 1024 stops growing.
    #[test]
    fn load_avg_max_is_the_converged_series() {
        let (mut max, mut last) = (0u64, u64::MAX);
        while max != last {
            last = max;
            max = ((max * u64::from(RUNNABLE_AVG_YN_INV[1])) >> 32) + 1024;
        }
        assert_eq!(max, LOAD_AVG_MAX);
    }

    /// decay_load(): one half-life halves (less one), whole half-lives shift, 63 half-lives and more
    /// give 0, and a hand-worked period: 1024 * y = 1002.
    #[test]
    fn decay_load_as_the_kernel() {
        // (y^0 is 0xffffffff / 2^32: a whole half-life's shift loses one more unit)
        assert_eq!(
            decay_load(LOAD_AVG_MAX, LOAD_AVG_PERIOD),
            LOAD_AVG_MAX / 2 - 1
        );
        assert_eq!(
            decay_load(1 << 40, 3 * LOAD_AVG_PERIOD),
            (1 << 37) - (1 << 5)
        );
        assert_eq!(decay_load(1024, 1), 1002);
        assert_eq!(decay_load(1 << 63, LOAD_AVG_PERIOD * 62), 1);
        assert_eq!(decay_load(u64::MAX, LOAD_AVG_PERIOD * 63 + 1), 0);
        assert_eq!(decay_load(12345, 0), 12344);
    }

    /// A CPU busy from idle: one period gives util_avg 21 (contrib 1002 of a divider
    /// 46718: 1002 * 1024 / 46718); one half-life ~half; idle for a half-life halves it;
    /// always busy tends to 1024, never above; the same however the time is cut into
    /// updates (the kernel's sums do not depend on when it updates, up to truncation).
    #[test]
    fn pelt_step_response() {
        let mut p = Pelt::default();
        assert_eq!(
            p.update(PELT_PERIOD_NS, PELT_PERIOD_NS),
            1002 * 1024 / 46718
        );
        let mut p = Pelt::default();
        let u = p.update(HALF_LIFE_NS, HALF_LIFE_NS);
        assert!(u.abs_diff(512) <= 2, "{u}");
        let d = p.update(0, HALF_LIFE_NS);
        assert!(d.abs_diff(u / 2) <= 2, "{d} against {u}");
        let full = p.update(u64::MAX, 1000 * HALF_LIFE_NS);
        assert!((1020..=1024).contains(&full), "{full}");
        for step in [1_000_000, 20_000_000, 3_333_333] {
            let mut q = Pelt::default();
            let mut t = 0;
            while t < 2 * HALF_LIFE_NS {
                let s = step.min(2 * HALF_LIFE_NS - t);
                q.update(s, s);
                t += s;
            }
            let mut one = Pelt::default();
            let want = one.update(2 * HALF_LIFE_NS, 2 * HALF_LIFE_NS);
            assert!(
                q.util_avg().abs_diff(want) <= 3,
                "step {step}: {} against {want}",
                q.util_avg()
            );
        }
    }

    /// The busy share: half the time busy, spread evenly, converges to half of 1024; no
    /// busy time leaves util_sum decaying only; a 0 period changes nothing; busy time over
    /// the period counts as the period.
    #[test]
    fn pelt_busy_share() {
        let mut h = Pelt::default();
        for _ in 0..1000 {
            h.update(10_000_000, 20_000_000);
        }
        assert!(h.util_avg().abs_diff(512) <= 1, "{}", h.util_avg());
        let before = h;
        assert_eq!(h.update(5, 0), before.util_avg());
        assert_eq!(h, before);
        let (mut a, mut b) = (h, h);
        assert_eq!(
            a.update(50_000_000, 20_000_000),
            b.update(20_000_000, 20_000_000)
        );
        let mut idle = h;
        let u = idle.update(0, HALF_LIFE_NS);
        assert!(u.abs_diff(256) <= 2, "{u}");
    }
}
