// SPDX-License-Identifier: GPL-2.0-only
//
// The scheduler's BPF object + skeleton + bindgen'ed intf.h, and the host
// test object (the wake-up steps without sched_ext, see src/bpf/sis_test.bpf.c).

fn main() {
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
