// SPDX-License-Identifier: GPL-2.0-only
//! Fairness under mixed nice: bounded waits for every task, measured with the wake-up
//! latency tracer (`scx_sisutil latency`), at >= 2 runnable tasks per CPU: on 8 CPUs in CI
//! (fair_hogs20_7), on 16 in tools/soak's scenarios.
//!
//!     cargo test --release --test fairness -- --test-threads=2            (CI: fair_hogs20_7)
//!     cargo test --release --test fairness -- --include-ignored           (all, as tools/soak does)
//!
//! Scenarios (tests/guest/fair-mixed.sh): `hogs20` nice -20 hogs + hackbench vs nice-0 tasks
//! including the loader; `bg19` nice 19 hogs vs a nice-0 latency workload; `pinned` two nice
//! -20 hogs pinned to each CPU vs nice-0 hackbench. Each asserts: attached throughout, clean
//! exit, the monitor's wait figures, and no wait (measured, or still pending at the end) over
//! WAIT_BOUND_MS at any nice level, each wait net of the time the guest itself stood still
//! inside it (the tracer's stall probe logs each stall's start and end, the tracer each long
//! wait's: `scx_sisutil latency --long-wait-ms`): a stall elsewhere in the run excuses no
//! wait, so a real starvation fails on any host. The latency table of each run is printed.
//!
//! SISUTIL_FAIR_SECS (default 20 for the CI variant, 40 or 120 for the ignored ones) sets how long
//! the full load runs once all of it is up, in guest seconds; the tracer's window covers the
//! load's start too and ends under the full load (fair-mixed.sh). Console logs: target/vm-logs/fair-NAME-console.log. The guest
//! runs through tests/common (the one VM runner).

mod common;
use common::{run_script, Vm};

/// One LLC of 16 CPUs, no SMT: the scenarios of tools/soak.
const SMP16: &str = "16,sockets=1,cores=16,threads=1";
/// One LLC of 8 CPUs, no SMT: CI's variant.
const SMP8: &str = "8,sockets=1,cores=8,threads=1";

/// The stated bound on any wait, in guest ms: a regression guard against starvation,
/// not a latency measurement (src/testing/vtime_model.rs checks the rules' own bound, ~0.47 s here,
/// without emulation). The scheduler's rules (docs/DESIGN.md, "Fairness and waits") bound
/// a task's queueing by the wait guard: it runs within 2 x 200 ms of clock progress plus
/// the queue ahead of it, whatever its weight. Under TCG the guest clock runs on while a
/// vCPU is not emulated: QEMU's single-threaded TCG runs one vCPU at a time and kicks it
/// every 100 ms, so with 16 busy vCPUs a vCPU can stand still for ~1.6 s of guest time,
/// more when the host is overloaded and QEMU's thread itself waits. Margin: the longest
/// waits of 8 scx_sisutil runs (hogs20 x 6 on 7.3.4 and 6.12, bg19, pinned) were 0.74 to
/// 4.03 s (the last at a host load of ~8 on 2 cores; docs/results/fairness-16cpu-2026-11-23),
/// so 8 s is 2x the worst seen; a starving scheduler is far above it: the same load under
/// EEVDF waits up to 29 s at nice 0, and the scheduler before the wait guard was ejected
/// after ~30 s. (The bound was 5 s, 1.24x the worst seen: no margin on a busier host.)
/// Since 2026-11-28 the guests run on the instruction clock (`tools/vm --clock instructions`,
/// QEMU's -icount): the guest's time is the instructions emulated, so a host that does not
/// run QEMU's thread stops the guest's clock with it, and the guest's waits no longer grow
/// with the host's load: the first run at shift 2 logged 0 stalls and a worst wait of 1.2 s
/// (fair_hogs20_7, host load 1-2.5); the stall probe and the net-of-stalls rule stay for
/// KVM guests, whose clock is the host's. On 8 CPUs (CI's variant since 2026-11-29) the first
/// run's longest wait was 1.66 s at nice 0 (0 stalls; 0.26 s at nice -20), 4.8x below the bound.
const WAIT_BOUND_MS: u32 = 8000;

