// SPDX-License-Identifier: GPL-2.0-only
//! Reliability tests: faults, CPU hotplug, hostile inputs, odd task shapes and
//! topologies; nothing stalls, nothing is lost. On the real sched_ext kernels, in QEMU:
//!
//!     cargo test --release --test reliability -- --test-threads=2          (CI subset)
//!     cargo test --release --test reliability -- --ignored --test-threads=2  (the rest)
//!     tools/soak                                             (everything, long versions)
//!
//! Unless a test says otherwise the guest has tools/vm's default topology, 8 CPUs as 2
//! sockets (= 2 LLCs under TCG) of 2 cores x 2 SMT threads. Each `#[test]` boots one guest through `tools/vm` (`--kernel 7`: the Debian 7.x kernel;
//! `--kernel 6.12`: the 6.12 LTS) and runs one scenario script from `tests/guest/rel-*.sh`.
//! The scripts print `ok: CHECK` per passed check, `FAIL: WHY` on the first failure,
//! `FIGURE key=value` for measured counts and `PASS NAME` at the end; a test asserts the
//! exit status, no FAIL line, the PASS line and that every check it expects did run.
//!
//! Environment: SISUTIL_SOAK_SECS (default 60) is the soak duration in guest seconds
//! (tools/soak sets 300); SISUTIL_REL_ROUNDS (default 1) the hotplug rounds.
//!
//! The console log of each run is kept in target/vm-logs/rel-NAME-console.log (printed on
//! failure). Times printed are host wall seconds; inside the guest everything runs under
//! TCG emulation, where durations are distorted: the tests assert counts, never speeds.
//! Nothing is skipped: without QEMU or a kernel, tools/vm fails and so does the test.

#[macro_use]
mod common;
use common::{env_u32, run_script, KnownIssue, Vm};

/// A reliability scenario's guest: tools/vm's default topology unless `opts` say otherwise;
/// console log target/vm-logs/rel-NAME-console.log.
fn rel_vm<'a>(kernel: &'a str, timeout_s: u32, opts: &[(&str, &str)]) -> Vm<'a> {
    Vm::new(kernel, timeout_s).log_prefix("rel").opts(opts)
}

/// 6.12.117: CPU hotplug while a sched_ext scheduler is attached ends, after a few rounds,
/// in `WARNING: ... at kernel/sched/deadline.c:265 inactive_task_timer` or `task_non_contending`
/// (sub_running_bw's "dl_rq->running_bw > old"): the fair server's bandwidth is subtracted
/// twice across the offline.
/// Reproduced with the loader SIGSTOPped as well (no BPF in play at the offline: the kernel
/// had ejected it); never seen on 7.x, nor on 6.12 without sched_ext.
const DL_SERVER_612: KnownIssue = KnownIssue {
    kernel: "6.12",
    what: "6.12 deadline.c fair-server bandwidth WARNING on CPU hotplug (kernel, not scx_sisutil)",
    lines: &[
        &["cut here"],
        &[
            "WARNING:",
            "kernel/sched/deadline.c:265",
            "inactive_task_timer",
        ],
        &[
            "WARNING:",
            "kernel/sched/deadline.c:265",
            "task_non_contending",
        ],
    ],
};

/// Checks every scenario ends with.
const END_CHECKS: &[&str] = &[
    "scx_sisutil exit status after SIGTERM = 0",
    "clean exit: unregistered from user space",
    "dmesg: every sched_ext disable was",
];

