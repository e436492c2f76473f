// SPDX-License-Identifier: GPL-2.0-only
//! CI check of tools/bench: `tools/bench --quick` boots the VM, runs netperf TCP_RR,
//! hackbench and schbench-lite at two loads under EEVDF, `--preset vanilla` and
//! `--preset patched` in one boot, checks its own output (tables present, numbers parse, no
//! configuration failed, every run has its wake-up latency and, under sched_ext, its
//! select_cpu/enqueue/dispatch BPF statistics) and exits non-zero otherwise. Here we also
//! check its files, and that the self-check fails on a defective run (a mutated raw log).
//! Needs root, qemu and a sched_ext kernel (tools/setup, tools/kernel): nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn bench_quick_produces_tables_and_csv() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = repo.join("target/bench/ci-quick");
    let _ = std::fs::remove_dir_all(&out);
    // cargo test has just built target/release/scx_sisutil (the bin target): no rebuild.
    let res = Command::new(repo.join("tools/bench"))
        .args(["--quick", "--no-build", "--out"])
        .arg(&out)
        .current_dir(&repo)
        .output()
        .expect("cannot run tools/bench");
    let stdout = String::from_utf8_lossy(&res.stdout);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(
        res.status.success(),
        "tools/bench --quick failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        res.status
    );
    assert!(
        stderr.contains("quick check passed"),
        "no self-check verdict:\n{stderr}"
    );

    let tables = std::fs::read_to_string(out.join("tables.txt")).expect("tables.txt");
    for needle in [
        "SIS efficiency: vanilla ",
        "SIS efficiency: patched ",
        "se_eff%\t",
        "tcp_rr: netperf.throughput",
        "hackbench-process-pipe: hackbench",
        "schbench: schbench.latency_90%_us",
        "baseline(std%)",
        "patched%(std%)",
        "wake-up latency (us)",
        "LLC scaling select_cpu",
        "==== verdicts ====",
    ] {
        assert!(
            tables.contains(needle),
            "tables.txt lacks '{needle}':\n{tables}"
        );
    }
    // The SIS table has a row per workload x load for the scheduler's configurations.
    let sis_rows = tables
        .lines()
        .filter(|l| {
            l.starts_with("TCP_RR") || l.starts_with("process-pipe") || l.starts_with("normal")
        })
        .count();
    assert!(
        sis_rows >= 2 * 6 + 6,
        "too few table rows ({sis_rows}):\n{tables}"
    );

    let csv = std::fs::read_to_string(out.join("runs.csv")).expect("runs.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("CSV header").split(',').collect();
    for col in [
        "config",
        "workload",
        "load",
        "value",
        "sel_ns_per_call",
        "enq_ns_per_call",
        "dsp_ns_per_call",
        "wake_p50_us",
        "wake_p99_us",
        "wake_p999_us",
        "wake_max_us",
        "scan_per_wakeup",
    ] {
        assert!(header.contains(&col), "runs.csv lacks column {col}");
    }
    let rows: Vec<&str> = lines.collect();
    // 3 configurations x (2 + 2 + 2) cases x 1 repeat.
    assert_eq!(rows.len(), 18, "runs.csv rows:\n{csv}");
    let (ci, vi) = (
        header.iter().position(|c| *c == "config").unwrap(),
        header.iter().position(|c| *c == "value").unwrap(),
    );
    let col = |name: &str| header.iter().position(|c| *c == name).unwrap();
    // every run: wake-up latency p50 <= p99 <= p99.9, all > 0 (max is exact, the
    // quantiles are bucket upper ends: no order against it)
    for r in &rows {
        let f: Vec<&str> = r.split(',').collect();
        let v = |name: &str| f[col(name)].parse::<f64>().unwrap_or(f64::NAN);
        let (p50, p99, p999, max) = (
            v("wake_p50_us"),
            v("wake_p99_us"),
            v("wake_p999_us"),
            v("wake_max_us"),
        );
        assert!(
            p50 > 0.0 && p50 <= p99 && p99 <= p999 && max > 0.0,
            "wake-up latency of run {r}"
        );
        if f[ci] != "eevdf" {
            for k in ["sel_ns_per_call", "enq_ns_per_call", "dsp_ns_per_call"] {
                assert!(v(k) > 0.0, "{k} of run {r}");
            }
        }
    }
    for cfg in ["eevdf", "vanilla", "patched"] {
        let n = rows
            .iter()
            .filter(|r| {
                let f: Vec<&str> = r.split(',').collect();
                f[ci] == cfg && f[vi].parse::<f64>().is_ok_and(|v| v > 0.0)
            })
            .count();
        assert_eq!(n, 6, "{cfg}: expected 6 runs with a positive value");
    }
    for png in [
        "scan_per_wakeup.png",
        "throughput_ratio.png",
        "wakeup_p99.png",
    ] {
        let m = std::fs::metadata(out.join(png)).unwrap_or_else(|_| panic!("{png} missing"));
        assert!(m.len() > 1000, "{png} is too small");
    }
    self_check_catches_defects(&repo, &out);
}

