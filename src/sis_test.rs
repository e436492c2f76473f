// SPDX-License-Identifier: GPL-2.0-only
//! Host BPF tests of the wake-up path (src/bpf/sis_test.bpf.c), see sis_model.rs.
//!
//! The BPF steps of sis.bpf.h (select_idle_sibling and below) run through the
//! real verifier and BPF_PROG_TEST_RUN on the host kernel, on a synthetic
//! topology (the object's .bss `topo`) and idle mask, and are compared with
//! the reference model of fair.c (sis_model.rs): same CPU, same has_idle_cores
//! hint afterwards, same counters - on hand-worked cases and on many random
//! states drawn from fixed seeds. Needs root (bpf()); no skip without it.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{OpenObject, ProgramInput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::bpf_intf as bi;
use crate::sis_model::{
    self, stat_name, Cpumask, Machine, Outcome, Wakeup, DEPTH_UNBOUNDED, STAT_NR,
};
use crate::topology::{copy_same_c_type, CpuDesc, TopoDesc};

mod skel {
    include!(concat!(env!("OUT_DIR"), "/sis_test_skel.rs"));
}
use skel::{types, SisTestSkel, SisTestSkelBuilder};

const MAX_CPUS: usize = bi::sis_consts_MAX_CPUS as usize;
const WORDS: usize = MAX_CPUS / 64;
const FEAT_SIS_CORE: u64 = bi::sis_feature_FEAT_SIS_CORE as u64;
const FEAT_ALL: u64 = bi::sis_feature_FEAT_ALL as u64;
/// the scheduler's default feature set (--preset patched) minus nothing
const PATCHED: u64 = (bi::sis_feature_FEAT_SIS_UTIL
    | bi::sis_feature_FEAT_SIS_CORE
    | bi::sis_feature_FEAT_WA_IDLE_PREV
    | bi::sis_feature_FEAT_WA_WEIGHT
    | bi::sis_feature_FEAT_TTWU_QUEUE_DESCHED
    | bi::sis_feature_FEAT_NEWIDLE_SKIP_IPI
    | bi::sis_feature_FEAT_KICK_SKIP_REDUNDANT) as u64;

/// What the BPF program reports for one call.
#[derive(Debug, PartialEq)]
struct BpfOut {
    cpu: i32,
    has_idle_cores: bool,
    /// p->recent_used_cpu after the call
    recent: i32,
    cnt: [u64; STAT_NR],
}

/// The loaded test object.
struct Bpf<'obj> {
    skel: SisTestSkel<'obj>,
}

impl<'obj> Bpf<'obj> {
    fn load(obj: &'obj mut MaybeUninit<OpenObject>) -> Self {
        assert_eq!(
            std::mem::size_of::<types::sis_test_args>(),
            std::mem::size_of::<bi::sis_test_args>()
        );
        // the verifier's log goes to stderr when a load fails
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, |_, msg| {
            eprint!("{msg}")
        })));
        let mut open = SisTestSkelBuilder::default()
            .open(obj)
            .expect("open sis_test.bpf.o");
        // fentry/bpf_scx_reg from the scx headers: no sched_ext on the host
        open.progs.scx_lib_init_probe.set_autoload(false);
        let skel = open
            .load()
            .expect("load sis_test.bpf.o (needs root and bpf() on the host)");
        Bpf { skel }
    }

    /// Write the topology into the object's .bss (mmapped: seen by the next run).
    fn set_topology(&mut self, desc: &TopoDesc) {
        let topo = desc.build().expect("topology");
        let bss = self.skel.maps.bss_data.as_mut().expect("bss mmapped");
        // SAFETY: both are `struct sis_topo` of intf.h
        unsafe { copy_same_c_type(&*topo, &mut bss.topo) };
    }

    fn run(&mut self, w: &Wakeup, features: u64) -> BpfOut {
        assert_eq!(
            features & FEAT_SIS_CORE != 0,
            w.sis_core,
            "test input: SIS_CORE in the feature word and in the model's state differ"
        );
        let mut args = types::sis_test_args {
            features,
            prev: w.prev as i32,
            target: w.target as i32,
            recent: w.recent,
            has_idle_cores: w.has_idle_cores as u32,
            depth: w.depth,
            idle: to_words(&w.idle),
            allowed: to_words(&w.allowed),
            cpu: -2,
            has_idle_cores_out: 2,
            recent_out: i32::MIN,
            cnt: [u64::MAX; STAT_NR],
            ..Default::default()
        };
        // SAFETY: plain-integer repr(C) struct, viewed as bytes for the call
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                &mut args as *mut types::sis_test_args as *mut u8,
                std::mem::size_of::<types::sis_test_args>(),
            )
        };
        let input = ProgramInput {
            context_in: Some(bytes),
            ..Default::default()
        };
        let ret = self
            .skel
            .progs
            .sis_test
            .test_run(input)
            .expect("BPF_PROG_TEST_RUN")
            .return_value;
        assert_eq!(ret, 0);
        // the kernel copied the program's writes back into ctx_in
        BpfOut {
            cpu: args.cpu,
            has_idle_cores: match args.has_idle_cores_out {
                0 => false,
                1 => true,
                v => panic!("has_idle_cores_out = {v}: not written"),
            },
            recent: match args.recent_out {
                i32::MIN => panic!("recent_out not written"),
                v => v,
            },
            cnt: args.cnt,
        }
    }
}

