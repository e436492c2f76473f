// SPDX-License-Identifier: GPL-2.0-only
//! The tools' command lines as a user types them, on a host without a running scheduler:
//! what can be refused before a scheduler is looked for is refused first, in one line.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_scx_sisutil"))
        .args(args)
        .output()
        .expect("running scx_sisutil");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A typo in a side, --better without --metric and too few rounds are named as such, not
/// as a missing scheduler (there is none here).
#[test]
fn ab_refuses_bad_input_before_looking_for_a_scheduler() {
    for (args, want) in [
        (
            &["--a", "SIS_UTIL", "--b", "NO_SIS_UTIL,BOGUS"][..],
            "unknown feature 'BOGUS'",
        ),
        (
            &["--a", "BOGUS", "--b", "SIS_UTIL"],
            "unknown feature 'BOGUS'",
        ),
        (
            &[
                "--a",
                "SIS_UTIL",
                "--b",
                "NO_SIS_UTIL",
                "--better",
                "higher",
            ],
            "--better needs --metric",
        ),
        (
            &["--a", "SIS_UTIL", "--b", "NO_SIS_UTIL", "--rounds", "4"],
            "cannot show a difference at 5 %",
        ),
    ] {
        let mut a = vec!["ab"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--", "true"]);
        let (ok, err) = run(&a);
        assert!(!ok, "{a:?} accepted");
        assert!(err.contains(want), "{a:?}: {err}");
        assert!(!err.contains("no running scx_sisutil"), "{a:?}: {err}");
        assert!(!err.contains("panicked"), "{a:?}: {err}");
    }
}

/// --plot is checked before anything is measured or looked for.
#[test]
fn calibrate_checks_plot_first() {
    for p in ["/nonexistent/x.png", "x.txt"] {
        let (ok, err) = run(&["calibrate", "--plot", p]);
        assert!(!ok);
        assert!(err.contains("--plot"), "{p}: {err}");
        assert_eq!(err.lines().count(), 1, "{p}: {err}");
    }
}

/// shadow's --fit is read before anything is traced: a bad fit file is one line, exit 1.
#[test]
fn shadow_checks_fit_first() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "not json\n").unwrap();
    let missing = dir.path().join("missing.json");
    for p in [&bad, &missing] {
        let (ok, err) = run(&["shadow", "--duration", "1", "--fit", p.to_str().unwrap()]);
        assert!(!ok, "{p:?} accepted");
        // not root: refused before (one line too); as root: the fit is named
        if !err.contains("must run as root") {
            assert!(err.contains("--fit"), "{p:?}: {err}");
        }
        assert_eq!(err.lines().count(), 1, "{p:?}: {err}");
        assert!(!err.contains("panicked"), "{p:?}: {err}");
    }
}

/// Topologies whose CPU count wraps in 32 bits (64 x 2^26 = 2^32 was 0, and the allocation
/// that followed aborted): one usage line, exit 2, no signal, before anything is measured.
#[test]
fn placement_cost_refuses_an_overflowing_topology() {
    for t in [
        "64x67108864",
        "2x2147483648",
        "3x1431655766",
        "1x4294967295",
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_scx_sisutil"))
            .args(["placement-cost", "--topologies", t])
            .output()
            .expect("running scx_sisutil");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{t}: {:?} {err}", o.status);
        let first = err.lines().next().unwrap_or("");
        assert!(first.contains("the machine at most 512"), "{t}: {err}");
        assert!(!err.contains("panicked"), "{t}: {err}");
    }
}
