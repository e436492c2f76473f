// SPDX-License-Identifier: GPL-2.0-only
//! Host BPF tests of the wake-up path (src/bpf/testing/sis_test.bpf.c), see sis_model.rs.
//!
//! The scheduler's own select_task_rq_fair() (src/bpf/sis.bpf.h: wake_wide,
//! wake_affine_idle/_weight, select_idle_sibling, select_idle_smt/cpu/core,
//! SIS_UTIL and SIS_PROP depths read from the per-LLC and per-CPU state)
//! runs through the real verifier and BPF_PROG_TEST_RUN on the host kernel,
//! on a synthetic topology and state (the object's .bss: topo, llc_ctxs,
//! cpu_ctxs, nr_running), and is compared with the model written from fair.c
//! (sis_model.rs): same CPU, same state afterwards, same counters - on
//! hand-worked cases and on random states drawn from fixed seeds, per
//! feature set. Needs root (bpf()); no skip without it.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::bpf_intf as bi;
use crate::sched::bpf_maps::run_with_ctx;
use crate::sched::features::bit;
use crate::sched::topology::{copy_same_c_type, CpuDesc, TopoDesc};
use crate::testing::sis_model::{
    self, stat_name, Cpumask, Flips, Machine, Outcome, Wakeup, STAT_NR,
};
use crate::testing::test_intf;

/// The host test object (src/bpf/testing/sis_test.bpf.c), also driven by calib_test.rs.
pub(crate) mod skel {
    include!(concat!(env!("OUT_DIR"), "/sis_test_skel.rs"));
}
use skel::{types, SisTestSkel, SisTestSkelBuilder};

pub(crate) const MAX_CPUS: usize = bi::sis_consts_MAX_CPUS as usize;
pub(crate) const WORDS: usize = MAX_CPUS / 64;

/// the scheduler's default feature set (--preset patched)
const PATCHED: u64 = bi::sis_preset_PRESET_PATCHED as u64;

/// The feature sets of the random comparison: each gets its own states.
const FEATURE_SETS: [(&str, u64); 6] = [
    ("none", 0),
    ("SIS_UTIL", bit::SIS_UTIL),
    ("SIS_PROP", bit::SIS_PROP),
    (
        "SIS_PROP SIS_CORE WA_IDLE_PREV",
        bit::SIS_PROP | bit::SIS_CORE | bit::WA_IDLE_PREV,
    ),
    (
        "SIS_UTIL SIS_PROP SIS_CORE WA_WEIGHT",
        bit::SIS_UTIL | bit::SIS_PROP | bit::SIS_CORE | bit::WA_WEIGHT,
    ),
    ("patched", PATCHED),
];

/// The BPF program's answer, in the model's terms.
fn run_bpf(bpf: &mut Bpf, m: &Machine, llc_ids: &[usize], w: &Wakeup) -> Outcome {
    bpf.set_state(m, llc_ids, w);
    let mut args = types::sis_test_args {
        features: w.features,
        prev: w.prev as i32,
        this_cpu: w.this_cpu as i32,
        sync: w.sync as u32,
        recent: w.recent,
        wakee_id: w.wakee_id as u32,
        pcpu_kthread: w.pcpu_kthread as u32,
        waker_last_wakee: w.waker.last_wakee,
        waker_flips: w.waker.wakee_flips,
        waker_decay_ts: w.waker.wakee_flip_decay_ts,
        wakee_flips: w.wakee_flips,
        hz: w.hz as u32,
        jiffies: w.jiffies,
        waker_load: w.waker_load,
        wakee_load: w.wakee_load,
        imbalance_pct: w.imbalance_pct,
        idle: to_words(&w.idle),
        allowed: to_words(&w.allowed),
        cpu: -2,
        recent_out: i32::MIN,
        waker_last_wakee_out: i32::MIN,
        cnt: [u64::MAX; STAT_NR],
        ..Default::default()
    };
    // SAFETY: tool_intf.h's struct sis_test_args, plain integers
    let ret = unsafe { run_with_ctx(&bpf.skel.progs.sis_test, &mut args) }.unwrap();
    // counted in place: every counter in the row of the chosen CPU's LLC, none elsewhere
    assert_eq!(ret, 0, "counters outside the row of the chosen CPU's LLC");
    assert!(
        args.cpu != -2 && args.recent_out != i32::MIN,
        "outputs not written"
    );
    let bss = bpf.skel.maps.bss_data.as_ref().expect("bss mmapped");
    let this = &bss.cpu_ctxs[w.this_cpu];
    Outcome {
        cpu: args.cpu as usize,
        recent: args.recent_out,
        waker: Flips {
            last_wakee: args.waker_last_wakee_out,
            wakee_flips: args.waker_flips_out,
            wakee_flip_decay_ts: args.waker_decay_ts_out,
        },
        has_idle_cores: llc_ids
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, bss.llc_ctxs[i].has_idle_cores != 0))
            .collect(),
        wake_avg_idle: this.wake_avg_idle,
        wake_stamp: this.wake_stamp,
        avg_scan_cost: this.avg_scan_cost,
        cnt: args.cnt,
    }
}