/// `tools/bench --from-raw DIR --quick` on `raw`, with `mutate` applied to the first run
/// record it selects: (exit success, stderr).
fn recheck(
    repo: &Path,
    raw: &str,
    name: &str,
    mutate: &dyn Fn(&mut serde_json::Value) -> bool,
) -> (bool, String) {
    let dir = repo.join("target/bench").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("recheck directory");
    let mut done = false;
    let text: Vec<String> = raw
        .lines()
        .map(|l| match l.strip_prefix("@@BENCH ") {
            Some(j) if !done => {
                let mut v: serde_json::Value = serde_json::from_str(j).expect("@@BENCH JSON");
                done = mutate(&mut v);
                format!("@@BENCH {v}")
            }
            _ => l.to_string(),
        })
        .collect();
    std::fs::write(dir.join("raw-main.log"), text.join("\n") + "\n").expect("raw-main.log");
    let res = Command::new(repo.join("tools/bench"))
        .args(["--quick", "--from-raw"])
        .arg(&dir)
        .current_dir(repo)
        .output()
        .expect("cannot run tools/bench --from-raw");
    (
        res.status.success(),
        String::from_utf8_lossy(&res.stderr).into_owned(),
    )
}

/// The self-check is not a formality: on the run's own raw log it passes, and the two
/// defects it once reported (a run whose enqueue BPF statistics went negative, a run whose
/// latency tracer gave no p99.9) each fail it, naming the run.
fn self_check_catches_defects(repo: &Path, out: &Path) {
    let raw = std::fs::read_to_string(out.join("raw-main.log")).expect("raw-main.log");
    let is_run = |v: &serde_json::Value, cfg: &str| v["type"] == "run" && v["config"] == cfg;
    let (ok, err) = recheck(repo, &raw, "recheck-same", &|_| false);
    assert!(
        ok && err.contains("quick check passed"),
        "the unchanged log:\n{err}"
    );
    let (ok, err) = recheck(repo, &raw, "recheck-enq", &|v| {
        is_run(v, "patched") && {
            v["enq_cnt"] = (-27023).into();
            true
        }
    });
    assert!(
        !ok && err.contains("CHECK FAILED: patched ") && err.contains("no enqueue BPF stats"),
        "negative enqueue count not caught:\n{err}"
    );
    let (ok, err) = recheck(repo, &raw, "recheck-p999", &|v| {
        is_run(v, "eevdf") && {
            v["wake_p999_us"] = serde_json::Value::Null;
            true
        }
    });
    assert!(
        !ok && err.contains("CHECK FAILED: eevdf ") && err.contains("wake_p999_us"),
        "missing p99.9 not caught:\n{err}"
    );
}

/// `tools/bench --replot` redraws a committed directory from its runs.csv alone: the
/// committed plot-data.json comes back value for value, each point's sample count is the
/// `search` counters summed from runs.csv, and only the plots the directory held are drawn
/// (no throughput plot of TCG speeds). Host only: no guest.
#[test]
fn bench_replot_redraws_committed_data() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = repo.join("docs/results/llc16-overload25-nostack-2026-11-26");
    let dir = tempfile::tempdir().expect("tempdir");
    for f in ["runs.csv", "scan_per_wakeup.png"] {
        std::fs::copy(src.join(f), dir.path().join(f)).expect(f);
    }
    let res = Command::new(repo.join("tools/bench"))
        .arg("--replot")
        .arg(dir.path())
        .current_dir(&repo)
        .output()
        .expect("cannot run tools/bench");
    assert!(
        res.status.success(),
        "tools/bench --replot failed: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).expect("plot-data.json")).unwrap()
    };
    let new = read(&dir.path().join("plot-data.json"));
    assert_eq!(new, read(&src.join("plot-data.json")));
    assert!(!dir.path().join("throughput_ratio.png").exists());
    let png = std::fs::metadata(dir.path().join("scan_per_wakeup.png")).unwrap();
    assert!(png.len() > 1000);

    // the sample counts, summed here from runs.csv's own columns
    let csv = std::fs::read_to_string(src.join("runs.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (cfg, search) = (col("config"), col("search"));
    let n = &new["main"]["workloads"]["overload"]["n"]["scan"];
    let mut checked = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f[search].is_empty() {
            continue;
        }
        let want: u64 = f[search].parse().unwrap();
        assert_eq!(n[f[cfg]][0].as_u64(), Some(want), "{}", f[cfg]);
        checked += 1;
    }
    assert!(checked >= 5, "{checked} configurations checked");
}
