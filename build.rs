// SPDX-License-Identifier: GPL-2.0-only
//
// The scheduler's BPF object + skeleton + bindgen'ed intf.h, and the host
// test object (the wake-up steps without sched_ext, see src/bpf/sis_test.bpf.c).

use std::process::Command;

/// The commit this binary is built from, for `-V` (scx_utils::build_id's form: -gSHA).
fn git_build_id() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(sha) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return;
    };
    println!("cargo:rustc-env=SISUTIL_BUILD_ID=-g{sha}");
    // HEAD, and the branch it points to, move with every commit
    let mut watch = vec!["HEAD".to_string()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(r);
    }
    for f in watch {
        if let Some(p) = git(&["rev-parse", "--git-path", &f]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}

fn main() {
    git_build_id();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf")
        .build()
        .unwrap();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_skel("src/bpf/sis_test.bpf.c", "sis_test")
        .build()
        .unwrap();
    // `scx_sisutil latency`: the scheduler-independent wake-up latency tracer
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_skel("src/bpf/waitlat.bpf.c", "waitlat")
        .build()
        .unwrap();
}