fn to_words(m: &Cpumask) -> [u64; WORDS] {
    let mut w = [0u64; WORDS];
    for &c in m.iter().filter(|&&c| c < MAX_CPUS) {
        w[c / 64] |= 1 << (c % 64);
    }
    w
}

fn from_words(w: &[u64; WORDS]) -> Cpumask {
    (0..MAX_CPUS)
        .filter(|&c| w[c / 64] & (1 << (c % 64)) != 0)
        .collect()
}

fn model_as_bpf(o: &Outcome) -> BpfOut {
    BpfOut {
        cpu: o.cpu as i32,
        has_idle_cores: o.has_idle_cores,
        recent: o.recent,
        cnt: o.cnt,
    }
}

/// Human-readable difference between two results, named `a` and `b`.
fn diff(a_name: &str, a: &BpfOut, b_name: &str, b: &BpfOut) -> String {
    let mut s = format!(
        "cpu {a_name} {} {b_name} {}; has_idle_cores {a_name} {} {b_name} {}; \
         recent {a_name} {} {b_name} {}",
        a.cpu, b.cpu, a.has_idle_cores, b.has_idle_cores, a.recent, b.recent
    );
    for i in 0..STAT_NR {
        if a.cnt[i] != b.cnt[i] {
            s += &format!(
                "; {} {a_name} {} {b_name} {}",
                stat_name(i),
                a.cnt[i],
                b.cnt[i]
            );
        }
    }
    s
}

fn cpu(id: usize, llc: usize, core: usize) -> CpuDesc {
    CpuDesc {
        id,
        llc,
        core,
        node: 0,
    }
}

/// x86 enumeration: the SMT sibling of CPU i is i + 8, so an LLC's span is
/// not contiguous ({0-3, 8-11} and {4-7, 12-15}).
fn topo_x86_siblings() -> TopoDesc {
    TopoDesc {
        cpus: (0..16).map(|i| cpu(i, (i % 8) / 4, i % 8)).collect(),
    }
}

/// Holes in the ids (8 and 14 absent), interleaved LLCs, cores of 1, 2 and
/// 3 threads.
fn topo_holes() -> TopoDesc {
    let llc0: &[&[usize]] = &[&[0], &[2, 3], &[6, 7], &[9], &[12, 13]];
    let llc1: &[&[usize]] = &[&[1], &[4, 5], &[10, 11], &[15, 16, 17]];
    let mut cpus = vec![];
    for (llc, cores) in [llc0, llc1].into_iter().enumerate() {
        for sibs in cores {
            for &id in sibs.iter() {
                cpus.push(cpu(id, llc, sibs[0]));
            }
        }
    }
    TopoDesc { cpus }
}

/// Ids across bitmap words (63/64, 127/128, 511), an LLC of one CPU.
fn topo_high_ids() -> TopoDesc {
    let mut cpus: Vec<CpuDesc> = (60..68).map(|i| cpu(i, 0, i & !1)).collect();
    cpus.extend([
        cpu(127, 1, 127),
        cpu(128, 1, 127),
        cpu(300, 1, 300),
        cpu(511, 1, 511),
    ]);
    cpus.push(cpu(0, 2, 0));
    TopoDesc { cpus }
}

