// SPDX-License-Identifier: GPL-2.0-only
//! The tools' command lines as a user types them, on a host without a running scheduler:
//! what can be refused before a scheduler is looked for is refused first, in one line.

use std::path::Path;
use std::process::Command;

mod common;
// the fake stats server of the monitor's unit tests
#[path = "../src/testing/stats_server.rs"]
mod stats_server;
use stats_server::fake_stats_server;

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

/// `monitor` as a user runs it against the review's servers: one that trickles a byte every
/// 0.2 s without a newline, one that accepts and closes, one that never answers, and a path
/// that is not a socket. Each ends with one line on stderr and exit 1 within its deadline:
/// --stats-timeout 2 s for an answer, 5 closed connections (~1.25 s), at once for the path
/// (a 15 s limit each: a loaded host's margin; without the fixes each waits forever).
#[test]
fn monitor_ends_on_hostile_stats_servers_with_one_line() {
    use std::io::{Read, Write};
    fn trickle(mut c: std::os::unix::net::UnixStream) {
        let mut req = [0u8; 256];
        let _ = c.read(&mut req);
        while c.write_all(b" ").is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    fn silent(mut c: std::os::unix::net::UnixStream) {
        let mut buf = [0u8; 256];
        while c.read(&mut buf).is_ok_and(|n| n > 0) {}
    }
    let servers = [
        (
            "trickling",
            fake_stats_server("cli-stats-", trickle),
            "no answer from the stats server in 2.0 s",
        ),
        (
            "closing",
            fake_stats_server("cli-stats-", drop),
            "closed 5 connections in a row",
        ),
        (
            "silent",
            fake_stats_server("cli-stats-", silent),
            "no answer from the stats server in 2.0 s",
        ),
    ];
    let mut cases: Vec<(&str, std::path::PathBuf, &str)> = servers
        .iter()
        .map(|(n, (_, p), w)| (*n, p.clone(), *w))
        .collect();
    cases.push(("/etc/passwd", "/etc/passwd".into(), "is not a socket"));
    for (name, path, want) in cases {
        let t = std::time::Instant::now();
        // -k: a monitor that ignores the SIGTERM (no flag check) is killed, not waited on
        let o = common::timeout(15, env!("CARGO_BIN_EXE_scx_sisutil"))
            .args(["monitor", "--stats-timeout", "2"])
            .arg("--stats-socket")
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {:?} {err}", o.status);
        let last = err.lines().last().unwrap_or("");
        assert!(last.contains(want), "{name}: {err}");
        assert_eq!(
            err.lines()
                .filter(|l| l.starts_with("scx_sisutil: error"))
                .count(),
            1,
            "{name}: {err}"
        );
        assert!(t.elapsed().as_secs() < 10, "{name}: {:?}", t.elapsed());
    }
}

/// SIGTERM and SIGHUP, like Ctrl-C, end a wait for a stats answer at once (the handler
/// sets the flag that `ab` restores the features on; the read loop checks it every 100 ms):
/// exit 0, within 3 s of the signal, with a 60 s --stats-timeout.
#[test]
fn sigterm_and_sighup_end_a_wait_for_statistics() {
    fn silent(mut c: std::os::unix::net::UnixStream) {
        use std::io::Read;
        let mut buf = [0u8; 256];
        while c.read(&mut buf).is_ok_and(|n| n > 0) {}
    }
    let (_d, path) = fake_stats_server("cli-stats-", silent);
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_scx_sisutil"))
            .args(["monitor", "--stats-timeout", "60", "--stats-socket"])
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // the handler is installed at start, microseconds in: 1.5 s is the loaded host's margin
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let t = std::time::Instant::now();
        // SAFETY: kill(2) of our own child
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed().as_secs() >= 10 {
                let _ = child.kill();
                panic!("signal {sig}: monitor still waiting after 10 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "signal {sig}: {status:?}");
        assert!(t.elapsed().as_secs() < 3, "signal {sig}: {:?}", t.elapsed());
    }
}

/// Help texts say what the tools do: `ab` computes no interval (the review found "a 95 %
/// interval" promised), names its test and takes --stats-timeout; `features --restore` is
/// listed and takes no feature names (a usage error, exit 2).
#[test]
fn help_texts_match_behaviour() {
    let help = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_scx_sisutil"))
            .args(args)
            .output()
            .unwrap();
        // words, not lines: the help is wrapped to the terminal's width
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let top = help(&["--help"]);
    let ab = help(&["ab", "--help"]);
    for h in [&top, &ab] {
        assert!(!h.contains("95 %") && !h.contains("% interval"), "{h}");
    }
    assert!(top.contains("rank-sum test"), "{top}");
    assert!(ab.contains("--stats-timeout"), "{ab}");
    let feat = help(&["features", "--help"]);
    assert!(feat.contains("--restore"), "{feat}");
    // the load-time mode is told in the help, not in `features`'s one-line-per-feature list
    assert!(feat.contains("--allow-queued-wakeup"), "{feat}");
    let o = Command::new(env!("CARGO_BIN_EXE_scx_sisutil"))
        .args(["features", "--restore", "SIS_UTIL"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Every option tools/vm's parse_args accepts is described in its --help (the `--append`
/// line was once lost while a new option's text went in beside it).
#[test]
fn vm_help_describes_every_option() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(root.join("tools/vm")).expect("tools/vm");
    let body = src
        .split_once("parse_args() {")
        .and_then(|(_, rest)| rest.split_once("\n}\n"))
        .expect("tools/vm: no parse_args()")
        .0;
    let opts: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim_start().split_once(')').map(|(pat, _)| pat))
        .flat_map(|pat| pat.split('|'))
        .filter(|o| o.starts_with("--") && o.len() > 2 && !o.contains('*'))
        .collect();
    assert!(opts.len() >= 12, "parse_args' options not found: {opts:?}");
    let out = Command::new(root.join("tools/vm"))
        .arg("--help")
        .output()
        .expect("tools/vm --help");
    let help = String::from_utf8_lossy(&out.stdout);
    for o in opts {
        assert!(
            help.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with(&format!("{o} ")) || l.starts_with(&format!("-h, {o} "))
            }),
            "tools/vm --help does not describe {o}:\n{help}"
        );
    }
}
