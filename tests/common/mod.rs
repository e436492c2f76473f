// SPDX-License-Identifier: GPL-2.0-only
//! The VM test runner shared by the VM test binaries (tests/vm.rs, tests/reliability.rs,
//! tests/fairness.rs):
//! boot one guest through `tools/vm`, run one guest script from tests/guest/, print
//! everything, and check the script's report.
//!
//! The guest scripts (tests/guest/*.sh, on the guest's PATH, helpers in tests/guest/lib.sh)
//! print `ok: CHECK` per passed check, `FAIL: WHY` on the first failure (then exit 1),
//! `FIGURE key=value` for measured counts and `PASS NAME` at the end; [`assert_passed`]
//! asserts the exit status, no FAIL line, the PASS line and that every expected check ran.
//!
//! Environment: SISUTIL_VMTEST_ATTACH_TIMEOUT (seconds) overrides the hang guard on the
//! guest scripts' wait for the scheduler to attach (mostly BPF verification, emulated; the
//! default, 300 s far above any attach seen, and why: tests/guest/lib.sh's ATTACH_TIMEOUT).
//! Console logs: target/vm-logs/PREFIX-NAME-console.log.
//!
//! Times printed are host wall seconds; inside the guest everything runs under TCG
//! emulation, where durations are distorted: the tests assert counts and ratios.
//! Nothing is skipped: without QEMU or a kernel, tools/vm fails and so does the test.
//!
//! [`timeout`]: the host tests' (tests/tools_cli.rs, tests/root_safe.rs) command under a
//! hang guard.
#![allow(dead_code)] // each test binary uses a part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// `#[test]` functions that each call a scenario with the test's own name first:
/// `vm_tests! { soak_7 = soak("7", &[], 60); #[ignore] soak_6_12 = soak("6.12", &[], 60); }`
/// makes `fn soak_7() { soak("soak_7", "7", &[], 60) }` and so on.
#[macro_export]
macro_rules! vm_tests {
    ($( $(#[$a:meta])* $name:ident = $f:ident($($arg:expr),* $(,)?); )*) => {
        $( #[test] $(#[$a])* fn $name() { $f(stringify!($name), $($arg),*) } )*
    };
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn env_u32(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// One guest: the kernel (`7`, `6.12`), tools/vm options besides --kernel, the timeout, and
/// the prefix of its console log's name.
pub struct Vm<'a> {
    pub kernel: &'a str,
    opts: Vec<String>,
    timeout_s: u32,
    log_prefix: &'a str,
}

impl<'a> Vm<'a> {
    pub fn new(kernel: &'a str, timeout_s: u32) -> Self {
        Vm {
            kernel,
            opts: vec![],
            timeout_s,
            log_prefix: "vmtest",
        }
    }
    /// One tools/vm option with its value (`--smp 4`, `--append maxcpus=6`, ...).
    pub fn opt(mut self, k: &str, v: &str) -> Self {
        self.opts.push(k.to_string());
        self.opts.push(v.to_string());
        self
    }
    pub fn opts(self, kv: &[(&str, &str)]) -> Self {
        kv.iter().fold(self, |vm, (k, v)| vm.opt(k, v))
    }
    pub fn smp(self, smp: &str) -> Self {
        self.opt("--smp", smp)
    }
    /// `tools/vm --clock instructions`: under TCG the guest's time counts emulated
    /// instructions, so a starved host makes the guest slower, never stalled in its own
    /// time (the timing tests' waits then measure the scheduler, not the host).
    pub fn instruction_clock(self) -> Self {
        self.opt("--clock", "instructions")
    }
    /// target/vm-logs/PREFIX-NAME-console.log (default prefix: vmtest)
    pub fn log_prefix(mut self, prefix: &'a str) -> Self {
        self.log_prefix = prefix;
        self
    }
}

pub struct Outcome {
    pub name: String,
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub console: PathBuf,
}

impl Outcome {
    pub fn figure(&self, key: &str) -> Option<&str> {
        let prefix = format!("FIGURE {key}=");
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
    }
    pub fn figure_u64(&self, key: &str) -> u64 {
        self.figure(key)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: no numeric FIGURE {key}", self.name))
    }
    /// The script's `ok:` lines that start with `prefix`.
    pub fn oks_starting(&self, prefix: &str) -> usize {
        self.stdout
            .lines()
            .filter(|l| {
                l.strip_prefix("ok: ")
                    .is_some_and(|r| r.starts_with(prefix))
            })
            .count()
    }
    /// The lines tools/vm lists under "kernel problem on the console:".
    pub fn kernel_problems(&self) -> Vec<&str> {
        let mut out = vec![];
        let mut inside = false;
        for l in self.stderr.lines() {
            if l.contains("kernel problem on the console:") {
                inside = true;
            } else if inside && l.starts_with("  console:") {
                out.push(l);
            } else {
                inside = false;
            }
        }
        out
    }
    /// Where the console log is, for the failure messages.
    pub fn logs(&self) -> String {
        let kept: Vec<&str> = self
            .stderr
            .lines()
            .filter_map(|l| l.split("console log kept in ").nth(1))
            .collect();
        format!(
            "console log: {}{}",
            self.console.display(),
            if kept.is_empty() {
                String::new()
            } else {
                format!(" (and {})", kept.join(", "))
            }
        )
    }
}

/// One line per guest in target/vm-logs/times.tsv (name, kernel, wall s, exit status, host
/// load at the start): tools/test prints them, slowest first, after the tests.
fn record_time(logs: &Path, name: &str, kernel: &str, secs: f64, rc: Option<i32>, load: &str) {
    use std::io::Write;
    let rc = rc.map_or("signal".to_string(), |c| c.to_string());
    let line = format!("{name}\t{kernel}\t{secs:.1}\t{rc}\t{load}\n");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join("times.tsv"));
    // (one write of one short line: appends from parallel tests do not interleave)
    if let Err(e) = f.and_then(|mut f| f.write_all(line.as_bytes())) {
        eprintln!("{name}: cannot record the time in target/vm-logs/times.tsv: {e}");
    }
}

/// Boot the guest, run `cmd` (a command line for the guest's bash, scripts on PATH), print
/// everything, return the outcome.
pub fn run_vm(name: &str, vm: Vm, cmd: &str) -> Outcome {
    let logs = repo().join("target/vm-logs");
    std::fs::create_dir_all(&logs).expect("cannot create target/vm-logs");
    let console = logs.join(format!("{}-{name}-console.log", vm.log_prefix));
    let load0 = loadavg();
    let t0 = Instant::now();
    let mut tools_vm = Command::new(repo().join("tools/vm"));
    tools_vm
        .args(["--kernel", vm.kernel, "--no-build"])
        .args(["--timeout", &vm.timeout_s.to_string()])
        // A TCG guest on a busy host can fail the boot-time IO-APIC timer check and panic
        // ("IO-APIC + timer doesn't work!"): seen here with 7 guests on 2 host cores.
        .args(["--append", "no_timer_check"])
        .args(&vm.opts)
        .arg("--log")
        .arg(&console);
    // The attach guard is lib.sh's (ATTACH_TIMEOUT); only a value the user set is passed on.
    if let Ok(attach) = std::env::var("SISUTIL_VMTEST_ATTACH_TIMEOUT") {
        tools_vm.args(["--env", &format!("VMTEST_ATTACH_TIMEOUT={attach}")]);
    }
    tools_vm
        .arg("--")
        .arg(cmd)
        // The binary cargo built for this test run, whatever the profile (no nested build).
        .env("SISUTIL_BIN", env!("CARGO_BIN_EXE_scx_sisutil"))
        .stdin(Stdio::null());
    let out = output_forwarding_progress(name, &mut tools_vm);
    let secs = t0.elapsed().as_secs_f64();
    let o = Outcome {
        name: name.to_string(),
        status: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        console,
    };
    record_time(&logs, name, vm.kernel, secs, o.status, &load0);
    println!(
        "==== {name}: kernel {} {}: `{cmd}` -> exit {:?}, {secs:.1} s wall (host loadavg {load0} -> {})",
        vm.kernel,
        vm.opts.join(" "),
        o.status,
        loadavg()
    );
    for l in o.stdout.lines() {
        println!("[{name}] {l}");
    }
    // (tools/vm's stderr was forwarded as it arrived, above the guest's output.)
    println!("==== {name}: {secs:.1} s wall; {}", o.logs());
    o
}

/// [`run_vm`], then [`assert_passed`] for the script `cmd` starts with (`basic.sh 30` ->
/// `PASS basic`).
pub fn run_script(
    name: &str,
    vm: Vm,
    cmd: &str,
    expected: &[&str],
    known: &[KnownIssue],
) -> Outcome {
    let kernel = vm.kernel;
    let script = cmd.split_whitespace().next().unwrap_or(cmd);
    let o = run_vm(name, vm, cmd);
    assert_passed(&o, kernel, script.trim_end_matches(".sh"), expected, known);
    o
}

/// A kernel problem that is not scx_sisutil's and that a scenario may tolerate, by kernel.
pub struct KnownIssue {
    pub kernel: &'static str,
    pub what: &'static str,
    /// every line of the console's "kernel problem" list must contain one of these sets
    pub lines: &'static [&'static [&'static str]],
}

/// Exit 0, no FAIL line, the `PASS script` line, every expected check ran (an `ok:` line
/// containing each string). `known`: kernel problems the scenario tolerates on `kernel`
/// (tools/vm fails the run on any WARNING): then a non-zero exit passes only if the command
/// itself exited 0 and every problem line belongs to one known issue.
pub fn assert_passed(
    o: &Outcome,
    kernel: &str,
    script: &str,
    expected: &[&str],
    known: &[KnownIssue],
) {
    let fails: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL:"))
        .collect();
    assert!(
        fails.is_empty(),
        "{}: {}\n{}",
        o.name,
        fails.join("\n"),
        o.logs()
    );
    let pass = format!("PASS {script}");
    let passed = o.stdout.lines().any(|l| l.trim_end() == pass);
    if o.status != Some(0) {
        let problems = o.kernel_problems();
        let cmd_ok = o
            .stderr
            .contains("the kernel reported a problem (command exit status 0)");
        let issue = known.iter().find(|k| {
            k.kernel == kernel
                && !problems.is_empty()
                && problems
                    .iter()
                    .all(|l| k.lines.iter().any(|set| set.iter().all(|s| l.contains(s))))
        });
        match issue {
            Some(k) if cmd_ok && passed => {
                println!(
                    "==== {}: NOTE: tolerated known kernel issue: {} ({} console lines):\n{}",
                    o.name,
                    k.what,
                    problems.len(),
                    problems.join("\n")
                );
            }
            _ => panic!(
                "{}: tools/vm exit status {:?} (see the output above); {}",
                o.name,
                o.status,
                o.logs()
            ),
        }
    }
    assert!(
        passed,
        "{}: no '{pass}' line: the script stopped early; {}",
        o.name,
        o.logs()
    );
    let oks: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("ok: ")).collect();
    for e in expected {
        assert!(
            oks.iter().any(|l| l.contains(e)),
            "{}: the check '{e}' did not run (ok lines: {oks:#?}); {}",
            o.name,
            o.logs()
        );
    }
}

/// Runs tools/vm to completion and returns its output. Its stderr (the harness's timestamped
/// progress: kernel, guest image, boot, init, scheduler attach/detach) is forwarded line by
/// line as it arrives through eprintln: `cargo test -- --nocapture` shows a guest's progress
/// live, a normal run keeps it in the captured output of the test.
pub fn output_forwarding_progress(name: &str, cmd: &mut Command) -> std::process::Output {
    use std::io::{BufRead, BufReader, Read};
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run tools/vm");
    let err = child.stderr.take().expect("tools/vm stderr");
    let tag = name.to_string();
    let forward = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in BufReader::new(err).split(b'\n') {
            let Ok(line) = line else { break };
            eprintln!("[{tag}] vm: {}", String::from_utf8_lossy(&line));
            all.extend_from_slice(&line);
            all.push(b'\n');
        }
        all
    });
    let mut stdout = Vec::new();
    let _ = child
        .stdout
        .take()
        .expect("tools/vm stdout")
        .read_to_end(&mut stdout);
    let status = child.wait().expect("cannot wait for tools/vm");
    let stderr = forward.join().unwrap_or_default();
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

/// `timeout -k 5 SECS PROGRAM`: `program` (its arguments to be added) sent SIGTERM after
/// `secs`, and SIGKILL 5 s later if it ignores that, so a hang fails the test instead of
/// stalling it.
pub fn timeout(secs: u32, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("timeout");
    c.args(["-k", "5", &secs.to_string()]).arg(program);
    c
}