fn topologies() -> Vec<(&'static str, TopoDesc)> {
    vec![
        ("1llc-8cpu-nosmt", TopoDesc::synthetic(1, 8, 1, 1)),
        ("2llc-4core-smt2", TopoDesc::synthetic(2, 4, 2, 1)),
        ("4llc-4core-smt2", TopoDesc::synthetic(4, 4, 2, 2)),
        ("1llc-16cpu-nosmt", TopoDesc::synthetic(1, 16, 1, 1)),
        ("1llc-32core-smt2", TopoDesc::synthetic(1, 32, 2, 1)),
        ("2llc-2core-smt4", TopoDesc::synthetic(2, 2, 4, 1)),
        ("x86-siblings", topo_x86_siblings()),
        ("holes", topo_holes()),
        ("high-ids", topo_high_ids()),
    ]
}

/// One random state: a wake-up on machine `m` plus the feature word.
fn random_state(rng: &mut StdRng, m: &Machine) -> (Wakeup, u64) {
    let present: Vec<usize> = m.cpus().collect();
    let pick = |rng: &mut StdRng| present[rng.gen_range(0..present.len())];
    let n = m.nr_cpu_ids;

    // a random mask over every id below nr_cpu_ids, holes included: the code
    // must never look at a CPU that is not in the LLC
    let random_mask =
        |rng: &mut StdRng, p: f64| -> Cpumask { (0..n).filter(|_| rng.gen_bool(p)).collect() };

    let density = [0.0, 0.1, 0.5, 0.9, 1.0][rng.gen_range(0..5)];
    let mut idle = random_mask(rng, density);

    let mut allowed = match rng.gen_range(0..3) {
        0 => (0..MAX_CPUS).collect(), // all: the whole cpumask
        1 => random_mask(rng, 0.8),
        _ => random_mask(rng, 0.2),
    };

    let target = pick(rng);
    let prev = match rng.gen_range(0..4) {
        0 => target,
        1 => {
            // a CPU of target's LLC
            let span: Vec<usize> = m.llc_span_of(target).unwrap().iter().copied().collect();
            span[rng.gen_range(0..span.len())]
        }
        _ => pick(rng),
    };
    let recent = match rng.gen_range(0..20) {
        0..=2 => -1,
        3..=4 => prev as i32,
        5..=6 => target as i32,
        7 => rng.gen_range(0..n) as i32, // maybe a hole
        _ => pick(rng) as i32,
    };

    // the kernel's invariant: prev and target are allowed (half of the states)
    if rng.gen_bool(0.5) {
        allowed.insert(prev);
        allowed.insert(target);
    }
    // reach the slow paths more often: busy target, prev, recent
    if rng.gen_bool(0.6) {
        idle.remove(&target);
        if rng.gen_bool(0.6) {
            idle.remove(&prev);
        }
        if recent >= 0 && rng.gen_bool(0.5) {
            idle.remove(&(recent as usize));
        }
    }

    let weight = m.llc_span_of(target).unwrap().len() as u32;
    let depth = match rng.gen_range(0..5) {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => rng.gen_range(0..=weight + 2),
        _ => DEPTH_UNBOUNDED,
    };
    let mut features = rng.gen::<u64>() & FEAT_ALL;
    let sis_core = rng.gen_bool(0.5);
    if sis_core {
        features |= FEAT_SIS_CORE;
    } else {
        features &= !FEAT_SIS_CORE;
    }

    let w = Wakeup {
        prev,
        target,
        recent,
        has_idle_cores: rng.gen_bool(0.5),
        depth,
        sis_core,
        idle,
        allowed,
    };
    (w, features)
}

/// Which way a call ended, from the model's counters: the random states
/// must reach every one of them for the comparison to mean anything.
fn path_of(o: &Outcome, w: &Wakeup) -> &'static str {
    let c = |s: u32| o.cnt[s as usize];
    if c(bi::sis_stat_STAT_RECENT) > 0 {
        "recent"
    } else if c(bi::sis_stat_STAT_FAST) > 0 {
        if o.cpu == w.target {
            "fast target"
        } else {
            "fast prev"
        }
    } else if c(bi::sis_stat_STAT_SMT) > 0 {
        "smt sibling"
    } else if c(bi::sis_stat_STAT_SCAN_SKIPPED) > 0 {
        "scan skipped (depth 0)"
    } else if c(bi::sis_stat_STAT_HIT_SIS_CORE) > 0 {
        "idle core"
    } else if c(bi::sis_stat_STAT_CORE_FAILED) > 0 {
        if c(bi::sis_stat_STAT_FAILED) > 0 {
            "core search, nothing"
        } else {
            "core search, fallback thread"
        }
    } else if c(bi::sis_stat_STAT_DEPTH_LIMITED) > 0 {
        "depth limited"
    } else if c(bi::sis_stat_STAT_FAILED) > 0 {
        "scan, nothing"
    } else {
        "scan, idle cpu"
    }
}

