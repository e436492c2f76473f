// SPDX-License-Identifier: GPL-2.0-only
//! Checks of the built scheduler object (the BPF ELF the skeleton embeds), for what no host
//! run can see: the host kernel has no sched_ext, so ops.select_cpu is only verified and
//! run in the guests (tests/vm.rs). Here: the idle mask is fetched once per wake-up
//! (select_task_rq_fair(), sis.bpf.h) and put once, i.e. ops.select_cpu's program calls
//! scx_bpf_get_idle_cpumask and scx_bpf_put_idle_cpumask once each, read from the calls'
//! relocations. A second fetch in a step (e.g. wake_affine() taking its own again) or the
//! put left out breaks it. And two callbacks do their part (generated mutants that
//! survived, issue 35): ops.init prepares the CPUs (cpu_ctx_init(): its program reads the
//! possible mask), ops.quiescent updates the task's load (its program reads the clock).

/// The scheduler object, as built for the skeleton.
static OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bpf.bpf.o"));

const SHT_REL: u32 = 9;

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// An ELF64 section header's fields used here.
struct Sec {
    name: u32,
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
    info: usize,
}

fn sections(b: &[u8]) -> Vec<Sec> {
    assert_eq!(&b[..5], b"\x7fELF\x02", "bpf.bpf.o: not an ELF64 object");
    let (shoff, shentsize, shnum) = (
        u64_at(b, 0x28) as usize,
        u16_at(b, 0x3a) as usize,
        u16_at(b, 0x3c) as usize,
    );
    (0..shnum)
        .map(|i| {
            let h = shoff + i * shentsize;
            Sec {
                name: u32_at(b, h),
                kind: u32_at(b, h + 4),
                offset: u64_at(b, h + 0x18) as usize,
                size: u64_at(b, h + 0x20) as usize,
                link: u32_at(b, h + 0x28) as usize,
                info: u32_at(b, h + 0x2c) as usize,
            }
        })
        .collect()
}

/// The NUL-terminated string at `off` of string table `s`.
fn str_at<'a>(b: &'a [u8], s: &Sec, off: usize) -> &'a str {
    let start = s.offset + off;
    let end = start + b[start..].iter().position(|&c| c == 0).unwrap();
    std::str::from_utf8(&b[start..end]).unwrap()
}

/// The index of section `target` among `secs`.
fn section_at(b: &[u8], secs: &[Sec], target: &str) -> usize {
    let shstr = &secs[u16_at(b, 0x3e) as usize];
    secs.iter()
        .position(|s| str_at(b, shstr, s.name as usize) == target)
        .unwrap_or_else(|| panic!("bpf.bpf.o: no section {target}"))
}

/// How many relocations of section `target` name the symbol `sym` (each a call of it).
fn calls_in(b: &[u8], target: &str, sym: &str) -> usize {
    let secs = sections(b);
    let idx = section_at(b, &secs, target);
    let mut n = 0;
    for rel in secs.iter().filter(|s| s.kind == SHT_REL && s.info == idx) {
        let symtab = &secs[rel.link];
        let strtab = &secs[symtab.link];
        for r in (rel.offset..rel.offset + rel.size).step_by(16) {
            let s = (u64_at(b, r + 8) >> 32) as usize;
            let name = u32_at(b, symtab.offset + s * 24) as usize;
            if str_at(b, strtab, name) == sym {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn select_cpu_fetches_the_idle_mask_once() {
    let prog = "struct_ops/sisutil_select_cpu";
    assert_eq!(
        calls_in(OBJ, prog, "scx_bpf_get_idle_cpumask"),
        1,
        "fetches in {prog}"
    );
    assert_eq!(
        calls_in(OBJ, prog, "scx_bpf_put_idle_cpumask"),
        1,
        "puts in {prog}"
    );
}

/// The count can fail: the .text subprograms calib_record() (calib.bpf.h) and
/// kick_for_work() (kick.bpf.h) fetch the mask once each, and a symbol never called is
/// counted 0.
#[test]
fn idle_mask_call_count_sees_other_calls() {
    assert_eq!(calls_in(OBJ, ".text", "scx_bpf_get_idle_cpumask"), 2);
    assert_eq!(
        calls_in(OBJ, "struct_ops/sisutil_select_cpu", "no_such_kfunc"),
        0
    );
}

/// ops.init prepares every CPU (cpu_ctx_init(), ctx.bpf.h: the possible mask wake_allowed()
/// copies, each CPU's SIS_PROP state as sched_init() sets it, sis_prop_init(), whose values
/// decide_sis_prop_starts_as_sched_init checks): its program reads the possible mask, one
/// scx_bpf_get_possible_cpumask and one scx_bpf_put_cpumask. With the call of
/// cpu_ctx_init() gone (a generated mutant that survived, issue 35) it calls neither.
#[test]
fn init_prepares_the_cpus() {
    let prog = "struct_ops.s/sisutil_init";
    for kfunc in ["scx_bpf_get_possible_cpumask", "scx_bpf_put_cpumask"] {
        assert_eq!(calls_in(OBJ, prog, kfunc), 1, "calls of {kfunc} in {prog}");
    }
}

/// include/uapi/linux/bpf.h: BPF_FUNC_ktime_get_ns
const BPF_FUNC_KTIME_GET_NS: u32 = 5;

/// How many calls of helper `id` section `target`'s code makes: `call id` instructions
/// (BPF_JMP | BPF_CALL, 0x85, with src_reg 0: a helper, not a kfunc or a subprogram).
fn helper_calls(b: &[u8], target: &str, id: u32) -> usize {
    let secs = sections(b);
    let s = &secs[section_at(b, &secs, target)];
    (s.offset..s.offset + s.size)
        .step_by(8)
        .filter(|&i| b[i] == 0x85 && b[i + 1] >> 4 == 0 && u32_at(b, i + 4) == id)
        .count()
}

/// ops.quiescent updates the task's load (wake_load_quiescent(), wake.bpf.h:
/// task_load_update() at bpf_ktime_get_ns(); its decay: decide_task_load_decays_per_1024us):
/// the clock's one read in its program (vt_quiescent() and queue_left() read none). Without
/// the update (a generated mutant that survived, issue 35) it reads none. The count can
/// fail: ops.runnable reads the clock twice (the load's runnable_at, vt_runnable()).
#[test]
fn quiescent_updates_the_task_load() {
    let prog = "struct_ops/sisutil_quiescent";
    let n = helper_calls(OBJ, prog, BPF_FUNC_KTIME_GET_NS);
    assert_eq!(n, 1, "bpf_ktime_get_ns() in {prog}");
    let n = helper_calls(OBJ, "struct_ops/sisutil_runnable", BPF_FUNC_KTIME_GET_NS);
    assert_eq!(n, 2, "bpf_ktime_get_ns() in ops.runnable");
}
