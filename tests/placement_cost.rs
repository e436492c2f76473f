// SPDX-License-Identifier: GPL-2.0-only
//! `scx_sisutil placement-cost` as a user runs it (root, bpf(); no sched_ext): the JSON is
//! complete, bad input gives one line and a non-zero exit. No timing is asserted.

use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_scx_sisutil"))
        .arg("placement-cost")
        .args(args)
        .output()
        .expect("running scx_sisutil")
}

#[test]
fn placement_cost_json_complete() {
    let o = run(&[
        "--json",
        "--llc-sizes",
        "8,16",
        "--busy",
        "0,100",
        "--runs",
        "2",
        "--placements",
        "200",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let rows = rows.as_array().expect("a list");
    // the default policies: vanilla, patched, unbounded, and each patch's feature alone
    let policies: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    for p in [
        "vanilla",
        "patched",
        "unbounded",
        "vanilla+SIS_UTIL",
        "vanilla+WA_IDLE_PREV",
    ] {
        assert!(policies.contains(p), "no {p} in {policies:?}");
    }
    assert_eq!(rows.len(), policies.len() * 2 * 2);
    for r in rows {
        for k in [
            "policy",
            "features",
            "llc_weight",
            "busy_pct",
            "ns_per_placement",
            "ns_p25",
            "ns_p75",
            "ns_min",
            "ns_max",
            "ns_harness",
            "cpus_examined",
            "scanned",
            "kick_scanned",
            "direct_pct",
            "runs",
            "nr_idle_scan",
            "idle_cpus",
        ] {
            assert!(r.get(k).is_some_and(|v| !v.is_null()), "{k} missing in {r}");
        }
        assert_eq!(r["runs"], 2);
        let ns = r["ns_per_placement"].as_f64().unwrap();
        assert!(ns > 0.0 && r["ns_p25"].as_f64().unwrap() <= r["ns_p75"].as_f64().unwrap());
        assert!(r["cpus_examined"].as_f64().unwrap() >= 1.0);
    }
    // progress went to stderr, not into the JSON
    assert!(String::from_utf8_lossy(&o.stderr).contains("placement-cost: ["));
}

#[test]
fn placement_cost_loader_json() {
    let o = run(&["--loader", "--json", "--runs", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(r["cpus"], 256);
    assert_eq!(r["intervals"], 300);
    for k in [
        "us_per_interval",
        "us_p25",
        "us_p75",
        "cpu_pct",
        "interval_ms",
        "llc_weight",
    ] {
        assert!(r.get(k).is_some_and(|v| !v.is_null()), "{k} missing in {r}");
    }
}

#[test]
fn placement_cost_bad_input() {
    for args in [
        &["--busy", "101"][..],
        &["--llc-sizes", "1"],
        &["--llc-sizes", "600"],
        &["--llc-sizes", "9", "--smt"],
        &["--policies", "fastest"],
        &["--policies", "vanilla+NO_SUCH"],
        &["--llc-sizes", "8,x"],
        &["--placements", "5"],
        &["--plot", ""],
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
    }
}