const PATHS: [&str; 11] = [
    "fast target",
    "fast prev",
    "recent",
    "smt sibling",
    "scan skipped (depth 0)",
    "idle core",
    "core search, fallback thread",
    "core search, nothing",
    "depth limited",
    "scan, nothing",
    "scan, idle cpu",
];

/// The counting convention and the recent_used_cpu rule, checked on one
/// result (the model's or the BPF's) on its own, so that a mistake shared
/// by both still fails. The target's LLC always exists in the random states.
fn convention_errors(o: &BpfOut, w: &Wakeup) -> Vec<String> {
    let c = |s: u32| o.cnt[s as usize];
    let (search, scanned) = (c(bi::sis_stat_STAT_SEARCH), c(bi::sis_stat_STAT_SCANNED));
    let (dom_search, dom_scanned) = (
        c(bi::sis_stat_STAT_DOMAIN_SEARCH),
        c(bi::sis_stat_STAT_DOMAIN_SCANNED),
    );
    let fast = c(bi::sis_stat_STAT_FAST);
    let mut e = vec![];
    if search != 1 {
        e.push(format!("search {search} != 1"));
    }
    // mmtests: each search is exactly one fast-path scan
    if dom_scanned + search != scanned {
        e.push(format!(
            "domain_scanned {dom_scanned} != scanned {scanned} - search {search}"
        ));
    }
    // a fast hit is 100% efficiency; otherwise the domain search is counted
    if fast == 1 && (scanned != 1 || dom_search != 0) {
        e.push(format!(
            "fast hit with scanned {scanned} domain_search {dom_search}"
        ));
    }
    if fast + dom_search != 1 {
        e.push(format!("fast {fast} + domain_search {dom_search} != 1"));
    }
    // recent_used_cpu becomes prev after the prev check, unchanged when the
    // call returned at target or prev
    let at_target_or_prev = fast == 1 && c(bi::sis_stat_STAT_RECENT) == 0;
    let want = if at_target_or_prev {
        w.recent
    } else {
        w.prev as i32
    };
    if o.recent != want {
        e.push(format!("recent_used_cpu {} != {want}", o.recent));
    }
    e
}

const SEED: u64 = 0x5151_0000;
const STATES_PER_TOPOLOGY: usize = 4000;

#[test]
fn sis_random_states_match_model() {
    let mut obj = MaybeUninit::uninit();
    let mut bpf = Bpf::load(&mut obj);
    let started = std::time::Instant::now();
    let mut paths = std::collections::BTreeMap::<&str, usize>::new();
    let mut failures = vec![];
    let mut total = 0;

    for (ti, (name, desc)) in topologies().into_iter().enumerate() {
        let m = Machine::new(&desc);
        bpf.set_topology(&desc);
        for i in 0..STATES_PER_TOPOLOGY {
            // one seed per state: a failure is reproduced from its seed alone
            let seed = SEED + (ti * 1_000_000 + i) as u64;
            let mut rng = StdRng::seed_from_u64(seed);
            let (w, features) = random_state(&mut rng, &m);
            let want = sis_model::select_idle_sibling(&m, &w);
            let got = bpf.run(&w, features);
            let model = model_as_bpf(&want);
            *paths.entry(path_of(&want, &w)).or_default() += 1;
            total += 1;
            for (who, out) in [("model", &model), ("bpf", &got)] {
                for e in convention_errors(out, &w) {
                    failures.push(format!("topology {name} seed {seed:#x}: {who}: {e}"));
                }
            }
            if model != got {
                failures.push(format!(
                    "topology {name} seed {seed:#x}: {}\n  state: prev {} target {} recent {} \
                     has_idle_cores {} depth {} features {features:#x}\n  idle {:?}\n  allowed {:?}",
                    diff("model", &model, "bpf", &got),
                    w.prev,
                    w.target,
                    w.recent,
                    w.has_idle_cores,
                    w.depth as i32,
                    w.idle,
                    if w.allowed.len() == MAX_CPUS {
                        "all".to_string()
                    } else {
                        format!("{:?}", w.allowed)
                    },
                ));
            }
        }
    }

    println!(
        "{total} states in {:.2}s, paths:",
        started.elapsed().as_secs_f64()
    );
    for (p, n) in &paths {
        println!("  {p:<30} {n}");
    }
    if !failures.is_empty() {
        for f in failures.iter().take(10) {
            eprintln!("MISMATCH {f}");
        }
        panic!(
            "{} failures in {total} states (model differs, or the counting convention broken)",
            failures.len()
        );
    }
    // the comparison only means something where the states reach
    for p in PATHS {
        let n = paths.get(p).copied().unwrap_or(0);
        assert!(n >= 100, "path '{p}' reached by only {n} states");
    }
    assert!(total >= 20_000);
}