fn secs(default: u32) -> u32 {
    std::env::var("SISUTIL_FAIR_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s: &u32| s >= 20)
        .unwrap_or(default)
}

fn fair(name: &str, kernel: &str, smp: &str, scen: &str, load_s: u32, args: &str) {
    let script = format!("fair-mixed.sh {scen} {load_s} {WAIT_BOUND_MS} sisutil {args}");
    // The hang guard, in QEMU's CPU seconds under TCG: twice the host clock's 300 + 3 x load
    // s, as the instruction clock (4 ns an instruction) gives ~0.6 guest s per CPU second
    // under this load (a passing run uses ~250-480 s). A starving scheduler fails on the
    // wait check, not on this guard: the script judges at nice -20 beside the tracer
    // (fair-mixed.sh), so the nice-0 tasks' starvation cannot starve the judge too (it
    // did at nice 0: tools/mutants --planted 1 ended on this guard, exit 124). Planted
    // fault 1 on 5bdf93d, 3 runs beside the proof loop: "waits over 8000 ms net of the
    // guest's stalls": nice 0 waited 11.0, 9.87 and 10.5 s (0 stalls).
    let vm = Vm::new(kernel, 2 * (300 + 3 * load_s))
        .smp(smp)
        .instruction_clock()
        .log_prefix("fair");
    let expected = [
        "monitor reports the scheduler's waits",
        "attached throughout the",
        "latency tracer ran across the load",
        "every nice level waited <=",
        "exit status after SIGINT = 0",
        "dmesg: no abnormal sched_ext disable",
    ];
    let o = run_script(name, vm, &script, &expected, &[]);
    let stdout = &o.stdout;
    // the features asked for with --features are on
    let on = stdout
        .lines()
        .find_map(|l| l.split_once("ok: features on: ").map(|(_, f)| f))
        .unwrap_or_else(|| panic!("{name}: no 'features on' line"));
    if let Some(want) = args
        .split_whitespace()
        .skip_while(|a| *a != "--features")
        .nth(1)
    {
        for f in want.split(',') {
            assert!(
                on.split_whitespace().any(|x| x == f),
                "{name}: {f} not on: {on}"
            );
        }
    }
    // The load's premise: the runnable tasks per CPU sampled during the load.
    let res = stdout
        .lines()
        .find_map(|l| l.strip_prefix("FAIR_RESULT "))
        .unwrap_or_else(|| panic!("{name}: no FAIR_RESULT line"));
    let field = |k: &str| {
        res.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name}: FAIR_RESULT without {k}: {res}"))
    };
    let num = |k: &str| -> f64 {
        field(k)
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {k} not a number: {res}"))
    };
    let (mean, median) = (num("runnable_per_cpu"), num("runnable_median_per_cpu"));
    println!(
        "==== fair {name}: runnable tasks per CPU during the load: median {median}, mean {mean} (min {}, max {} in all, {} samples)",
        field("runnable_min"),
        field("runnable_max"),
        field("runnable_samples")
    );
    // The premise, on the median of the samples: once started, the load's own CPU-bound
    // tasks alone are >= 2 per CPU (hogs20: 2 x ncpu nice -20 hogs + 4; bg19: 2 x ncpu;
    // pinned: 2 per CPU), hackbench's tasks and the sampler come on top. The samples start
    // once the hogs are up; the mean is not used (one sample taken while stress-ng was still
    // forking under TCG, 9 runnable on 16 CPUs beside 35-189, once pulled a mean to 1.79).
    // Below 2 the load did not run.
    assert!(
        median >= 2.0,
        "{name}: median {median} runnable tasks per CPU during the load, want >= 2: {res}"
    );
    // The tracer's report, checked again here: the load's nice levels were all seen.
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("LATENCY_JSON {scen} ")))
        .unwrap_or_else(|| panic!("{name}: no LATENCY_JSON line"));
    let rep: serde_json::Value = serde_json::from_str(json).expect("latency JSON");
    let level = |nice: i64| {
        rep["levels"]
            .as_array()
            .and_then(|a| a.iter().find(|l| l["nice"].as_i64() == Some(nice)))
            .cloned()
    };
    let want_nice: &[i64] = match scen {
        "bg19" => &[0, 19],
        _ => &[0, -20],
    };
    // The limit: each wait net of the guest's stalls inside it (a stall lengthens only the
    // waits it falls in), as the script checks it. Recomputed here from the tracer's lists:
    // every listed long wait's stall time is its overlap with the logged stalls.
    assert_eq!(
        o.figure_u64("wait_bound_ms"),
        u64::from(WAIT_BOUND_MS),
        "{name}: the script's bound is not WAIT_BOUND_MS"
    );
    let long = &rep["long"];
    let stalls: Vec<(u64, u64)> = long["stalls"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: the tracer logged no stall list: {long}"))
        .iter()
        .map(|s| (s[0].as_u64().unwrap_or(0), s[1].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(
        long["dropped"].as_u64(),
        Some(0),
        "{name}: the tracer lost long waits: {long}"
    );
    let bound_us = f64::from(WAIT_BOUND_MS) * 1000.0;
    let waits = long["waits"].as_array().cloned().unwrap_or_default();
    for w in &waits {
        let (s, e) = (
            w["start_ns"].as_u64().unwrap_or(0),
            w["end_ns"].as_u64().unwrap_or(0),
        );
        let stalled: u64 = stalls
            .iter()
            .map(|&(a, b)| e.min(b).saturating_sub(s.max(a)))
            .sum();
        let net = (e - s).saturating_sub(stalled) as f64 / 1000.0;
        assert!(
            (net - w["net_us"].as_f64().unwrap_or(f64::MAX)).abs() < 1.0,
            "{name}: the tracer's net wait {w} is not its length less its overlap with the stalls ({net} us)"
        );
    }
    let stall_ms = o.figure_u64("guest_stall_ms");
    println!(
        "==== fair {name}: guest stalls: {} ({stall_ms} ms in all, longest {} ms); waits of {} ms or more: {}",
        long["stall_count"], long["stall_max_ms"], long["long_wait_ms"], long["count"]
    );
    for w in waits.iter().take(3) {
        println!(
            "==== fair {name}: worst wait net of stalls: pid {} nice {}: {} us, {} us of it stalled, net {} us",
            w["pid"], w["nice"], w["wait_us"], w["stalled_us"], w["net_us"]
        );
    }
    for &n in want_nice {
        let l = level(n).unwrap_or_else(|| panic!("{name}: no wake-up at nice {n}"));
        let count = l["count"].as_u64().unwrap_or(0);
        let max = l["max_us"].as_f64().unwrap_or(f64::MAX);
        let net = l["net_max_us"].as_f64().unwrap_or(f64::MAX);
        assert!(count > 0, "{name}: nice {n}: no wake-up measured");
        assert!(
            net <= bound_us,
            "{name}: nice {n}: a wait of {net} us net of the guest's stalls inside it, over {WAIT_BOUND_MS} ms (max wait {max} us; {stall_ms} ms of stalls in the run)"
        );
        println!(
            "==== fair {name}: nice {n}: {count} wake-ups, p99 {} us, max {max} us, longest net of stalls {net} us (bound {WAIT_BOUND_MS} ms)",
            l["p99_us"]
        );
    }
}

// The variants: name, kernel, topology, scenario, default load length (s), and why a variant
// is left to tools/soak (`#[ignore]`). CI's one (fair_hogs20_7) runs 8 CPUs for 20 s: under
// the instruction clock a guest second costs the same host time whatever the vCPU count, and
// on 8 vCPUs each one emulates twice the instructions per guest second, so boot, attach and
// the fork of the hogs take fewer guest seconds: on the Intel host (2026-11-29), 16 CPUs for
// 40 s took 128 guest s and 395 host s alone, 8 CPUs for 20 s 90 guest s and 334 host s
// beside hotplug_7 (CI's other thread). The 16-CPU scenarios stay in tools/soak.
// fair_hogs20_6_12: on 6.12 under TCG, stopping the 32 nice -20 hogs after the 40 s load
// took ~370 s of guest time next to another guest (421 s, past the 420 s limit, in the full
// test run): too long and too close to the limit for CI.
macro_rules! fair_tests {
    ($($name:ident: $kernel:literal, $smp:ident, $scen:literal, $secs:literal $(, args = $args:literal)? $(, ignore = $why:literal)?;)*) => {$(
        #[test]
        $(#[ignore = $why])?
        fn $name() {
            fair(stringify!($name), $kernel, $smp, $scen, secs($secs), concat!("" $(, $args)?));
        }
    )*};
}

fair_tests! {
    fair_hogs20_7: "7", SMP8, "hogs20", 20;
    fair_hogs20_16cpu_7: "7", SMP16, "hogs20", 40, ignore = "CI's time: tools/soak";
    fair_hogs20_6_12: "6.12", SMP16, "hogs20", 40, ignore = "long on 6.12 under TCG: tools/soak";
    fair_bg19_7: "7", SMP16, "bg19", 120, ignore = "long: tools/soak";
    fair_bg19_6_12: "6.12", SMP16, "bg19", 120, ignore = "long: tools/soak";
    fair_pinned_7: "7", SMP16, "pinned", 120, ignore = "long: tools/soak";
    fair_pinned_6_12: "6.12", SMP16, "pinned", 120, ignore = "long: tools/soak";
    fair_hogs20_long_7: "7", SMP16, "hogs20", 120, ignore = "long: tools/soak";
    fair_hogs20_long_6_12: "6.12", SMP16, "hogs20", 120, ignore = "long: tools/soak";
    // LLC_SHARDS (off in every preset): 4 shards of 4 CPUs in the one 16-CPU LLC. Left to
    // tools/soak since 2026-11-29: CI's time on an Intel host (686 s of one core, alone);
    // CI keeps the feature's live switch under overload (vm shards_live_*) and its queue's
    // order on the host (src/testing/queue_test.rs).
    fair_hogs20_shards_7: "7", SMP16, "hogs20", 40, args = "--features LLC_SHARDS --shard-cpus 4",
        ignore = "CI's time: tools/soak";
    fair_hogs20_shards_6_12: "6.12", SMP16, "hogs20", 40, args = "--features LLC_SHARDS --shard-cpus 4",
        ignore = "long on 6.12 under TCG: tools/soak";
}