/// The loaded test object.
/// Open and load the host test object through the host's verifier (needs root).
pub(crate) fn load_skel(obj: &mut MaybeUninit<OpenObject>) -> SisTestSkel<'_> {
    assert_eq!(
        std::mem::size_of::<types::sis_test_args>(),
        std::mem::size_of::<crate::tools::tool_intf::sis_test_args>()
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
    open.load()
        .expect("load sis_test.bpf.o (needs root and bpf() on the host)")
}

struct Bpf<'obj> {
    skel: SisTestSkel<'obj>,
}

impl<'obj> Bpf<'obj> {
    fn load(obj: &'obj mut MaybeUninit<OpenObject>) -> Self {
        Bpf {
            skel: load_skel(obj),
        }
    }

    /// Write the topology into the object's .bss (mmapped: seen by the next run).
    fn set_topology(&mut self, desc: &TopoDesc) {
        let topo = desc.build().expect("topology");
        let bss = self.skel.maps.bss_data.as_mut().expect("bss mmapped");
        // SAFETY: both are `struct sis_topo` of intf.h
        unsafe { copy_same_c_type(&*topo, &mut bss.topo) };
    }

    /// The per-LLC and per-CPU state of the wake-up, as the loader and the
    /// scheduler keep it: llc_ctxs by LLC index (`llc_ids[i]` is the
    /// model's id of index i), cpu_ctxs and nr_running by CPU.
    fn set_state(&mut self, m: &Machine, llc_ids: &[usize], w: &Wakeup) {
        let bss = self.skel.maps.bss_data.as_mut().expect("bss mmapped");
        for (i, id) in llc_ids.iter().enumerate() {
            let l = &mut bss.llc_ctxs[i];
            l.nr_idle_scan = w.nr_idle_scan.get(id).copied().unwrap_or(0);
            l.has_idle_cores = w.has_idle_cores.get(id).copied().unwrap_or(false) as u64;
        }
        for cpu in 0..m.nr_cpu_ids.min(MAX_CPUS) {
            bss.nr_running[cpu] = w.nr_running.get(&cpu).copied().unwrap_or(0);
            let c = &mut bss.cpu_ctxs[cpu];
            c.util = w.load.get(&cpu).copied().unwrap_or(0);
            c.wake_avg_idle = 0xdead;
            c.wake_stamp = 0xdead;
            c.avg_scan_cost = 0xdead;
        }
        let c = &mut bss.cpu_ctxs[w.this_cpu];
        c.wake_avg_idle = w.wake_avg_idle;
        c.wake_stamp = w.wake_stamp;
        c.avg_scan_cost = w.avg_scan_cost;
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

/// The LLC ids of a description, in the order of the BPF LLC indexes.
fn llc_ids(desc: &TopoDesc) -> Vec<usize> {
    let mut ids: Vec<usize> = desc.cpus.iter().map(|c| c.llc).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Human-readable difference between two results, named `a` and `b`.
fn diff(a_name: &str, a: &Outcome, b_name: &str, b: &Outcome) -> String {
    let mut s = String::new();
    let mut field = |n: &str, x: String, y: String| {
        if x != y {
            s += &format!("{n} {a_name} {x} {b_name} {y}; ");
        }
    };
    field("cpu", a.cpu.to_string(), b.cpu.to_string());
    field("recent", a.recent.to_string(), b.recent.to_string());
    field("waker", format!("{:?}", a.waker), format!("{:?}", b.waker));
    field(
        "has_idle_cores",
        format!("{:?}", a.has_idle_cores),
        format!("{:?}", b.has_idle_cores),
    );
    field(
        "wake_avg_idle/stamp/avg_scan_cost",
        format!("{}/{}/{}", a.wake_avg_idle, a.wake_stamp, a.avg_scan_cost),
        format!("{}/{}/{}", b.wake_avg_idle, b.wake_stamp, b.avg_scan_cost),
    );
    for i in 0..STAT_NR {
        if a.cnt[i] != b.cnt[i] {
            s += &format!(
                "{} {a_name} {} {b_name} {}; ",
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

/// One random state on machine `m` with feature word `features`.
fn random_state(rng: &mut StdRng, m: &Machine, features: u64) -> Wakeup {
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

    let this_cpu = pick(rng);
    let prev = match rng.gen_range(0..4) {
        0 => this_cpu,
        1 => {
            // a CPU of the waker's LLC
            let span: Vec<usize> = m.llc_span_of(this_cpu).unwrap().iter().copied().collect();
            span[rng.gen_range(0..span.len())]
        }
        _ => pick(rng),
    };
    let recent = match rng.gen_range(0..20) {
        0..=2 => -1,
        3..=4 => prev as i32,
        5..=6 => this_cpu as i32,
        7 => rng.gen_range(0..n) as i32, // maybe a hole
        _ => pick(rng) as i32,
    };
    // the kernel's invariant: prev allowed (most states), this_cpu often too
    if rng.gen_bool(0.6) {
        allowed.insert(prev);
    }
    if rng.gen_bool(0.6) {
        allowed.insert(this_cpu);
    }
    // reach the slow paths more often: the waker busy, prev and recent busy
    if rng.gen_bool(0.7) {
        idle.remove(&this_cpu);
    }
    if rng.gen_bool(0.6) {
        idle.remove(&prev);
        if recent >= 0 && rng.gen_bool(0.5) {
            idle.remove(&(recent as usize));
        }
    }
    // runqueue lengths: 0 on most idle CPUs, 1..3 elsewhere
    let nr_running: BTreeMap<usize, u32> = present
        .iter()
        .map(|&c| {
            let nr = if idle.contains(&c) && rng.gen_bool(0.9) {
                0
            } else {
                rng.gen_range(0..4)
            };
            (c, nr)
        })
        .collect();
    let load: BTreeMap<usize, u64> = present
        .iter()
        .map(|&c| (c, rng.gen_range(0..=1024)))
        .collect();
    let mut nr_idle_scan = BTreeMap::new();
    let mut has_idle_cores = BTreeMap::new();
    for c in m.cpus() {
        let weight = m.llc_span_of(c).unwrap().len() as u64;
        let id = m.llc_id_of(c).unwrap();
        let depth = match rng.gen_range(0..4) {
            0 => 0,
            1 => 1,
            2 => rng.gen_range(0..=weight),
            _ => weight,
        };
        nr_idle_scan.entry(id).or_insert(depth);
        has_idle_cores
            .entry(id)
            .or_insert_with(|| rng.gen_bool(0.5));
    }
    let hz = [100, 250, 1000][rng.gen_range(0..3)];
    let jiffies = rng.gen_range(1_000u64..1_000_000);
    let flips = |rng: &mut StdRng| match rng.gen_range(0..3) {
        0 => 0,
        1 => rng.gen_range(0..8),
        _ => rng.gen_range(0..64),
    };
    let waker_flips = flips(rng);
    let wakee_id = rng.gen_range(1..5);
    Wakeup {
        features,
        this_cpu,
        prev,
        sync: rng.gen_bool(0.5),
        recent,
        wakee_id,
        pcpu_kthread: rng.gen_bool(0.2),
        waker: Flips {
            last_wakee: rng.gen_range(-1..5),
            wakee_flips: waker_flips,
            wakee_flip_decay_ts: jiffies - rng.gen_range(0..2 * hz),
        },
        wakee_flips: flips(rng),
        hz,
        jiffies,
        waker_load: rng.gen_range(0..=1024),
        wakee_load: rng.gen_range(0..=1024),
        imbalance_pct: [117, 125][rng.gen_range(0..2)],
        idle,
        allowed,
        nr_running,
        load,
        nr_idle_scan,
        has_idle_cores,
        wake_avg_idle: match rng.gen_range(0..3) {
            0 => 0,
            1 => rng.gen_range(0..20_000),
            _ => rng.gen_range(0..1_000_000),
        },
        wake_stamp: jiffies - [0, 1, 3, 20, 70][rng.gen_range(0..5)] + rng.gen_range(0..2),
        avg_scan_cost: rng.gen_range(0..30_000),
    }
}

/// The name beside the first counter of `ways` that `o` counted; `none` where it counted none.
fn first_counted(o: &Outcome, ways: &[(u32, &'static str)], none: &'static str) -> &'static str {
    let counted = ways.iter().find(|&&(s, _)| o.cnt[s as usize] > 0);
    counted.map_or(none, |&(_, name)| name)
}

/// Which way a call ended, from the model's counters: the random states
/// must reach each of them for the comparison to mean anything.
fn path_of(o: &Outcome, w: &Wakeup) -> &'static str {
    let kthread =
        w.pcpu_kthread && o.cpu == w.prev && w.prev == w.this_cpu && !w.idle.contains(&o.cpu);
    let fast = if kthread {
        "per-cpu kthread"
    } else {
        "fast target/prev"
    };
    let ways = [
        (bi::sis_stat_STAT_RECENT, "recent"),
        (FAST, fast),
        (SMT, "smt sibling"),
        (SKIPPED, "scan skipped (depth 0)"),
        (HIT_CORE, "idle core"),
        (CORE_FAILED, "core search failed"),
        (HIT_PROP, "depth limited (SIS_PROP)"),
        (DEPTH_LIMITED, "depth limited (SIS_UTIL)"),
        (FAILED, "scan, nothing"),
    ];
    first_counted(o, &ways, "scan, idle cpu")
}

/// Decisions of select_task_rq_fair before the search, from the model.
fn affine_of(o: &Outcome) -> &'static str {
    let ways = [
        (HIT_WEIGHT, "wake_affine_weight -> this"),
        (AFFINE, "wake_affine_idle -> this"),
        (HIT_IDLE_PREV, "WA_IDLE_PREV -> prev"),
    ];
    first_counted(o, &ways, "prev (no move)")
}

/// The counting convention and the recent_used_cpu rule, checked on one
/// result (the model's or the BPF's) on its own, so that a mistake shared
/// by both still fails.
fn convention_errors(o: &Outcome, w: &Wakeup) -> Vec<String> {
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
    if fast == 1 && (scanned != 1 || dom_search != 0) {
        e.push(format!(
            "fast hit with scanned {scanned} domain_search {dom_search}"
        ));
    }
    if fast + dom_search != 1 {
        e.push(format!("fast {fast} + domain_search {dom_search} != 1"));
    }
    // the chosen CPU is allowed, or the search failed back to its target
    if !w.allowed.contains(&o.cpu) && c(bi::sis_stat_STAT_FAILED) == 0 && fast == 0 {
        e.push(format!("cpu {} not allowed", o.cpu));
    }
    // depth bookkeeping: a SIS_PROP hit only with SIS_PROP on and SIS_UTIL off
    if c(bi::sis_stat_STAT_HIT_SIS_PROP) > 0
        && (w.features & bit::SIS_UTIL != 0 || w.features & bit::SIS_PROP == 0)
    {
        e.push("SIS_PROP hit while SIS_UTIL decides the depth".into());
    }
    // the waker recorded the wakee
    if o.waker.last_wakee != w.wakee_id {
        e.push(format!(
            "last_wakee {} != {}",
            o.waker.last_wakee, w.wakee_id
        ));
    }
    e
}

const SEED: u64 = 0x5151_0000;
const STATES_PER_SET: usize = 10_008;

/// The random comparison: every feature set on every topology. Returns the
/// number of states and the failures (model vs BPF, or a convention broken).
fn random_comparison(
    mutate: bool,
    max_failures: usize,
) -> (usize, Vec<String>, BTreeMap<String, usize>) {
    let mut obj = MaybeUninit::uninit();
    let mut bpf = Bpf::load(&mut obj);
    let mut paths = BTreeMap::<String, usize>::new();
    let mut failures = vec![];
    let mut total = 0;
    let topos = topologies();
    let per_topo = STATES_PER_SET.div_ceil(topos.len());

    for (ti, (name, desc)) in topos.into_iter().enumerate() {
        let m = Machine::new(&desc);
        let ids = llc_ids(&desc);
        bpf.set_topology(&desc);
        for (fi, (fname, features)) in FEATURE_SETS.iter().enumerate() {
            for i in 0..per_topo {
                // one seed per state: a failure is reproduced from its seed alone
                let seed = SEED + (fi * 100_000_000 + ti * 1_000_000 + i) as u64;
                let mut rng = StdRng::seed_from_u64(seed);
                let w = random_state(&mut rng, &m, *features);
                let want = sis_model::select_task_rq_fair(&m, &w, mutate);
                let got = run_bpf(&mut bpf, &m, &ids, &w);
                total += 1;
                *paths
                    .entry(format!("{fname}: {}", path_of(&want, &w)))
                    .or_default() += 1;
                *paths
                    .entry(format!("{fname}: {}", affine_of(&want)))
                    .or_default() += 1;
                *paths.entry(format!("sets: {fname}")).or_default() += 1;
                for (who, out) in [("model", &want), ("bpf", &got)] {
                    for e in convention_errors(out, &w) {
                        failures.push(format!("{name} [{fname}] seed {seed:#x}: {who}: {e}"));
                    }
                }
                if want != got {
                    failures.push(format!(
                        "{name} [{fname}] seed {seed:#x}: {}\n  state: this {} prev {} sync {} recent {} \
                         kthread {} idle {:?}",
                        diff("model", &want, "bpf", &got),
                        w.this_cpu,
                        w.prev,
                        w.sync,
                        w.recent,
                        w.pcpu_kthread,
                        w.idle,
                    ));
                }
                if failures.len() >= max_failures {
                    return (total, failures, paths);
                }
            }
        }
    }
    (total, failures, paths)
}

#[test]
fn sis_random_states_match_model() {
    let started = std::time::Instant::now();
    let (total, failures, paths) = random_comparison(sis_model::mutate_from_env(), usize::MAX);
    println!(
        "{total} states in {:.2}s, paths:",
        started.elapsed().as_secs_f64()
    );
    for (p, n) in &paths {
        println!("  {p:<60} {n}");
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
    // >= 10,000 states per feature set, and every way through reached
    for (fname, _) in FEATURE_SETS {
        let n = paths.get(&format!("sets: {fname}")).copied().unwrap_or(0);
        assert!(n >= 10_000, "feature set {fname}: {n} states");
    }
    let need = |p: &str| {
        let n: usize = paths
            .iter()
            .filter(|(k, _)| k.ends_with(&format!(": {p}")))
            .map(|(_, n)| n)
            .sum();
        assert!(n >= 100, "path '{p}' reached by only {n} states");
    };
    for p in [
        "recent",
        "per-cpu kthread",
        "fast target/prev",
        "smt sibling",
        "scan skipped (depth 0)",
        "idle core",
        "core search failed",
        "depth limited (SIS_PROP)",
        "depth limited (SIS_UTIL)",
        "scan, nothing",
        "scan, idle cpu",
        "wake_affine_weight -> this",
        "wake_affine_idle -> this",
        "WA_IDLE_PREV -> prev",
        "prev (no move)",
    ] {
        need(p);
    }
}

/// The mutation check: with one comparison of the model flipped
/// (SIS_MODEL_MUTATE's mutation), the same comparison must fail.
#[test]
fn sis_random_states_catch_a_mutated_model() {
    let (total, failures, _) = random_comparison(true, 20);
    assert!(
        !failures.is_empty(),
        "the mutated model agreed with the BPF on all {total} states: the test cannot fail"
    );
    assert!(
        failures.iter().any(|f| f.contains("scanned")),
        "{failures:?}"
    );
}

/// A hand-worked case: the expected CPU, recent_used_cpu afterwards, every
/// non-zero counter, and where given the waker's bookkeeping and this CPU's
/// SIS_PROP state afterwards. Both the model and the BPF must give it.
struct Case {
    what: &'static str,
    desc: TopoDesc,
    w: Wakeup,
    cpu: usize,
    recent: i32,
    counters: Vec<(u32, u64)>,
    /// (wake_avg_idle, wake_stamp, avg_scan_cost) afterwards
    prop: Option<(u64, u64, u64)>,
    waker: Option<Flips>,
}

/// A neutral wake-up: waker on `this`, running alone there (nr_running 1 on
/// busy CPUs, 0 on idle ones), no flips, no load, SIS_UTIL's depth the whole
/// LLC, no idle core expected, every CPU allowed.
fn base(desc: &TopoDesc, features: u64, this: usize, prev: usize, idle: &[usize]) -> Wakeup {
    let m = Machine::new(desc);
    let idle: Cpumask = idle.iter().copied().collect();
    Wakeup {
        nr_running: m.cpus().map(|c| (c, (!idle.contains(&c)) as u32)).collect(),
        nr_idle_scan: m
            .cpus()
            .map(|c| {
                (
                    m.llc_id_of(c).unwrap(),
                    m.llc_span_of(c).unwrap().len() as u64,
                )
            })
            .collect(),
        has_idle_cores: m.cpus().map(|c| (m.llc_id_of(c).unwrap(), false)).collect(),
        ..Wakeup::neutral(features, (this, prev), 1, idle, (0..MAX_CPUS).collect())
    }
}

use bi::{
    sis_stat_STAT_CORE_FAILED as CORE_FAILED, sis_stat_STAT_CORE_SEARCH as CORE_SEARCH,
    sis_stat_STAT_DEPTH_LIMITED as DEPTH_LIMITED, sis_stat_STAT_DOMAIN_SCANNED as DOM_SCANNED,
    sis_stat_STAT_DOMAIN_SEARCH as DOM_SEARCH, sis_stat_STAT_FAILED as FAILED,
    sis_stat_STAT_FAST as FAST, sis_stat_STAT_HIT_SIS_CORE as HIT_CORE,
    sis_stat_STAT_HIT_SIS_PROP as HIT_PROP, sis_stat_STAT_HIT_SIS_UTIL as HIT_UTIL,
    sis_stat_STAT_HIT_WA_IDLE_PREV as HIT_IDLE_PREV, sis_stat_STAT_HIT_WA_WEIGHT as HIT_WEIGHT,
    sis_stat_STAT_SCANNED as SCANNED, sis_stat_STAT_SCAN_SKIPPED as SKIPPED,
    sis_stat_STAT_SEARCH as SEARCH, sis_stat_STAT_SMT as SMT, sis_stat_STAT_WAKE_AFFINE as AFFINE,
};

/// A hand case's counters when target is busy and the LLC scan probes `n` CPUs: one
/// search, target's probe and the `n` (SCANNED), one domain search of `n`; then `more`.
fn scan(n: u64, more: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let mut c = vec![
        (SEARCH, 1),
        (SCANNED, n + 1),
        (DOM_SEARCH, 1),
        (DOM_SCANNED, n),
    ];
    c.extend_from_slice(more);
    c
}

/// ... when the fast path takes target: one search, one CPU scanned, FAST; then `more`.
fn fast(more: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let mut c = vec![(SEARCH, 1), (SCANNED, 1), (FAST, 1)];
    c.extend_from_slice(more);
    c
}

/// The hand-worked cases, a row each: what it shows; the wake-up, `at(topology, features,
/// this, prev, idle CPUs)`, changed by `with()` where it says; the CPU and recent_used_cpu
/// expected; the counters. The comment above a row works it out.
#[rustfmt::skip]
fn hand_cases() -> Vec<Case> {
    let flat8 = || TopoDesc::synthetic(1, 8, 1, 1); // CPUs 0-7, one LLC
    let two_llc = || TopoDesc::synthetic(2, 2, 2, 1); // {0,1}{2,3} | {4,5}{6,7}
    let smt8 = || TopoDesc::synthetic(1, 4, 2, 1); // {0,1}{2,3}{4,5}{6,7}
    let smt4 = || TopoDesc::synthetic(1, 2, 2, 1); // {0,1}{2,3}
    let at = |desc: TopoDesc, features, this, prev, idle: &[usize]| {
        let w = base(&desc, features, this, prev, idle);
        (desc, w)
    };
    let with = |(desc, mut w): (TopoDesc, Wakeup), f: &dyn Fn(&mut Wakeup)| {
        f(&mut w);
        (desc, w)
    };
    let case = |what, (desc, w): (TopoDesc, Wakeup), (cpu, recent), counters| Case {
        what, desc, w, cpu, recent, counters, prop: None, waker: None,
    };
    let no_core = PATCHED & !bit::SIS_CORE;
    vec![
        // this == prev == 2 busy: no wake_affine. Fast scan 1; LLC scan
        // from 3: 3 4 5 busy, 6 idle: 4 probes. recent <- prev 2.
        case("target 2 busy, idle {0,6}: scan 3,4,5,6",
             at(flat8(), PATCHED, 2, 2, &[0, 6]), (6, 2), scan(4, &[])),
        // nr_idle_scan 3: nr = 4: 3 (nr 3), 4 (2), 5 (1) probed, at 6 !--nr.
        case("SIS_UTIL depth 3: 3,4,5 probed, --nr hits 0 before 6",
             with(at(flat8(), PATCHED, 2, 2, &[0, 6]), &|w| { w.nr_idle_scan.insert(0, 3); }),
             (2, 2), scan(3, &[(DEPTH_LIMITED, 1), (HIT_UTIL, 1), (FAILED, 1)])),
        case("SIS_UTIL depth 0: no scan",
             with(at(flat8(), PATCHED, 2, 2, &[0, 6]), &|w| { w.nr_idle_scan.insert(0, 0); }),
             (2, 2), scan(0, &[(SKIPPED, 1), (HIT_UTIL, 1), (FAILED, 1)])),
        // from 7: 7, 0, 1 probed (1 idle).
        case("wrap: target 6, idle {1}: 7,0,1",
             at(flat8(), PATCHED, 6, 6, &[1]), (1, 6), scan(3, &[])),
        case("nothing idle: 8 CPUs scanned, target probed again last",
             at(flat8(), PATCHED, 2, 2, &[]), (2, 2), scan(8, &[(FAILED, 1)])),
        // hint set: core {0,1} 2 probes; {2,3}: 2 busy, 3 = fallback (2);
        // {4,5}: 4 busy, fallback known -> break (1); {6,7} idle (2). 7.
        case("idle core {6,7} after busy cores, fallback 3 seen",
             with(at(smt8(), PATCHED, 0, 0, &[3, 6, 7]), &|w| { w.has_idle_cores.insert(0, true); }),
             (6, 0), scan(7, &[(CORE_SEARCH, 1), (HIT_CORE, 1)])),
        // {0,1}: 2; {2,3}: 2 (3 fallback); {4,5}: 1; {6,7}: 6 busy (1). 6
        // probes; no idle core: hint cleared, fallback 3 taken.
        case("no idle core: hint cleared, fallback thread 3",
             with(at(smt8(), PATCHED, 0, 0, &[3, 7]), &|w| { w.has_idle_cores.insert(0, true); }),
             (3, 0), scan(6, &[(CORE_SEARCH, 1), (CORE_FAILED, 1)])),
        // select_idle_smt(prev 2): the loop over {2,3} counts 2 (itself)
        // and 3 (idle): 2 visits.
        case("idle SMT sibling of prev: the loop counts prev too",
             at(two_llc(), PATCHED, 2, 2, &[3, 5]), (3, 2), scan(2, &[(SMT, 1)])),
        // siblings 2, 3 visited (2); scan from 3: 3, 0 busy, 1 idle (3).
        case("SMT sibling busy, then the LLC scan: one domain search",
             at(two_llc(), PATCHED, 2, 2, &[1]), (1, 2), scan(5, &[])),
        // no sibling check; scan from 3: 3 idle.
        case("NO_SIS_CORE: no sibling check",
             at(two_llc(), no_core, 2, 2, &[3, 5]), (3, 2), scan(1, &[])),
        // LLC {0-3,8-11}: from 4, 4-7 are not in it, 8 first, idle.
        case("x86 siblings: target 3 wraps to 8 first",
             at(topo_x86_siblings(), no_core, 3, 3, &[2, 8]), (8, 3), scan(1, &[])),
        // a per-CPU kthread wakes a task of its CPU, nothing else runs
        // there: stacked on prev, one fast scan, recent untouched.
        case("per-CPU kthread stacks the wakee on prev",
             with(at(flat8(), PATCHED, 3, 3, &[5]), &|w| w.pcpu_kthread = true),
             (3, -1), fast(&[])),
        // ... not with a second task on the CPU: the scan 4, 5 (idle).
        case("per-CPU kthread, nr_running 2: no stacking",
             with(at(flat8(), PATCHED, 3, 3, &[5]), &|w| {
                 w.pcpu_kthread = true;
                 w.nr_running.insert(3, 2);
             }),
             (5, 3), scan(2, &[])),
        // sync, the waker alone on 0: wake_affine_idle -> 0. SIS(4, 0): 0
        // and 4 busy, scan from 1: 1, 2, 3 (idle).
        case("sync, waker alone on its CPU: pulled to 0, scan 1,2,3",
             with(at(flat8(), PATCHED, 0, 4, &[3]), &|w| w.sync = true),
             (3, 4), scan(3, &[(AFFINE, 1)])),
        // sync with 2 tasks on 0: not affine; WA_WEIGHT loads 0: 0 < 0
        // false -> prev 4 (the sync +1 makes prev_eff 1 > 0: this wins!)
        case("sync, two tasks on the waker's CPU: wake_affine_weight's +1 pulls",
             with(at(flat8(), PATCHED, 0, 4, &[3]), &|w| {
                 w.sync = true;
                 w.nr_running.insert(0, 2);
             }),
             (3, 4), scan(3, &[(AFFINE, 1), (HIT_WEIGHT, 1)])),
        // prev 4 idle: "check for idle core" keeps it; SIS(4, 4) fast.
        case("WA_IDLE_PREV: idle prev kept",
             at(flat8(), PATCHED, 0, 4, &[4, 6]), (4, -1), fast(&[(HIT_IDLE_PREV, 1)])),
        // an interrupt on idle 0: pulled to 0 (prev busy), 0 idle: fast.
        case("interrupt wake-up on an idle CPU pulls there",
             at(flat8(), PATCHED, 0, 4, &[0]), (0, -1), fast(&[(AFFINE, 1)])),
        // wake_wide: waker 70 flips, wakee 8, LLC 8: 70 >= 8 * 8: wide, no
        // wake_affine although sync; SIS(4, 4): scan 5 6 7 0 1 2 3.
        case("wake_wide: no pull",
             with(at(flat8(), PATCHED, 0, 4, &[3]), &|w| {
                 w.sync = true;
                 w.waker.wakee_flips = 70;
                 w.wakee_flips = 8;
             }),
             (3, 4), scan(7, &[])),
        // siblings 0/1: imbalance_pct 110: 106 * 100 vs 100 * 105: prev.
        // SIS(1, 1): smt loop {0,1} 2 visits, scan 2 3 0 1: 4. Failed.
        case("wake_affine_weight between SMT siblings: imbalance_pct 110",
             with(at(smt4(), PATCHED, 0, 1, &[]), &|w| {
                 w.load = [(0, 106), (1, 100), (2, 100)].into_iter().collect();
             }),
             (1, 1), scan(6, &[(FAILED, 1)])),
        // 0 and 2 are not siblings: 117 -> 108: 10600 < 10800: this 0.
        // SIS(2, 0): smt(2) {2,3}: 2 visits; scan 1 2 3 0: 4. Failed.
        case("wake_affine_weight across cores: imbalance_pct 117",
             with(at(smt4(), PATCHED, 0, 2, &[]), &|w| {
                 w.load = [(0, 106), (1, 100), (2, 100)].into_iter().collect();
             }),
             (0, 2), scan(6, &[(FAILED, 1), (AFFINE, 1), (HIT_WEIGHT, 1)])),
        // 8000 >> 3 = 1000 at stamp 1000 (997 + 3); nr = 8 * 1000 /
        // 1001 = 7: 3 4 5 6 7 0 probed, !--nr at 1: no accounting.
        Case {
            prop: Some((1000, 1000, 1000)),
            ..case("SIS_PROP: aged wake_avg_idle, depth 7, !--nr skips the accounting",
                   with(at(flat8(), bit::SIS_PROP, 2, 2, &[]), &|w| {
                       (w.wake_avg_idle, w.wake_stamp, w.avg_scan_cost) = (8000, 997, 1000);
                   }),
                   (2, 2), scan(6, &[(DEPTH_LIMITED, 1), (HIT_PROP, 1), (FAILED, 1)]))
        },
        // same depth, 4 idle: 3, 4 probed. time = 2 probes * SIS_PROP_PROBE_NS
        // (10) = 20: wake_avg_idle 1000 - 20 = 980; avg_scan_cost 1000 +
        // (20 - 1000) / 8 = 1000 - 122 = 878.
        Case {
            prop: Some((980, 1000, 878)),
            ..case("SIS_PROP: a scan that found a CPU is accounted",
                   with(at(flat8(), bit::SIS_PROP, 2, 2, &[4]), &|w| {
                       (w.wake_avg_idle, w.wake_stamp, w.avg_scan_cost) = (8000, 997, 1000);
                   }),
                   (4, 2), scan(2, &[]))
        },
        // record_wakee: decay_ts + HZ < jiffies: 9 >> 1 = 4, then a new
        // wakee: 5; the stamp becomes jiffies.
        Case {
            waker: Some(Flips { last_wakee: 1, wakee_flips: 5, wakee_flip_decay_ts: 1000 }),
            ..case("record_wakee decays once and counts a new wakee",
                   with(at(flat8(), PATCHED, 2, 2, &[2]), &|w| {
                       w.waker = Flips { last_wakee: 3, wakee_flips: 9, wakee_flip_decay_ts: 1000 - 251 };
                   }),
                   (2, -1), fast(&[]))
        },
    ]
}

#[test]
fn sis_hand_worked_cases() {
    let mut obj = MaybeUninit::uninit();
    let mut bpf = Bpf::load(&mut obj);
    let mut bad = vec![];
    for case in hand_cases() {
        let m = Machine::new(&case.desc);
        let ids = llc_ids(&case.desc);
        let model = sis_model::select_task_rq_fair(&m, &case.w, false);
        bpf.set_topology(&case.desc);
        let got = run_bpf(&mut bpf, &m, &ids, &case.w);
        let mut cnt = [0u64; STAT_NR];
        for &(s, v) in &case.counters {
            cnt[s as usize] = v;
        }
        // the hand values; what a case does not state is taken from the model
        let expected = Outcome {
            cpu: case.cpu,
            recent: case.recent,
            waker: case.waker.unwrap_or(model.waker),
            has_idle_cores: model.has_idle_cores.clone(),
            wake_avg_idle: case.prop.map_or(model.wake_avg_idle, |p| p.0),
            wake_stamp: case.prop.map_or(model.wake_stamp, |p| p.1),
            avg_scan_cost: case.prop.map_or(model.avg_scan_cost, |p| p.2),
            cnt,
        };
        if model != expected {
            bad.push(format!(
                "{}: {}",
                case.what,
                diff("hand", &expected, "model", &model)
            ));
        }
        if got != model {
            bad.push(format!(
                "{}: {}",
                case.what,
                diff("model", &model, "bpf", &got)
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The harness itself: bitmaps round-trip, the program writes every output
/// and reads the per-CPU state of the waker's CPU only.
#[test]
fn sis_harness_bitmaps_and_outputs() {
    let m: Cpumask = [0, 1, 63, 64, 127, 128, 300, 511].into_iter().collect();
    assert_eq!(from_words(&to_words(&m)), m);

    let mut obj = MaybeUninit::uninit();
    let mut bpf = Bpf::load(&mut obj);
    let desc = topo_high_ids();
    bpf.set_topology(&desc);
    // CPU 511 is the only idle one of LLC 1 {127,128,300,511}: 128 scans 300, 511
    let w = base(&desc, PATCHED & !bit::SIS_CORE, 128, 128, &[511]);
    let mach = Machine::new(&desc);
    let got = run_bpf(&mut bpf, &mach, &llc_ids(&desc), &w);
    assert_eq!(got.cpu, 511, "{got:?}");
    assert_eq!(got.cnt[DOM_SCANNED as usize], 2);
    assert_eq!(got.recent, 128);
    assert_eq!(got, sis_model::select_task_rq_fair(&mach, &w, false));
}

/// One step of idle.bpf.h on cpu_ctxs[cpu]: `enter` is ops.update_idle(cpu, true), else a
/// claim or the CPU's exit; the period's length it returned, and (idle_start, idle_ns).
fn idle_step(bpf: &mut Bpf, cpu: usize, enter: bool, now: u64) -> (u64, (u64, u64)) {
    // SAFETY: test_intf.h's struct dec_io, plain integers: all zeros is a value
    let mut io: test_intf::dec_io = unsafe { std::mem::zeroed() };
    (io.flag, io.cpu, io.now, io.out_ns) = ((!enter) as u32, cpu as i32, now, u64::MAX);
    // SAFETY: as above
    let ret = unsafe { run_with_ctx(&bpf.skel.progs.idle_test, &mut io) }.unwrap();
    assert_eq!(ret, 0);
    let c = &bpf
        .skel
        .maps
        .bss_data
        .as_ref()
        .expect("bss mmapped")
        .cpu_ctxs[cpu];
    (io.out_ns, (c.idle_start, c.idle_ns))
}

/// The idle time a claimed CPU stops accumulating at the claim: the claim closes the period
/// once (the CPU's own exit later adds nothing), a second idle entry does not move an open
/// period's start, and the next period adds to the total.
#[test]
fn idle_claim_closes_the_period_once() {
    let mut obj = MaybeUninit::uninit();
    let mut bpf = Bpf::load(&mut obj);
    let cpu = 3;
    {
        let bss = bpf.skel.maps.bss_data.as_mut().expect("bss mmapped");
        bss.cpu_ctxs[cpu].idle_start = 0;
        bss.cpu_ctxs[cpu].idle_ns = 1_000;
    }
    // goes idle at 10_000; update_idle(true) again at 12_000 keeps the start
    assert_eq!(idle_step(&mut bpf, cpu, true, 10_000), (0, (10_000, 1_000)));
    assert_eq!(idle_step(&mut bpf, cpu, true, 12_000), (0, (10_000, 1_000)));
    // a wake-up claims it at 15_000: 5_000 of idle time, the period closed
    assert_eq!(idle_step(&mut bpf, cpu, false, 15_000), (5_000, (0, 6_000)));
    // the CPU switches to the wakee at 40_000: busy since the claim, nothing added
    assert_eq!(idle_step(&mut bpf, cpu, false, 40_000), (0, (0, 6_000)));
    // the next period, closed by the CPU's own exit
    assert_eq!(idle_step(&mut bpf, cpu, true, 50_000), (0, (50_000, 6_000)));
    assert_eq!(idle_step(&mut bpf, cpu, false, 53_000), (3_000, (0, 9_000)));
}