/// A hand-worked case: the expected CPU, hint, recent_used_cpu afterwards
/// and every non-zero counter.
///
/// Counting convention (Mel Gorman's SIS schedstats, see sis_model.rs): the
/// fast checks of target, prev and recent are ONE scan (SCANNED +1 at
/// entry, however many of them are probed); DOMAIN_SEARCH +1 once they
/// failed, before the SMT sibling check; then every CPU probed (sibling,
/// core thread, __select_idle_cpu) is +1 SCANNED and +1 DOMAIN_SCANNED.
/// recent_used_cpu becomes prev once the prev check failed.
struct Case {
    what: &'static str,
    desc: TopoDesc,
    w: Wakeup,
    features: u64,
    cpu: usize,
    hint: bool,
    recent: i32,
    counters: &'static [(u32, u64)],
}

fn wake(prev: usize, target: usize, idle: &[usize]) -> Wakeup {
    Wakeup {
        prev,
        target,
        recent: -1,
        has_idle_cores: false,
        depth: DEPTH_UNBOUNDED,
        sis_core: true,
        idle: idle.iter().copied().collect(),
        allowed: (0..MAX_CPUS).collect(),
    }
}

use bi::{
    sis_stat_STAT_CORE_FAILED as CORE_FAILED, sis_stat_STAT_CORE_SEARCH as CORE_SEARCH,
    sis_stat_STAT_DEPTH_LIMITED as DEPTH_LIMITED, sis_stat_STAT_DOMAIN_SCANNED as DOM_SCANNED,
    sis_stat_STAT_DOMAIN_SEARCH as DOM_SEARCH, sis_stat_STAT_FAILED as FAILED,
    sis_stat_STAT_FAST as FAST, sis_stat_STAT_HIT_SIS_CORE as HIT_CORE,
    sis_stat_STAT_HIT_SIS_UTIL as HIT_UTIL, sis_stat_STAT_RECENT as RECENT,
    sis_stat_STAT_SCANNED as SCANNED, sis_stat_STAT_SCAN_SKIPPED as SKIPPED,
    sis_stat_STAT_SEARCH as SEARCH, sis_stat_STAT_SMT as SMT,
};

