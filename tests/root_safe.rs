// SPDX-License-Identifier: GPL-2.0-only
//! The scripts that write files as root (tools/bench, tools/bench.d/plot.py,
//! tools/lib/safe-out.sh for tools/soak and tools/fresh-root) against a hostile local user's
//! reproductions of issue 34: symlinks planted at every output name, a log line carrying
//! newlines and escapes, a directory owned by another user, a directory swapped for a
//! symlink after it was opened. Host only (root, python3-matplotlib): no guest.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("root-safe-")
        .tempdir_in("/tmp")
        .unwrap()
}

/// A committed raw log with its first run record failed by an `err` that holds a newline,
/// a line that reads as an ssh key, and a terminal escape.
fn hostile_raw(dir: &Path) {
    let raw = std::fs::read_to_string(
        repo().join("docs/results/llc16-overload-pairs-2026-11-23/raw-main.log"),
    )
    .unwrap();
    let mut done = false;
    let text: Vec<String> = raw
        .lines()
        .map(|l| match l.strip_prefix("@@BENCH ") {
            Some(j) if !done => {
                let mut v: serde_json::Value = serde_json::from_str(j).unwrap();
                if v["type"] == "run" {
                    v["ok"] = false.into();
                    v["err"] = "boom\nssh-ed25519 AAAAC3Nz evil@host\u{1b}[2J".into();
                    done = true;
                }
                format!("@@BENCH {v}")
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(done);
    std::fs::write(dir.join("raw-main.log"), text.join("\n") + "\n").unwrap();
}

const OUTPUTS: [&str; 8] = [
    "tables.txt",
    "patch-format.txt",
    "results.json",
    "plot-data.json",
    "runs.csv",
    "scan_per_wakeup.png",
    "throughput_ratio.png",
    "wakeup_p99.png",
];

/// The review's `tools/bench --from-raw DIR` with a symlink at every output name: each is
/// replaced by a regular file (the target keeps its bytes), and the err string's newline
/// and escape are '?' in tables.txt, so no line of it is the user's.
#[test]
fn bench_from_raw_writes_through_no_symlink_and_no_control_character() {
    let d = tmp();
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let target = victim.join("authorized_keys");
    std::fs::write(&target, "precious\n").unwrap();
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    hostile_raw(&out);
    for f in OUTPUTS {
        std::os::unix::fs::symlink(&target, out.join(f)).unwrap();
    }
    let res = Command::new(repo().join("tools/bench"))
        .arg("--from-raw")
        .arg(&out)
        .current_dir(repo())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    for f in ["tables.txt", "patch-format.txt", "results.json", "runs.csv"] {
        let m = std::fs::symlink_metadata(out.join(f)).unwrap();
        assert!(m.file_type().is_file(), "{f} is still a symlink");
    }
    let tables = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    assert!(
        !tables.lines().any(|l| l.starts_with("ssh-ed25519")),
        "{tables}"
    );
    assert!(!tables.contains('\u{1b}'));
    assert!(
        tables.contains("boom?ssh-ed25519 AAAAC3Nz evil@host?[2J"),
        "{tables}"
    );
    // no temporary file left behind
    for e in std::fs::read_dir(&out).unwrap() {
        let n = e.unwrap().file_name();
        assert!(!n.to_string_lossy().ends_with(".tmp"), "{n:?}");
    }
}

/// An output directory owned by another user (neither root nor the one running it), one
/// that is a symlink, and a raw log that is a FIFO: one line each, exit 1, nothing written,
/// no wait for a writer.
#[test]
fn bench_refuses_a_foreign_or_symlinked_directory_and_a_fifo_log() {
    let d = tmp();
    let theirs = d.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    hostile_raw(&theirs);
    std::os::unix::fs::chown(&theirs, Some(54321), None).unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&theirs, &link).unwrap();
    let fifo_dir = d.path().join("fifo");
    std::fs::create_dir(&fifo_dir).unwrap();
    let c = std::ffi::CString::new(fifo_dir.join("raw-main.log").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) of a NUL-terminated path
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for (dir, want) in [
        (&theirs, "is owned by uid 54321, neither root nor you"),
        (&link, "is a symlink: refusing to write through it"),
        (&fifo_dir, "not a regular file"),
    ] {
        let t = std::time::Instant::now();
        let res = common::timeout(30, repo().join("tools/bench"))
            .arg("--from-raw")
            .arg(dir)
            .current_dir(repo())
            .env_remove("SUDO_UID")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(1), "{dir:?}: {err}");
        assert!(err.contains(want), "{dir:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        // the FIFO: refused at once (30 s: a blocking open never returns)
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    }
    assert!(!theirs.join("tables.txt").exists());
}

/// plot.py writes through the directory fd it is given (`fd:N`, as tools/bench passes it):
/// the directory swapped for a symlink after it was opened still gets the PNG, the
/// symlink's target nothing.
#[test]
fn plot_py_writes_through_the_directory_it_was_given() {
    use std::os::unix::process::CommandExt;
    let d = tmp();
    let [out, moved, roots] = ["out", "moved", "roots"].map(|n| d.path().join(n));
    for dir in [&out, &roots] {
        std::fs::create_dir(dir).unwrap();
    }
    let dir = std::fs::File::open(&out).unwrap();
    std::fs::rename(&out, &moved).unwrap();
    std::os::unix::fs::symlink(&roots, &out).unwrap();
    let data = r#"{"main": {"baseline": "eevdf", "workloads": {"hackbench": {"loads": ["g2", "g8"],
      "scan": {"vanilla": [3.5, 9.0], "patched": [2.0, 4.0]},
      "ratio": {"eevdf": [1.0, 1.0], "vanilla": [0.9, 1.1]}}}}}"#;
    let data_file = d.path().join("plot-data.json");
    std::fs::write(&data_file, data).unwrap();
    use std::os::fd::AsRawFd;
    let fd = dir.as_raw_fd();
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-I")
        .arg(repo().join("tools/bench.d/plot.py"))
        .arg(&data_file)
        .arg("fd:7")
        .arg("scan_per_wakeup.png")
        .current_dir("/");
    // SAFETY: dup2(2) in the child before exec: fd 7 is the directory opened above
    unsafe {
        cmd.pre_exec(move || {
            if fd == 7 {
                libc::fcntl(7, libc::F_SETFD, 0);
            } else if libc::dup2(fd, 7) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let res = cmd.output().unwrap();
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    assert!(
        std::fs::metadata(moved.join("scan_per_wakeup.png"))
            .unwrap()
            .len()
            > 1000
    );
    assert_eq!(std::fs::read_dir(&roots).unwrap().count(), 0);
    // and given the (now symlinked) path, plot.py refuses it in one line
    let res = Command::new("/usr/bin/python3")
        .arg("-I")
        .arg(repo().join("tools/bench.d/plot.py"))
        .arg(&data_file)
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(!res.status.success());
    assert!(
        err.contains("a symlink: refusing to write through it"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&roots).unwrap().count(), 0);
}

fn safe_out(script: &str) -> (bool, String) {
    let lib = repo().join("tools/lib/safe-out.sh");
    let res = Command::new("bash")
        .arg("-c")
        .arg(format!(". '{}'; SAFE_OUT_WHO=t; {script}", lib.display()))
        .env_remove("SUDO_UID")
        .output()
        .unwrap();
    (
        res.status.success(),
        String::from_utf8_lossy(&res.stderr).into_owned(),
    )
}

/// tools/soak's and tools/fresh-root's check: a directory of another user on the way, one
/// writable by others, a symlink on the way are refused in one line (nothing made under
/// them); a good one is made 0755 and safe_put replaces a planted symlink.
#[test]
fn safe_out_sh_refuses_what_others_control() {
    let d = tmp();
    let p = |s: &str| d.path().join(s);
    std::fs::create_dir(p("theirs")).unwrap();
    std::os::unix::fs::chown(p("theirs"), Some(54321), None).unwrap();
    std::fs::create_dir(p("open")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::symlink(d.path(), p("link")).unwrap();
    for (dir, want) in [
        ("theirs/out", "is owned by uid 54321"),
        ("open/out", "is writable by others (mode 777)"),
        ("open", "is writable by others (mode 777)"),
        ("link/out", "is a symbolic link"),
    ] {
        let (ok, err) = safe_out(&format!("safe_out_dir '{}'", p(dir).display()));
        assert!(!ok, "{dir} accepted");
        assert!(err.contains(want), "{dir}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(!p("theirs/out").exists() && !p("open/out").exists());
    let target = p("victim");
    std::fs::write(&target, "precious").unwrap();
    let good = p("good/out");
    let (ok, err) = safe_out(&format!(
        "safe_out_dir '{g}' && ln -s '{t}' '{g}/table.md' && echo hi | safe_put '{g}' table.md",
        g = good.display(),
        t = target.display()
    ));
    assert!(ok, "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    assert_eq!(
        std::fs::read_to_string(good.join("table.md")).unwrap(),
        "hi\n"
    );
    assert_eq!(std::fs::metadata(&good).unwrap().mode() & 0o777, 0o755);
}

/// tools/loader-cost writes no fixed name in the shared /tmp (read, not run: its measure
/// needs a sched_ext kernel): every file it writes is in its mktemp -d directory.
#[test]
fn loader_cost_writes_no_fixed_tmp_name() {
    let text = std::fs::read_to_string(repo().join("tools/loader-cost")).unwrap();
    for (i, l) in text.lines().enumerate() {
        let code = l.split(" #").next().unwrap_or("");
        assert!(
            !(code.contains("> /tmp/") || code.contains(">/tmp/") || code.contains("=/tmp/")),
            "tools/loader-cost:{}: {l}",
            i + 1
        );
    }
    assert!(text.contains("work=$(mktemp -d /tmp/loader-cost.XXXXXX)"));
}