fn with_end(checks: &[&'static str]) -> Vec<&'static str> {
    checks.iter().chain(END_CHECKS).copied().collect()
}

// ---------------------------------------------------------------------------------------
// Soak: mixed load with live feature switches.

fn soak(name: &str, kernel: &str, vm_opts: &[(&str, &str)], secs: u32) {
    let o = run_script(
        name,
        rel_vm(kernel, 900 + 3 * secs, vm_opts),
        &format!("rel-soak.sh {secs}"),
        &with_end(&[
            "live switches",
            "stress-ng completed (status 0)",
            "background loads completed runs, none failed",
            "still enabled after",
            "features reported by the stats of the running scheduler",
        ]),
        &[],
    );
    assert_eq!(
        o.figure_u64("watchdog_stalls"),
        0,
        "{name}: watchdog stalls"
    );
    let switches = o.figure_u64("switches");
    assert!(switches >= 1, "{name}: no feature switch happened");
    let events: Vec<String> = o
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("FIGURE event_"))
        .map(|s| s.replace("SCX_EV_", ""))
        .collect();
    println!(
        "==== rel {name}: SOAK FIGURES: duration {} guest s, ~{} tasks spawned, {switches} feature switches ({} changed a bit), hackbench runs {}, netperf runs {}, events: {}",
        o.figure("duration_s").unwrap_or("?"),
        o.figure("tasks_spawned").unwrap_or("?"),
        o.figure("switches_changed").unwrap_or("?"),
        o.figure("runs_hackbench").unwrap_or("?"),
        o.figure("runs_netperf").unwrap_or("?"),
        if events.is_empty() {
            "none on this kernel".to_string()
        } else {
            events.join(" ")
        }
    );
}

/// CI's soak: 30 s of mixed load (~15 live switches, 6 x the scheduler's 5 s watchdog
/// timeout); 60 s until 2026-11-29 (CI's time). tools/soak sets SISUTIL_SOAK_SECS=300.
fn soak_secs() -> u32 {
    env_u32("SISUTIL_SOAK_SECS", 30)
}

vm_tests! {
    soak_7 = soak("7", &[], soak_secs());
    soak_6_12 = soak("6.12", &[], soak_secs());
}

// The long versions, one per topology (tools/soak sets SISUTIL_SOAK_SECS=300).
const FLAT4: &[(&str, &str)] = &[("--smp", "4")];
const ONE_CPU: &[(&str, &str)] = &[("--smp", "1")];
const SMALL_LLCS: &[(&str, &str)] = &[("--smp", "16,sockets=8,cores=2,threads=1")];
const NUMA2: &[(&str, &str)] = &[("--numa", "2")];
const BIG_LLC32: &[(&str, &str)] = &[
    ("--smp", "32,sockets=1,cores=32,threads=1"),
    ("--mem", "3G"),
];

vm_tests! {
    #[ignore] soak_7_flat4 = soak("7", FLAT4, soak_secs());
    #[ignore] soak_6_12_flat4 = soak("6.12", FLAT4, soak_secs());
    #[ignore] soak_7_one_cpu = soak("7", ONE_CPU, soak_secs());
    #[ignore] soak_6_12_one_cpu = soak("6.12", ONE_CPU, soak_secs());
    #[ignore] soak_7_small_llcs = soak("7", SMALL_LLCS, soak_secs());
    #[ignore] soak_6_12_small_llcs = soak("6.12", SMALL_LLCS, soak_secs());
    #[ignore] soak_7_numa2 = soak("7", NUMA2, soak_secs());
    #[ignore] soak_6_12_numa2 = soak("6.12", NUMA2, soak_secs());
    #[ignore] soak_7_big_llc32 = soak("7", BIG_LLC32, soak_secs());
    #[ignore] soak_6_12_big_llc32 = soak("6.12", BIG_LLC32, soak_secs());
}

// ---------------------------------------------------------------------------------------
// CPU hotplug under load.

/// The hotplug guest: 2 LLCs of one SMT pair each. Every hotplug event makes sched_ext
/// eject the scheduler and the loader verify and load the BPF object again, on the fair
/// class beside the load; under single-threaded TCG that restart's vCPU gets 1/N of QEMU's
/// thread, so on tools/vm's default 8 CPUs (2 x 4) one restart took 45-115 s and the test
/// 1,285-1,567 s of CI's time for 14 events. Here: 8 events (the last LLC's cpu2 and cpu3
/// off and on one by one: an SMT sibling gone, the whole LLC gone, back, a sibling joining;
/// then cpu1 and cpu3 off and on back to back, two events within one restart), each shape
/// of the default's at half the size. (10 until 2026-11-29: cpu1 off and on first repeated
/// the shapes of cpu2's off and cpu3's on.)
const HOTPLUG_SMP: &str = "4,sockets=2,cores=1,threads=2";

fn hotplug(name: &str, kernel: &str, rounds: u32) {
    let checks = [
        "cpu2 online=0: ejected, restarted, attached again",
        "cpu3 online=0: ejected, restarted, attached again",
        "LLCs in the running scheduler's stats = 1",
        "hackbench completes with the LLC offline",
        "cpu2 online=1: ejected, restarted, attached again",
        "cpu3 online=1: ejected, restarted, attached again",
        "CPUs online at the end = 0-3",
        "every exit the loader saw was a hotplug restart",
        "offline back to back: attached",
        "online back to back: attached",
    ];
    let o = run_script(
        name,
        rel_vm(kernel, 1500 * rounds, &[("--smp", HOTPLUG_SMP)]),
        &format!("rel-hotplug.sh {rounds}"),
        &with_end(&checks),
        &[DL_SERVER_612],
    );
    assert_eq!(
        o.figure_u64("watchdog_stalls"),
        0,
        "{name}: watchdog stalls"
    );
    // per round: the last LLC's two CPUs off and on one by one (4), then two CPUs off and
    // on back to back (4)
    assert_eq!(
        o.figure_u64("hotplug_events"),
        u64::from(8 * rounds),
        "{name}: hotplug events"
    );
    println!(
        "==== rel {name}: HOTPLUG: {} events, {} loader restarts",
        o.figure("hotplug_events").unwrap_or("?"),
        o.figure("restarts").unwrap_or("?")
    );
}

vm_tests! {
    hotplug_7 = hotplug("7", env_u32("SISUTIL_REL_ROUNDS", 1));
    // tools/soak, not CI, since 2026-11-29: CI's time on an Intel host (677 s alone, 40 %
    // more than hotplug_7). hotplug_7 stays in CI: the loader's restart is the same code on
    // both kernels.
    #[ignore = "CI's time: tools/soak"]
    hotplug_6_12 = hotplug("6.12", env_u32("SISUTIL_REL_ROUNDS", 1));
}

// ---------------------------------------------------------------------------------------
// Task shapes.

fn shapes(name: &str, kernel: &str) {
    run_script(
        name,
        rel_vm(kernel, 1200, &[]),
        "rel-shapes.sh 10",
        &with_end(&[
            "still enabled after pinned hogs",
            "still enabled after",
            "affinity changes of running hogs",
            "nice levels of the 40 hogs = -20 -19",
            "still enabled after 40 hogs at nice -20..19",
            "policy of the batch hogs = SCHED_BATCH",
            "policy of the idle hogs = SCHED_IDLE",
            "still enabled after SCHED_BATCH and SCHED_IDLE hogs",
            "still enabled after fork/exec/clone storms",
            "still enabled after a fork tree of 511 processes",
        ]),
        &[],
    );
}

vm_tests! {
    shapes_7 = shapes("7");
    shapes_6_12 = shapes("6.12");
}

// ---------------------------------------------------------------------------------------
// Loader faults (SIGKILL, stale pin and socket, SIGSTOP), inputs, privileges.

fn faults(name: &str, kernel: &str) {
    let o = run_script(
        name,
        rel_vm(kernel, 900, &[]),
        "rel-faults.sh 10",
        &with_end(&[
            "features with no scheduler running: exit 1",
            "features NO_SIS_UTIL with no scheduler running: exit 1",
            "state disabled within ",
            "hackbench completes on the fair class after the SIGKILL",
            "stale pin /sys/fs/bpf/scx_sisutil/features and stale socket",
            "features against the stale pin: exit 1",
            "monitor waits on the stale socket",
            "JSON lines from the monitor that waited = 2",
            "switch reported = SIS_UTIL -> off SIS_PROP -> on",
            "the new instance runs with the switched features",
            "features as nobody: exit 1",
            "features SIS_UTIL NO_SIS_CORE as nobody: exit 1",
            "monitor as nobody: exit 1",
            "features (md5 of the list) after the unprivileged attempts",
            "still enabled, hackbench completed",
            "statistics flow again after SIGCONT",
        ]),
        &[],
    );
    println!(
        "==== rel {name}: SIGKILL -> disabled in {} guest s; SIGSTOP {} guest s without a watchdog exit",
        o.figure("sigkill_to_disabled_s").unwrap_or("?"),
        o.figure("sigstop_s").unwrap_or("?")
    );
}

vm_tests! {
    faults_7 = faults("7");
    faults_6_12 = faults("6.12");
}

// ---------------------------------------------------------------------------------------
// Topologies: attach, short load, clean exit.

fn topo(name: &str, kernel: &str, vm_opts: &[(&str, &str)], args: &str, timeout_s: u32) {
    let mut checks = vec![
        "topology after attach:",
        "LLCs in the stats after attach",
        "stress-ng (10 s) and hackbench completed",
        "still enabled after the load",
    ];
    if args.split_whitespace().count() >= 3 {
        checks.push("topology after onlining cpu");
    }
    let o = run_script(
        name,
        rel_vm(kernel, timeout_s, vm_opts),
        &format!("rel-topo.sh {args}"),
        &with_end(&checks),
        &[],
    );
    println!(
        "==== rel {name}: TOPOLOGY {}",
        o.figure("topology").unwrap_or("?")
    );
}

/// Holes in the CPU ids: maxcpus=6 keeps two CPUs offline at boot (the kernel brings up
/// 0-4,6 in APIC order), cpu1 goes offline before the start (rel-topo.sh's `1`); then one
/// of the CPUs kept offline at boot comes online under the scheduler (`auto`).
const HOLES: &[(&str, &str)] = &[("--append", "maxcpus=6")];

vm_tests! {
    topo_7_one_cpu = topo("7", ONE_CPU, "10", 600);
    // tools/soak, not CI, since 2026-11-29 (CI's time): its topology, one LLC of 4 CPUs
    // without SMT, is vm.rs basic_7_flat's, which attaches, loads and exits there in CI.
    #[ignore = "CI's time: tools/soak"]
    topo_7_no_smt = topo("7", FLAT4, "10", 600);
    topo_7_small_llcs = topo("7", SMALL_LLCS, "10", 900);
    topo_7_numa2 = topo("7", NUMA2, "10", 600);
    topo_7_holes = topo("7", HOLES, "10 1 auto", 600);
    #[ignore] topo_7_big_llc32 = topo("7", BIG_LLC32, "10", 1800);
    #[ignore] topo_6_12_one_cpu = topo("6.12", ONE_CPU, "10", 600);
    #[ignore] topo_6_12_no_smt = topo("6.12", FLAT4, "10", 600);
    #[ignore] topo_6_12_small_llcs = topo("6.12", SMALL_LLCS, "10", 900);
    #[ignore] topo_6_12_numa2 = topo("6.12", NUMA2, "10", 600);
    #[ignore] topo_6_12_holes = topo("6.12", HOLES, "10 1 auto", 600);
    #[ignore] topo_6_12_big_llc32 = topo("6.12", BIG_LLC32, "10", 1800);
}