fn hand_cases() -> Vec<Case> {
    let flat8 = || TopoDesc::synthetic(1, 8, 1, 1); // CPUs 0-7, one LLC
    let two_llc = || TopoDesc::synthetic(2, 2, 2, 1); // {0,1}{2,3} | {4,5}{6,7}
    let smt8 = || TopoDesc::synthetic(1, 4, 2, 1); // {0,1}{2,3}{4,5}{6,7}
    let with = |mut w: Wakeup, f: &dyn Fn(&mut Wakeup)| {
        f(&mut w);
        w
    };
    let no_core = PATCHED & !FEAT_SIS_CORE;
    vec![
        Case {
            // fast: target 2 busy, prev == target, no recent -> 1 scan.
            // domain search (no SMT): 3 4 5 busy, 6 idle -> 4 probed.
            // scanned 1 + 4 = 5. recent <- prev 2.
            what: "target 2 busy, idle {0,6}: scan 3,4,5,6",
            desc: flat8(),
            w: wake(2, 2, &[0, 6]),
            features: PATCHED,
            cpu: 6,
            hint: false,
            recent: 2,
            counters: &[(SEARCH, 1), (SCANNED, 5), (DOM_SEARCH, 1), (DOM_SCANNED, 4)],
        },
        Case {
            // nr = 4: 3 (nr 3), 4 (nr 2), 5 (nr 1) probed, at 6 --nr = 0
            // stops. scanned 1 + 3 = 4, failed: target.
            what: "depth 3: 3,4,5 probed, --nr hits 0 before 6",
            desc: flat8(),
            w: with(wake(2, 2, &[0, 6]), &|w| w.depth = 3),
            features: PATCHED,
            cpu: 2,
            hint: false,
            recent: 2,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 4),
                (DOM_SEARCH, 1),
                (DOM_SCANNED, 3),
                (DEPTH_LIMITED, 1),
                (HIT_UTIL, 1),
                (FAILED, 1),
            ],
        },
        Case {
            // nr = 5: 3, 4, 5, 6 probed (nr 4..1), 6 idle. 1 + 4 = 5.
            what: "depth 4 reaches 6",
            desc: flat8(),
            w: with(wake(2, 2, &[0, 6]), &|w| w.depth = 4),
            features: PATCHED,
            cpu: 6,
            hint: false,
            recent: 2,
            counters: &[(SEARCH, 1), (SCANNED, 5), (DOM_SEARCH, 1), (DOM_SCANNED, 4)],
        },
        Case {
            // the domain search is counted, then nr == 1 skips the scan:
            // only the fast scan, a failed domain search with 0 probes.
            what: "depth 0: no scan",
            desc: flat8(),
            w: with(wake(2, 2, &[0, 6]), &|w| w.depth = 0),
            features: PATCHED,
            cpu: 2,
            hint: false,
            recent: 2,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 1),
                (DOM_SEARCH, 1),
                (SKIPPED, 1),
                (HIT_UTIL, 1),
                (FAILED, 1),
            ],
        },
        Case {
            // from 7: 7, 0, 1 probed (1 idle). 1 + 3 = 4.
            what: "wrap: target 6, idle {1}: 7,0,1",
            desc: flat8(),
            w: wake(6, 6, &[1]),
            features: PATCHED,
            cpu: 1,
            hint: false,
            recent: 6,
            counters: &[(SEARCH, 1), (SCANNED, 4), (DOM_SEARCH, 1), (DOM_SCANNED, 3)],
        },
        Case {
            // 3 4 5 6 7 0 1 2: all 8 of the LLC probed, target 2 again last
            // (the fast check of 2 is in the one fast scan). 1 + 8 = 9.
            what: "nothing idle: 8 CPUs scanned, target probed again last",
            desc: flat8(),
            w: wake(2, 2, &[]),
            features: PATCHED,
            cpu: 2,
            hint: false,
            recent: 2,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 9),
                (DOM_SEARCH, 1),
                (DOM_SCANNED, 8),
                (FAILED, 1),
            ],
        },
        Case {
            // one fast scan, hit: se_eff 100%. Returned before recent is
            // touched: recent stays -1.
            what: "target idle",
            desc: flat8(),
            w: wake(5, 2, &[2, 5]),
            features: PATCHED,
            cpu: 2,
            hint: false,
            recent: -1,
            counters: &[(SEARCH, 1), (SCANNED, 1), (FAST, 1)],
        },
        Case {
            // target 2 and prev 5 probed, both within the one fast scan:
            // 100% efficiency. recent untouched (-1).
            what: "prev idle, same LLC",
            desc: flat8(),
            w: wake(5, 2, &[5, 6]),
            features: PATCHED,
            cpu: 5,
            hint: false,
            recent: -1,
            counters: &[(SEARCH, 1), (SCANNED, 1), (FAST, 1)],
        },
        Case {
            // target 2, prev 5, recent 7 probed: still one scan. recent
            // was replaced by prev 5 before 7 was checked.
            what: "recent_used_cpu idle",
            desc: flat8(),
            w: with(wake(5, 2, &[6, 7]), &|w| w.recent = 7),
            features: PATCHED,
            cpu: 7,
            hint: false,
            recent: 5,
            counters: &[(SEARCH, 1), (SCANNED, 1), (FAST, 1), (RECENT, 1)],
        },
        Case {
            // target 2, prev 5, recent 7 all busy: 1 fast scan. Then the
            // domain scan from 3: 3 4 5 6 7 0 (0 idle) -> 6 probes. 1 + 6.
            what: "target, prev, recent busy: three probes are one scan",
            desc: flat8(),
            w: with(wake(5, 2, &[0]), &|w| w.recent = 7),
            features: PATCHED,
            cpu: 0,
            hint: false,
            recent: 5,
            counters: &[(SEARCH, 1), (SCANNED, 7), (DOM_SEARCH, 1), (DOM_SCANNED, 6)],
        },
        Case {
            // nr = 2; 3 4 5 not allowed (no --nr), 6: --nr = 1, probed, idle.
            what: "allowed {2,6}: disallowed CPUs cost no depth",
            desc: flat8(),
            w: with(wake(2, 2, &[4, 6]), &|w| {
                w.allowed = [2, 6].into_iter().collect();
                w.depth = 1;
            }),
            features: PATCHED,
            cpu: 6,
            hint: false,
            recent: 2,
            counters: &[(SEARCH, 1), (SCANNED, 2), (DOM_SEARCH, 1), (DOM_SCANNED, 1)],
        },
        Case {
            // fast: target 0, prev 2 busy (one scan). Domain search counted
            // before the SMT check; sibling 3 of prev probed, idle: a
            // successful domain search of 1 probe. 1 + 1 = 2.
            what: "idle SMT sibling of prev",
            desc: two_llc(),
            w: wake(2, 0, &[3, 5]),
            features: PATCHED,
            cpu: 3,
            hint: false,
            recent: 2,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 2),
                (DOM_SEARCH, 1),
                (DOM_SCANNED, 1),
                (SMT, 1),
            ],
        },
        Case {
            // sibling 3 busy (1 probe), then the scan from 1: 1 idle (1
            // probe). One domain search of 2 probes. 1 + 2 = 3.
            what: "SMT sibling busy, then the LLC scan: one domain search",
            desc: two_llc(),
            w: wake(2, 0, &[1]),
            features: PATCHED,
            cpu: 1,
            hint: false,
            recent: 2,
            counters: &[(SEARCH, 1), (SCANNED, 3), (DOM_SEARCH, 1), (DOM_SCANNED, 2)],
        },
        Case {
            // no sibling check; scan from 1 in {0,1,2,3}: 1, 2, 3 (idle).
            // 1 + 3 = 4.
            what: "NO_SIS_CORE: no sibling check, scan 1,2,3",
            desc: two_llc(),
            w: wake(2, 0, &[3, 5]),
            features: no_core,
            cpu: 3,
            hint: false,
            recent: 2,
            counters: &[(SEARCH, 1), (SCANNED, 4), (DOM_SEARCH, 1), (DOM_SCANNED, 3)],
        },
        Case {
            // prev 5 is not cache affine: neither probed nor its sibling;
            // scan 1, 2, 3 (idle). 1 + 3 = 4. recent <- prev 5 all the same.
            what: "prev in the other LLC: neither prev nor its sibling",
            desc: two_llc(),
            w: wake(5, 0, &[3, 5]),
            features: PATCHED,
            cpu: 3,
            hint: false,
            recent: 5,
            counters: &[(SEARCH, 1), (SCANNED, 4), (DOM_SEARCH, 1), (DOM_SCANNED, 3)],
        },
        Case {
            // hint set: no sibling check. Core scan from 1: core {0,1}
            // 0 busy, 1 busy (2 probes, no fallback yet); core {2,3}: 2
            // busy, 3 idle = fallback (2); core {4,5}: 4 busy, fallback
            // known -> break (1); core {6,7}: both idle (2) -> core 6.
            // 7 probes, 1 + 7 = 8.
            what: "idle core {6,7} after busy cores, fallback 3 seen",
            desc: smt8(),
            w: with(wake(0, 0, &[3, 6, 7]), &|w| w.has_idle_cores = true),
            features: PATCHED,
            cpu: 6,
            hint: true,
            recent: 0,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 8),
                (DOM_SEARCH, 1),
                (DOM_SCANNED, 7),
                (CORE_SEARCH, 1),
                (HIT_CORE, 1),
            ],
        },
        Case {
            // same walk as above: the core search ignores nr.
            what: "depth 1 does not bound the core search",
            desc: smt8(),
            w: with(wake(0, 0, &[3, 6, 7]), &|w| {
                w.has_idle_cores = true;
                w.depth = 1;
            }),
            features: PATCHED,
            cpu: 6,
            hint: true,
            recent: 0,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 8),
                (DOM_SEARCH, 1),
                (DOM_SCANNED, 7),
                (CORE_SEARCH, 1),
                (HIT_CORE, 1),
            ],
        },
        Case {
            // {0,1}: 2 probes; {2,3}: 2 busy, 3 fallback (2); {4,5}: 4
            // busy -> break (1); {6,7}: 6 busy -> break (1). 6 probes,
            // 1 + 6 = 7; no idle core: hint cleared, fallback 3 taken.
            what: "no idle core: hint cleared, fallback thread 3",
            desc: smt8(),
            w: with(wake(0, 0, &[3, 7]), &|w| w.has_idle_cores = true),
            features: PATCHED,
            cpu: 3,
            hint: false,
            recent: 0,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 7),
                (DOM_SEARCH, 1),
                (DOM_SCANNED, 6),
                (CORE_SEARCH, 1),
                (CORE_FAILED, 1),
            ],
        },
        Case {
            // 3 not in cpus: {0,1} 2 probes; {2,3} 2 (3 idle, not a
            // fallback); {4,5} 2 (no fallback yet, keep going); {6,7}: 6
            // busy, 7 idle = fallback (2). 8 probes, 1 + 8 = 9.
            what: "fallback must be allowed: 3 not allowed, 7 taken",
            desc: smt8(),
            w: with(wake(0, 0, &[3, 7]), &|w| {
                w.has_idle_cores = true;
                w.allowed = [0, 1, 2, 4, 5, 6, 7].into_iter().collect();
            }),
            features: PATCHED,
            cpu: 7,
            hint: false,
            recent: 0,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 9),
                (DOM_SEARCH, 1),
                (DOM_SCANNED, 8),
                (CORE_SEARCH, 1),
                (CORE_FAILED, 1),
            ],
        },
        Case {
            // domain search counted, core search started, nr == 1: skipped
            // before any probe. Only the fast scan; hint kept.
            what: "depth 0 with the hint set: no scan, hint kept",
            desc: smt8(),
            w: with(wake(0, 0, &[3, 6, 7]), &|w| {
                w.has_idle_cores = true;
                w.depth = 0;
            }),
            features: PATCHED,
            cpu: 0,
            hint: true,
            recent: 0,
            counters: &[
                (SEARCH, 1),
                (SCANNED, 1),
                (DOM_SEARCH, 1),
                (CORE_SEARCH, 1),
                (SKIPPED, 1),
                (HIT_UTIL, 1),
                (FAILED, 1),
            ],
        },
        Case {
            // from 4: 4-7 are not in the LLC, 8 is the first probe, idle.
            // 1 + 1 = 2.
            what: "x86 siblings: LLC {0-3,8-11}, target 3 wraps to 8 first",
            desc: topo_x86_siblings(),
            w: wake(3, 3, &[2, 8]),
            features: no_core,
            cpu: 8,
            hint: false,
            recent: 3,
            counters: &[(SEARCH, 1), (SCANNED, 2), (DOM_SEARCH, 1), (DOM_SCANNED, 1)],
        },
    ]
}

