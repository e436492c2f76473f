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
    // the default policies: vanilla, patched, patched-unbounded (preset names), and each
    // patch's feature alone
    let policies: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    for p in [
        "vanilla",
        "patched",
        "patched-unbounded",
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
    // one run: 300 hot intervals, 50 with the lines last written on another CPU
    assert_eq!(r["hot_intervals"], 300);
    assert_eq!(r["intervals"], 50);
    assert_ne!(r["loader_cpu"], r["writer_cpu"]);
    for k in [
        "hot_us",
        "wake_us",
        "total_us",
        "bpf_ns_per_cpu",
        "total_pct",
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
        // --plot is checked before measuring: nothing measured, one line
        &["--plot", "/nonexistent/x.png"],
        &["--plot", "x.txt"],
        &["--plot", "/tmp"],
        &["--loader", "--plot", "/tmp/x.png"],
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            !err.contains("placement-cost: ["),
            "{args:?} measured first: {err}"
        );
        let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
    }
}

/// Ctrl-C ends a long measurement within a second of CPU time: a run of 8,388,608
/// placements on a 512-CPU LLC scanned whole (~7 µs each here: ~60 s as one
/// BPF_PROG_TEST_RUN, which no signal interrupts) is split into test runs of ~0.25 s.
/// Margin: SIGINT 0.5 s into the run, exit within 1 s of the child's CPU time after it
/// (4 test runs' worth). The bound is the child's own CPU time (utime + stime from
/// /proc/PID/stat, the test runs' time included), not wall time: on a host busy with CI's
/// guests the child waits for a CPU as long as the load makes it, and that wait says
/// nothing about when it honours the signal. A child that ignores SIGINT burns ~60 s of CPU
/// and fails at 1 s; the wall clock only guards against a hang (120 s).
#[test]
fn placement_cost_ctrl_c_within_a_second() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let mut child = Command::new(env!("CARGO_BIN_EXE_scx_sisutil"))
        .args([
            "placement-cost",
            "--llc-sizes",
            "512",
            "--busy",
            "100",
            "--policies",
            "unbounded",
            "--runs",
            "1",
            "--placements",
            "8388608",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running scx_sisutil");
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("placement-cost: [1/1]"), "{line}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "ended before SIGINT");
    let pid = child.id();
    // The child's CPU time (s) so far; None once it is gone (or a zombie: no stat to read).
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = || -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let f: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
        // after the comm: state ppid ... utime (14th field of the line) stime (15th)
        let (u, s): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
        Some((u + s) / tick)
    };
    let cpu0 = cpu().expect("the child's /proc/PID/stat");
    let t = Instant::now();
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let mut used = 0.0;
    while child.try_wait().unwrap().is_none() {
        if let Some(c) = cpu() {
            used = c - cpu0;
        }
        if used > 1.0 || t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running after SIGINT: {used:.2} s of CPU (limit 1 s), {:?} (hang guard 120 s)",
                t.elapsed()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "exited {:?} after SIGINT, {used:.2} s of CPU after it (limit 1 s)",
        t.elapsed()
    );
}