#[test]
fn sis_hand_worked_cases() {
    let mut obj = MaybeUninit::uninit();
    let mut bpf = Bpf::load(&mut obj);
    let mut bad = vec![];
    for case in hand_cases() {
        let mut w = case.w.clone();
        w.sis_core = case.features & FEAT_SIS_CORE != 0;
        let mut cnt = [0u64; STAT_NR];
        for &(s, v) in case.counters {
            cnt[s as usize] = v;
        }
        let expected = BpfOut {
            cpu: case.cpu as i32,
            has_idle_cores: case.hint,
            recent: case.recent,
            cnt,
        };
        let m = Machine::new(&case.desc);
        let model = model_as_bpf(&sis_model::select_idle_sibling(&m, &w));
        bpf.set_topology(&case.desc);
        let got = bpf.run(&w, case.features);
        if model != expected {
            bad.push(format!(
                "{}: {}",
                case.what,
                diff("hand", &expected, "model", &model)
            ));
        }
        if got != expected {
            bad.push(format!(
                "{}: {}",
                case.what,
                diff("hand", &expected, "bpf", &got)
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The harness itself: bitmaps round-trip, and the program writes every
/// output (the sentinels in run() are overwritten).
#[test]
fn sis_harness_bitmaps_and_outputs() {
    let m: Cpumask = [0, 1, 63, 64, 127, 128, 300, 511].into_iter().collect();
    assert_eq!(from_words(&to_words(&m)), m);

    let mut obj = MaybeUninit::uninit();
    let mut bpf = Bpf::load(&mut obj);
    let desc = topo_high_ids();
    bpf.set_topology(&desc);
    // CPU 511 is the only idle one of LLC 1 {127,128,300,511}: target 128
    // scans 300, 511 (bit 511 = last bit of the last word)
    let w = Wakeup {
        sis_core: false,
        ..wake(128, 128, &[511])
    };
    let got = bpf.run(&w, PATCHED & !FEAT_SIS_CORE);
    assert_eq!(got.cpu, 511, "{got:?}");
    assert_eq!(got.cnt[DOM_SCANNED as usize], 2);
    // target 128 busy: recent_used_cpu (-1) became prev 128
    assert_eq!(got.recent, 128);
    let model = sis_model::select_idle_sibling(&Machine::new(&desc), &w);
    assert_eq!(model_as_bpf(&model), got);
}
