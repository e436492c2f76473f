// SPDX-License-Identifier: GPL-2.0-only
//! `scx_sisutil placement-cost`: what one wake-up placement costs on this host's CPU, per
//! policy, LLC size and load, and what the loader's per-interval work costs.
//!
//! The wake-up and the tick as the policy ships them: src/bpf/tools/cost.bpf.c runs the
//! scheduler's own select_task_rq_fair() (sis.bpf.h) and, when it leaves the task queued, the
//! enqueue's work (the kick search of kick.bpf.h only where WAKE_RESCUE is on), and apart
//! from it a busy CPU's tick (its kick decision and search), many times per
//! BPF_PROG_TEST_RUN (timed inside with bpf_ktime_get_ns, the clock's own cost measured on an
//! empty region and subtracted), on a synthetic machine with `busy_pct` of each LLC's CPUs
//! busy. sched_ext's kfuncs are outside the timed region ([`NOT_TIMED`]). Runs through the
//! host's verifier and JIT: root and bpf() are needed, sched_ext is not.
//!
//! The loader: the scheduler's own per-interval update (scheduler.rs UtilUpdate: every CPU's
//! busy time, the util filter, SIS_UTIL's depth, the writes, the feature word) against the
//! .bss and the feature map of the same object, on a synthetic 256-CPU topology: with the
//! lines last written by the timing thread (hot), and by a thread on another CPU as BPF
//! writes them, then after the scheduler's wait, whose wake-up is timed apart.

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::bpf_intf as bi;
use crate::sched::bpf_maps::run_once;
use crate::sched::features::{self, Preset};
use crate::sched::opts::DEFAULT_IMBALANCE_PCT;
use crate::sched::sis_util_depth::{sum_util_for_pct, DepthRules};
use crate::sched::stats::add_fields;
use crate::sched::topology::{copy_same_c_type, TopoDesc};
use crate::tools::tool_intf as ti;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/cost_skel.rs"));
}
use skel::{CostSkel, CostSkelBuilder};

const MAX_CPUS: usize = bi::sis_consts_MAX_CPUS as usize;
const STAT_SCANNED: usize = bi::sis_stat_STAT_SCANNED as usize;
const STAT_KICK_SCANNED: usize = bi::sis_stat_STAT_KICK_SCANNED as usize;
const STAT_NR: usize = bi::sis_stat_STAT_NR as usize;
/// SIS_PROP: rq->max_idle_balance_cost (sysctl_sched_migration_cost)
const MAX_IDLE_BALANCE_COST: u64 = bi::sis_consts_SIS_PROP_MAX_IDLE_BALANCE_COST as u64;

#[derive(clap::Args, Debug, Clone)]
pub struct CostOpts {
    /// CPUs in the LLC, comma-separated (each 2..=512; even with --smt): machines of one LLC
    #[arg(long, value_delimiter = ',', default_values_t = [8u32, 16, 32, 64, 128, 256])]
    pub llc_sizes: Vec<u32>,
    /// Machines of L LLCs of C CPUs each, comma-separated LxC (e.g. 1x8,64x8,1x256; at most
    /// 64 LLCs and 512 CPUs); replaces --llc-sizes
    #[arg(long, value_delimiter = ',', value_parser = topology_arg)]
    pub topologies: Vec<String>,
    /// Busy CPUs in percent of each LLC, comma-separated (each 0..=100); each LLC's utilization
    /// sum is set to match (busy CPUs at 1024, idle at 0), so SIS_UTIL's depth is the real one
    #[arg(long, value_delimiter = ',', default_values_t = [0u32, 25, 50, 75, 90, 100])]
    pub busy: Vec<u32>,
    /// Two threads per core (has_idle_cores, select_idle_core and select_idle_smt come in)
    #[arg(long)]
    pub smt: bool,
    /// Policies, comma-separated: a preset (`scx_sisutil presets`: vanilla, patched,
    /// patched-unbounded = patched with no scan depth, the whole LLC, ...), each optionally
    /// followed by +FEATURE or +NO_FEATURE (e.g. vanilla+SIS_UTIL). Default: vanilla,
    /// patched, patched-unbounded and each patch's feature alone on vanilla
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<String>,
    /// Timed runs per case (one BPF_PROG_TEST_RUN each, after one untimed warm-up run), each
    /// with its own random choice of the busy CPUs; median and spread are over them (1..=1000). With --loader: 300 hot and 50 cross-CPU intervals per run
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Placements per run (100..=8388608)
    #[arg(long, default_value_t = 20000, value_parser = clap::value_parser!(u32).range(100..=8_388_608))]
    pub placements: u32,
    /// Evict the caches between placements (4 MiB written, outside the timed region): the
    /// cost of a wake-up whose data went cold; use fewer --placements
    #[arg(long)]
    pub cold: bool,
    /// Leave steps out of the timed region, to see what each costs (comma-separated):
    /// features (the feature word's map lookup), allowed (wake_allowed), kick (the kick search
    /// and its flag word, the rescue's and the tick's); the counters are counted in place
    #[arg(long, value_delimiter = ',')]
    pub omit: Vec<String>,
    /// Print a JSON list of rows instead of the table
    #[arg(long)]
    pub json: bool,
    /// Also write a PNG: ns per placement against the machine (LLCs x CPUs), per policy and load (needs
    /// /usr/bin/python3 with matplotlib)
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Measure the loader's per-interval work instead (a synthetic topology of --loader-cpus
    /// CPUs in LLCs of --loader-llc; needs two CPUs): µs per interval with the lines last
    /// written by itself (hot) and by a thread on another CPU, the wait's wake-up, and % of
    /// one CPU at --interval-ms
    #[arg(long)]
    pub loader: bool,
    /// --loader: CPUs (1..=512)
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub loader_cpus: u32,
    /// --loader: CPUs per LLC (1..=512)
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub loader_llc: u32,
    /// --loader: the scheduler's interval the cost is set against, ms (1..=1000)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub interval_ms: u64,
    /// Measure instead what a word written on every wake-up costs when CPUs write it at once:
    /// ns per update of one shared word (atomic), of a word per CPU packed 8 to a line
    /// (atomic), of a word per CPU on its own line (atomic, and plain like the per-CPU
    /// counters), by 1 thread and by one pinned thread per CPU this process may use, each run
    /// in BPF_PROG_TEST_RUN at the same time (--runs runs of 2^20 updates per thread); and a
    /// wake-up's four shared-line writes (wake-queue: the LLC queue's line, V, W, the steal
    /// count) against LLC_SHARDS' (wake-shards: the queue's line the CPU's shard's), 4
    /// updates per wake-up, with their ratio's median, min and max over the rounds. A round
    /// counts only if the threads' per-iteration timestamps show them running at once for
    /// half the time or more; the others are refused (said on stderr) and tried again
    #[arg(long)]
    pub contention: bool,
    /// A line on stderr as each BPF_PROG_TEST_RUN of the placement measurement starts, with
    /// its CLOCK_MONOTONIC time in ns (Ctrl-C stops between two of them)
    #[arg(long)]
    pub trace_test_runs: bool,
}

/// One measured case.
#[derive(Serialize, Debug, Clone)]
pub struct Row {
    pub policy: String,
    /// the feature words the policy runs with
    pub features: String,
    /// LLCs in the machine (all of llc_weight CPUs)
    pub llcs: u32,
    pub llc_weight: u32,
    pub smt: bool,
    pub busy_pct: u32,
    pub idle_cpus: u32,
    /// SIS_UTIL's nr_idle_scan for the LLC's util sum (what the loader would write)
    pub nr_idle_scan: u64,
    pub runs: u32,
    pub placements_per_run: u32,
    /// the wake-up (select_cpu's and the enqueue's work, as the policy runs them), net of the
    /// clock: median over the runs of (the run's mean timed region - its empty region's)
    pub ns_per_placement: f64,
    pub ns_p25: f64,
    pub ns_p75: f64,
    pub ns_min: f64,
    pub ns_max: f64,
    /// a busy CPU's tick with one task queued in its LLC (the kick decision, and the kick
    /// search and flag word when it kicks), net of the clock, as ns_per_placement
    pub tick_ns: f64,
    pub tick_p25: f64,
    pub tick_p75: f64,
    pub tick_min: f64,
    pub tick_max: f64,
    /// ticks that searched for a CPU to kick, percent; per tick, the CPUs the search passed
    /// (KICK_SCANNED) and its word tests
    pub tick_search_pct: f64,
    pub tick_kick_scanned: f64,
    pub tick_word_tests: f64,
    /// per placement, over all runs: median and 99th percentile of the timed region (1 ns
    /// buckets; the clock's own share, ns_harness, included)
    pub ns_place_p50: f64,
    pub ns_place_p99: f64,
    /// the same timed region left empty: the clock's own share (subtracted above; median,
    /// min and max over the runs)
    pub ns_harness: f64,
    pub ns_harness_min: f64,
    pub ns_harness_max: f64,
    /// CPUs probed per placement: select_idle_sibling's scanned (the fast checks count one)
    /// plus the CPUs the rescue's kick search passed (WAKE_RESCUE only; the search jumps to
    /// the CPU by word tests, KICK_SCANNED counts the CPUs a walk would have tested)
    pub cpus_examined: f64,
    pub scanned: f64,
    pub kick_scanned: f64,
    /// the rescue's kick search's word tests per placement (64 CPUs of idle & allowed & an
    /// LLC each; not counted in cpus_examined)
    pub word_tests: f64,
    /// placements whose enqueue searched for a CPU to kick (WAKE_RESCUE), percent
    pub rescue_pct: f64,
    /// placements on an idle CPU select_cpu claimed (no enqueue, no kick search), percent
    pub direct_pct: f64,
    /// what the timed regions leave out ([`NOT_TIMED`])
    pub not_timed: &'static str,
}

/// Outside every timed region: what a syscall program cannot call (sched_ext's kfuncs) and
/// the task's storage.
pub const NOT_TIMED: &str = "sched_ext kfuncs: the idle mask's get/put \
(scx_bpf_get/put_idle_cpumask), the claim (scx_bpf_test_and_clear_cpu_idle), the DSQ insert \
(scx_bpf_dsq_insert[_vtime]) with its vtime key's task-storage work, the kick \
(scx_bpf_kick_cpu), the tick's queue length and head (scx_bpf_dsq_nr_queued, the DSQ \
iterator); the task-storage lookups of select_cpu and enqueue; the descheduling wakee's test at \
sched_waking";

/// A policy: its name and feature word.
pub fn parse_policy(spec: &str) -> Result<(String, u64)> {
    let mut parts = spec.split('+');
    let base = parts.next().unwrap_or("").trim();
    // a preset by its name, the one meaning each name has (intf.h)
    let Some(preset) = Preset::by_name(base) else {
        let names: Vec<&str> = features::PRESETS.iter().map(|p| p.name).collect();
        bail!(
            "unknown policy {spec:?}: a preset ({}), optionally +FEATURE or +NO_FEATURE ({})",
            names.join(", "),
            features::valid_names()
        );
    };
    let word = features::preset(preset);
    let words: Vec<&str> = parts.map(str::trim).collect();
    if words.iter().any(|w| w.is_empty()) {
        bail!("policy {spec:?}: empty feature after '+'");
    }
    let word = features::apply(word, &words).with_context(|| format!("policy {spec:?}"))?;
    Ok((spec.trim().to_string(), word))
}

/// vanilla, patched, patched-unbounded, and vanilla + each feature patched turns on that
/// vanilla has off.
pub fn default_policies() -> Vec<String> {
    let mut v = vec![
        "vanilla".to_string(),
        "patched".into(),
        "patched-unbounded".into(),
    ];
    let (patched, vanilla) = (
        features::preset(Preset::patched()),
        features::preset(Preset::vanilla()),
    );
    for f in features::FEATURES {
        if patched & !vanilla & f.bit != 0 {
            v.push(format!("vanilla+{}", f.name));
        }
    }
    v
}

/// The loaded cost object.
pub struct CostBpf<'obj> {
    skel: CostSkel<'obj>,
    /// placements per BPF_PROG_TEST_RUN (see `chunk_for`)
    chunk: u32,
    /// --trace-test-runs: a line as each test run starts
    verbose: bool,
}

/// Set by SIGINT, SIGTERM or SIGHUP during the placement measurement (cost_main's handler):
/// no test run starts after it.
static STOP: AtomicBool = AtomicBool::new(false);
/// Test runs started (the interruption's message).
static TEST_RUNS: AtomicU64 = AtomicU64::new(0);

/// Placements per BPF_PROG_TEST_RUN on an LLC of `n` CPUs: a test run cannot be interrupted,
/// so a run is split into test runs of ~2^24 CPU probes at most (a placement that scans
/// the whole LLC probes each CPU once; ~14 ns per probe measured on this project's 2-core
/// host, so ~0.25 s per test run) and of 2^18 placements at most (each placement's own
/// bookkeeping and timing is ~0.6-1 us there): Ctrl-C takes effect between them.
fn chunk_for(n: u32) -> u32 {
    ((1u32 << 24) / n.max(1)).clamp(1024, 1 << 18)
}

impl<'obj> CostBpf<'obj> {
    pub fn load(obj: &'obj mut MaybeUninit<OpenObject>) -> Result<Self> {
        if unsafe { libc::geteuid() } != 0 {
            bail!("must run as root: the measurement runs BPF programs through bpf() (try sudo)");
        }
        let mut open = CostSkelBuilder::default()
            .open(obj)
            .context("opening the placement-cost BPF object")?;
        // fentry/bpf_scx_reg from the scx headers: sched_ext is not needed here
        open.progs.scx_lib_init_probe.set_autoload(false);
        let skel = open.load().context(
            "loading the placement-cost BPF object (bpf() refused? libbpf's messages above say why)",
        )?;
        Ok(CostBpf {
            skel,
            chunk: 1024,
            verbose: false,
        })
    }

    /// `llcs` LLCs of `n` CPUs (pairs of threads with `smt`), `busy_pct` of each LLC's CPUs
    /// busy (which ones: a shuffle seeded by `layout`). Returns (idle CPUs per LLC, the
    /// depth the loader's `rules` give that load).
    fn set_case(
        &mut self,
        llcs: u32,
        n: u32,
        smt: bool,
        busy_pct: u32,
        layout: u64,
        rules: DepthRules,
    ) -> Result<(u32, u64)> {
        let threads = if smt { 2 } else { 1 };
        let desc = TopoDesc::synthetic(llcs as usize, (n / threads) as usize, threads as usize, 1);
        let topo = desc.build()?;
        let total = (llcs * n) as usize;
        let nbusy = ((busy_pct as u64 * n as u64 + 50) / 100) as usize;
        let mut rng =
            StdRng::seed_from_u64(0x5150 ^ n as u64 ^ ((llcs as u64) << 16) ^ (layout << 32));
        let mut is_busy = vec![false; total];
        for l in 0..llcs as usize {
            let mut cpus: Vec<usize> = (l * n as usize..(l + 1) * n as usize).collect();
            cpus.shuffle(&mut rng);
            cpus[..nbusy].iter().for_each(|&c| is_busy[c] = true);
        }
        let sum = sum_util_for_pct(busy_pct as u64, n as u64);
        // no calibrated curve here: SIS_FIT keeps SIS_UTIL's depth
        let depth = rules.depth(sum, n as u64, DEFAULT_IMBALANCE_PCT, None);

        let bss = self.skel.maps.bss_data.as_mut().context("no bss")?;
        // SAFETY: both are `struct sis_topo` of intf.h
        unsafe { copy_same_c_type(&*topo, &mut bss.topo) };
        bss.synth_idle = [0; MAX_CPUS / 64];
        let wakers: Vec<usize> = if nbusy == 0 {
            (0..total).collect()
        } else {
            (0..total).filter(|&c| is_busy[c]).collect()
        };
        for (i, &w) in wakers.iter().enumerate() {
            bss.wakers[i] = w as u16;
        }
        bss.cost_cfg.nr_wakers = wakers.len() as u32;
        for l in 0..llcs as usize {
            let base = l * n as usize;
            let idle_core = smt
                && (0..n as usize / 2)
                    .any(|c| !is_busy[base + 2 * c] && !is_busy[base + 2 * c + 1]);
            bss.llc_idle_cores[l] = idle_core as u8;
            let lc = &mut bss.llc_ctxs[l];
            lc.weight = n as u64;
            lc.util_sum = sum;
            lc.has_idle_cores = idle_core as u64;
            lc.nr_idle_scan = depth;
        }
        // SIS_PROP: the average idle period shrinks with the load, from the cap (2x
        // max_idle_balance_cost, 1 ms) at 0 % to 0 at 100 %; avg_scan_cost is measured
        // (bpf_ktime_get_ns), from 0, over the warm-up run
        let avg_idle = 2 * MAX_IDLE_BALANCE_COST * (100 - busy_pct as u64) / 100;
        for cpu in 0..MAX_CPUS {
            bss.nr_running[cpu] = 0;
            let cc = &mut bss.cpu_ctxs[cpu];
            cc.util = 0;
            cc.avg_idle = avg_idle;
            cc.wake_avg_idle = avg_idle / 2;
            cc.max_idle_balance_cost = MAX_IDLE_BALANCE_COST;
            cc.avg_scan_cost = 0;
        }
        for (cpu, &b) in is_busy.iter().enumerate() {
            if b {
                bss.nr_running[cpu] = 1;
                bss.cpu_ctxs[cpu].util = 1024;
            } else {
                bss.synth_idle[cpu / 64] |= 1 << (cpu % 64);
            }
        }
        self.chunk = chunk_for(n);
        Ok((n - nbusy as u32, depth))
    }

    /// Every LLC's row of the statistics map, summed over the CPUs.
    fn stats(&self) -> Result<Vec<u64>> {
        let mut sum = vec![0u64; STAT_NR];
        for l in 0..bi::sis_consts_MAX_LLCS {
            let vals = self
                .skel
                .maps
                .sis_stats
                .lookup_percpu(&l.to_ne_bytes(), MapFlags::ANY)
                .context("reading the statistics map")?
                .unwrap_or_default();
            for v in vals {
                for (i, c) in v.chunks_exact(8).take(STAT_NR).enumerate() {
                    sum[i] += u64::from_ne_bytes(c.try_into().expect("8 bytes"));
                }
            }
        }
        Ok(sum)
    }

    /// One run of `placements` as `timed` says, in test runs of at most `self.chunk` (the
    /// first seeded with `seed`, the next ones with seeds derived from it; a test run cannot
    /// be interrupted, Ctrl-C takes effect between them), summed over them.
    fn run(&mut self, timed: Timed, placements: u32, seed: u32) -> Result<RunOut> {
        let mut sum: Option<RunOut> = None;
        let mut left = placements;
        let mut i = 0u32;
        while left > 0 {
            if STOP.load(Ordering::Relaxed) {
                bail!(
                    "interrupted: stopped between two test runs ({} run)",
                    TEST_RUNS.load(Ordering::Relaxed)
                );
            }
            let n = TEST_RUNS.fetch_add(1, Ordering::Relaxed) + 1;
            if self.verbose {
                eprintln!(
                    "placement-cost: test run {n} starts at {} ns",
                    crate::sched::clock::monotonic_ns()
                );
            }
            let now = left.min(self.chunk);
            let s = if i == 0 {
                seed
            } else {
                seed ^ i.wrapping_mul(0x9e37_79b9)
            };
            let o = self.test_run(timed, now, s)?;
            sum = Some(match sum {
                None => o,
                Some(mut a) => {
                    a.add(&o);
                    a
                }
            });
            left -= now;
            i += 1;
        }
        sum.context("a run of no placements")
    }

    /// One BPF_PROG_TEST_RUN: `placements` wake-ups, or as many ticks with `timed.tick`.
    fn test_run(&mut self, timed: Timed, placements: u32, seed: u32) -> Result<RunOut> {
        self.skel
            .maps
            .sis_features
            .update(
                &0u32.to_ne_bytes(),
                &timed.feat.to_ne_bytes(),
                MapFlags::ANY,
            )
            .context("setting the feature word")?;
        let before = self.stats()?;
        {
            let bss = self.skel.maps.bss_data.as_mut().context("no bss")?;
            bss.cost_cfg.nr_placements = placements;
            bss.cost_cfg.seed = seed;
            bss.cost_cfg.harness_only = timed.harness_only as u32;
            bss.cost_cfg.cold = timed.cold as u32;
            bss.cost_cfg.omit = timed.omit;
            bss.cost_cfg.tick = timed.tick as u32;
            bss.cost_out.placements = 0;
        }
        let ret = run_once(&self.skel.progs.placement_cost)?;
        if ret != 0 {
            bail!("the placement-cost program refused its configuration ({ret})");
        }
        let cnt = self
            .stats()?
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect();
        let out = &self.skel.maps.bss_data.as_ref().context("no bss")?.cost_out;
        if out.placements != placements as u64 {
            bail!(
                "the placement-cost program ran {} placements, not {placements}",
                out.placements
            );
        }
        Ok(RunOut {
            ns: out.ns,
            placements: out.placements,
            cnt,
            direct: out.direct,
            searched: out.searched,
            word_tests: out.word_tests,
            hist: out.hist.to_vec(),
        })
    }
}

/// What a run times (cost.bpf.c's cost_cfg, with the feature word): the wake-up under
/// `feat`, or the tick's kick with `tick`, or with `harness_only` the empty region alone;
/// `cold` caches, the bookkeeping of `omit` (tool_intf.h's COST_OMIT_*) left out.
#[derive(Clone, Copy)]
struct Timed {
    feat: u64,
    harness_only: bool,
    cold: bool,
    omit: u32,
    tick: bool,
}

/// What one run measured.
struct RunOut {
    ns: u64,
    placements: u64,
    cnt: Vec<u64>,
    direct: u64,
    /// kick searches run (the rescue's, or the tick's)
    searched: u64,
    word_tests: u64,
    /// timed regions by ns (the last bucket open)
    hist: Vec<u32>,
}

impl RunOut {
    /// Another test run of the same run added in.
    fn add(&mut self, o: &RunOut) {
        add_fields!(self, o; ns, placements, direct, searched, word_tests);
        self.cnt.iter_mut().zip(&o.cnt).for_each(|(a, b)| *a += b);
        self.hist
            .iter_mut()
            .zip(&o.hist)
            .for_each(|(a, b)| *a = a.saturating_add(*b));
    }
}

/// The `p` quantile of a histogram of 1 ns buckets.
fn hist_quantile(hist: &[u64], p: f64) -> f64 {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let want = ((p * total as f64).ceil() as u64).max(1);
    let mut acc = 0;
    for (i, &h) in hist.iter().enumerate() {
        acc += h;
        if acc >= want {
            return i as f64;
        }
    }
    (hist.len() - 1) as f64
}

/// --omit's names → tool_intf.h's COST_OMIT_* bits.
fn omit_bits(names: &[String]) -> Result<u32> {
    names.iter().try_fold(0, |acc, n| {
        Ok(acc
            | match n.trim() {
                "features" => ti::cost_consts_COST_OMIT_FEATURES,
                "allowed" => ti::cost_consts_COST_OMIT_ALLOWED,
                "kick" => ti::cost_consts_COST_OMIT_KICK,
                _ => bail!("--omit: unknown step {n:?} (features, allowed, kick)"),
            })
    })
}

/// "LxC": L LLCs of C CPUs.
pub fn parse_topology(spec: &str) -> Result<(u32, u32)> {
    let (l, c) = spec
        .trim()
        .split_once(['x', 'X'])
        .with_context(|| format!("--topologies: {spec:?} is not LxC (e.g. 64x8)"))?;
    let (l, c): (u32, u32) = (
        l.parse()
            .with_context(|| format!("--topologies: {spec:?}: LLCs {l:?} is not a number"))?,
        c.parse()
            .with_context(|| format!("--topologies: {spec:?}: CPUs {c:?} is not a number"))?,
    );
    if !(1..=bi::sis_consts_MAX_LLCS).contains(&l) {
        bail!(
            "--topologies: {spec:?}: {l} LLCs is out of range (1..={})",
            bi::sis_consts_MAX_LLCS
        );
    }
    // the product checked: 64x67108864 wrapped to 0 in u32 and passed
    let all = l.checked_mul(c).filter(|&n| n <= MAX_CPUS as u32);
    if c < 2 || all.is_none() {
        bail!(
            "--topologies: {spec:?}: LLCs of {c} CPUs, {} in all: each LLC needs 2 or more, the machine at most {MAX_CPUS}",
            l as u64 * c as u64
        );
    }
    Ok((l, c))
}

/// clap's check of one --topologies value: a bad one is a usage error (exit 2).
fn topology_arg(s: &str) -> std::result::Result<String, String> {
    parse_topology(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{e:#}"))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let x = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo as f64)
}

/// The machines to measure: (LLCs, CPUs per LLC).
fn machines(opts: &CostOpts) -> Result<Vec<(u32, u32)>> {
    if !opts.topologies.is_empty() {
        return opts.topologies.iter().map(|t| parse_topology(t)).collect();
    }
    for &n in &opts.llc_sizes {
        if !(2..=MAX_CPUS as u32).contains(&n) {
            bail!("--llc-sizes: {n} is out of range (2..={MAX_CPUS})");
        }
    }
    Ok(opts.llc_sizes.iter().map(|&n| (1, n)).collect())
}

/// (LLCs, CPUs per LLC) of each machine, and each policy's (name, feature word).
type Cases = (Vec<(u32, u32)>, Vec<(String, u64)>);

fn validate(opts: &CostOpts) -> Result<Cases> {
    if (opts.llc_sizes.is_empty() && opts.topologies.is_empty()) || opts.busy.is_empty() {
        bail!("--llc-sizes (or --topologies) and --busy need at least one value each");
    }
    let machines = machines(opts)?;
    for &(_, n) in &machines {
        if opts.smt && n % 2 != 0 {
            bail!("LLCs of {n} CPUs: odd; with --smt an LLC is made of 2-thread cores");
        }
    }
    if let Some(b) = opts.busy.iter().find(|&&b| b > 100) {
        bail!("--busy: {b} is over 100 (percent of the LLC's CPUs)");
    }
    let specs = if opts.policies.is_empty() {
        default_policies()
    } else {
        opts.policies.clone()
    };
    let policies = specs
        .iter()
        .map(|s| parse_policy(s))
        .collect::<Result<_>>()?;
    Ok((machines, policies))
}

/// Every case: policies × machines × loads. Progress on stderr when `progress`.
pub fn measure(opts: &CostOpts, progress: bool) -> Result<Vec<Row>> {
    let (machines, policies) = validate(opts)?;
    let omit = omit_bits(&opts.omit)?;
    let mut obj = MaybeUninit::uninit();
    let mut bpf = CostBpf::load(&mut obj)?;
    bpf.verbose = opts.trace_test_runs;
    let total = machines.len() * opts.busy.len() * policies.len();
    let mut rows = vec![];
    let started = Instant::now();
    for &(llcs, n) in &machines {
        for &busy in &opts.busy {
            for (name, feat) in &policies {
                if progress {
                    eprintln!(
                        "placement-cost: [{}/{total}] {name} {llcs}x{n} busy {busy}% ({:.0} s)",
                        rows.len() + 1,
                        started.elapsed().as_secs_f64()
                    );
                }
                let case = Case {
                    llcs,
                    n,
                    busy,
                    feat: *feat,
                    omit,
                };
                rows.push(measure_case(&mut bpf, opts, &case, name)?);
            }
        }
    }
    Ok(rows)
}

/// One case of `measure`: a machine, its busy %, a policy's feature word, --omit's bits.
struct Case {
    llcs: u32,
    n: u32,
    busy: u32,
    feat: u64,
    omit: u32,
}

/// `measure`'s row of one case: a warm-up, then --runs runs, each on its own busy CPUs,
/// of the empty region, the wake-up and the tick.
fn measure_case(bpf: &mut CostBpf<'_>, opts: &CostOpts, c: &Case, name: &str) -> Result<Row> {
    let rules = DepthRules::of(c.feat);
    let set = |bpf: &mut CostBpf, layout: u64| -> Result<(u32, u64)> {
        let (idle, d) = bpf.set_case(c.llcs, c.n, opts.smt, c.busy, layout, rules)?;
        let bss = bpf.skel.maps.bss_data.as_mut().context("no bss")?;
        bss.llc_ctxs[..c.llcs as usize]
            .iter_mut()
            .for_each(|l| l.nr_idle_scan = d);
        Ok((idle, d))
    };
    let timed = |harness_only: bool, tick: bool| Timed {
        feat: c.feat,
        harness_only,
        cold: opts.cold,
        omit: c.omit,
        tick,
    };
    // warm-up: SIS_PROP's avg_scan_cost settles, code and data are cached
    let (idle, depth) = set(bpf, 0)?;
    bpf.run(timed(false, false), opts.placements, 1)?;
    bpf.run(timed(false, true), opts.placements, 1)?;
    let mut t = Tally::default();
    for r in 0..opts.runs {
        // each run its own busy CPUs; the empty region, the wake-up and the tick on them
        // (the clock's share is subtracted in row())
        set(bpf, 1 + r as u64)?;
        let mut run =
            |harness: bool, tick: bool| bpf.run(timed(harness, tick), opts.placements, 2 + r);
        let h = run(true, false)?;
        t.harness.push(h.ns as f64 / h.placements as f64);
        t.wake(&run(false, false)?);
        t.tick(&run(false, true)?);
    }
    Ok(t.row(opts, c, name, idle, depth))
}

/// What the runs of one case of `measure` add up to.
#[derive(Default)]
struct Tally {
    /// per run, ns per wake-up, per tick (the clock's share included), of the empty region
    ns: Vec<f64>,
    tick: Vec<f64>,
    harness: Vec<f64>,
    /// the wake-ups' histogram (1 ns buckets)
    hist: Vec<u64>,
    /// the wake-ups' and the ticks' counters
    cnt: Vec<u64>,
    tcnt: Vec<u64>,
    placed: u64,
    direct: u64,
    words: u64,
    rescued: u64,
    ticks: u64,
    tsearched: u64,
    twords: u64,
}

impl Tally {
    /// A wake-up run `o`.
    fn wake(&mut self, o: &RunOut) {
        self.ns.push(o.ns as f64 / o.placements as f64);
        self.placed += o.placements;
        self.direct += o.direct;
        self.words += o.word_tests;
        self.rescued += o.searched;
        self.cnt.resize(STAT_NR, 0);
        self.cnt.iter_mut().zip(&o.cnt).for_each(|(a, b)| *a += b);
        self.hist.resize(o.hist.len(), 0);
        self.hist
            .iter_mut()
            .zip(&o.hist)
            .for_each(|(a, &b)| *a += b as u64);
    }

    /// A tick run `o`.
    fn tick(&mut self, o: &RunOut) {
        self.tick.push(o.ns as f64 / o.placements as f64);
        self.ticks += o.placements;
        self.tsearched += o.searched;
        self.twords += o.word_tests;
        self.tcnt.resize(STAT_NR, 0);
        self.tcnt.iter_mut().zip(&o.cnt).for_each(|(a, b)| *a += b);
    }

    /// The case's row: medians with p25, p75, min and max over the runs, net of the clock:
    /// the empty region's least cost over the case's runs is subtracted from every run (a
    /// run's own empty region, preempted on a busy host, once made a net figure negative).
    fn row(mut self, opts: &CostOpts, c: &Case, name: &str, idle: u32, depth: u64) -> Row {
        for v in [&mut self.ns, &mut self.tick, &mut self.harness] {
            v.sort_by(|a, b| a.total_cmp(b));
        }
        let clock = self.harness[0];
        for v in [&mut self.ns, &mut self.tick] {
            v.iter_mut().for_each(|x| *x -= clock);
        }
        let (ns, tick, harness) = (&self.ns, &self.tick, &self.harness);
        let (placed, ticks) = (self.placed as f64, self.ticks as f64);
        let per = |s: usize| self.cnt[s] as f64 / placed;
        Row {
            policy: name.to_string(),
            features: features::to_words(c.feat).join(" "),
            llcs: c.llcs,
            llc_weight: c.n,
            smt: opts.smt,
            busy_pct: c.busy,
            idle_cpus: idle,
            nr_idle_scan: depth,
            runs: opts.runs,
            placements_per_run: opts.placements,
            ns_per_placement: percentile(ns, 0.5),
            ns_p25: percentile(ns, 0.25),
            ns_p75: percentile(ns, 0.75),
            ns_min: ns[0],
            ns_max: ns[ns.len() - 1],
            tick_ns: percentile(tick, 0.5),
            tick_p25: percentile(tick, 0.25),
            tick_p75: percentile(tick, 0.75),
            tick_min: tick[0],
            tick_max: tick[tick.len() - 1],
            tick_search_pct: 100.0 * self.tsearched as f64 / ticks,
            tick_kick_scanned: self.tcnt[STAT_KICK_SCANNED] as f64 / ticks,
            tick_word_tests: self.twords as f64 / ticks,
            ns_place_p50: hist_quantile(&self.hist, 0.5),
            ns_place_p99: hist_quantile(&self.hist, 0.99),
            ns_harness: percentile(harness, 0.5),
            ns_harness_min: harness[0],
            ns_harness_max: harness[harness.len() - 1],
            cpus_examined: per(STAT_SCANNED) + per(STAT_KICK_SCANNED),
            scanned: per(STAT_SCANNED),
            kick_scanned: per(STAT_KICK_SCANNED),
            word_tests: self.words as f64 / placed,
            rescue_pct: 100.0 * self.rescued as f64 / placed,
            direct_pct: 100.0 * self.direct as f64 / placed,
            not_timed: NOT_TIMED,
        }
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<28} {:>4} {:>4} {:>5} {:>5} {:>8} {:>15} {:>8} {:>15} {:>5} {:>8} {:>6} {:>7} {:>6} {:>6}",
        "policy",
        "llcs",
        "llc",
        "busy%",
        "depth",
        "wake ns",
        "min..max",
        "tick ns",
        "min..max",
        "clock",
        "examined",
        "words",
        "direct%",
        "t.kick",
        "t.wrds"
    );
    for r in rows {
        println!(
            "{:<28} {:>4} {:>4} {:>5} {:>5} {:>8.1} {:>15} {:>8.1} {:>15} {:>5.1} {:>8.2} {:>6.2} {:>7.1} {:>6.2} {:>6.2}",
            r.policy,
            r.llcs,
            r.llc_weight,
            r.busy_pct,
            r.nr_idle_scan,
            r.ns_per_placement,
            format!("{:.1}..{:.1}", r.ns_min, r.ns_max),
            r.tick_ns,
            format!("{:.1}..{:.1}", r.tick_min, r.tick_max),
            r.ns_harness,
            r.cpus_examined,
            r.word_tests,
            r.direct_pct,
            r.tick_kick_scanned,
            r.tick_word_tests
        );
    }
}

/// matplotlib script for crate::tools::plot::render (data, title, out defined there)
const PLOT_PY: &str = r#"
rows = data
loads = sorted({r["busy_pct"] for r in rows})
pols = list(dict.fromkeys(r["policy"] for r in rows))
# one x position per machine (LLCs x CPUs per LLC), by total CPUs then LLC count
machines = sorted({(r["llcs"] * r["llc_weight"], r["llcs"], r["llc_weight"]) for r in rows})
xpos = {(m[1], m[2]): i for i, m in enumerate(machines)}
ncol = min(3, len(loads))
nrow = (len(loads) + ncol - 1) // ncol
fig, axes = plt.subplots(nrow, ncol, squeeze=False, figsize=(4.4 * ncol, 3.4 * nrow + 1.2), sharey=True)
for ax in axes.flat[len(loads):]:
    ax.axis("off")
for j, b in enumerate(loads):
    ax = axes[j // ncol][j % ncol]
    for p in pols:
        pts = sorted((xpos[(r["llcs"], r["llc_weight"])], r["ns_per_placement"], r["ns_p25"], r["ns_p75"])
                     for r in rows if r["policy"] == p and r["busy_pct"] == b)
        if not pts:
            continue
        x = [t[0] for t in pts]
        style = "-o" if p in ("vanilla", "patched", "patched-unbounded") else "--."
        ax.errorbar(x, [t[1] for t in pts], yerr=[[t[1] - t[2] for t in pts], [t[3] - t[1] for t in pts]],
                    fmt=style, label=p, markersize=3, capsize=2, linewidth=1)
    ax.set_xticks(range(len(machines)), [f"{m[1]}x{m[2]}" for m in machines], fontsize=7, rotation=45)
    ax.set_yscale("log")
    ax.set_title(f"{b} % busy", fontsize=9)
    ax.set_xlabel("machine: LLCs x CPUs per LLC")
    ax.grid(True, which="both", alpha=0.3)
for row in axes:
    row[0].set_ylabel("ns per placement\n(median, p25..p75)")
h, l = axes[0][0].get_legend_handles_labels()
fig.legend(h, l, loc="upper center", ncol=min(len(pols), 4), fontsize=8)
fig.text(0.5, 0.01, title, ha="center", fontsize=8)
fig.tight_layout(rect=(0, 0.03, 1, 1 - 1.0 / (3.4 * nrow + 1.2)))
fig.savefig(out, format="png", dpi=110)
"#;

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn plot(rows: &[Row], out: &crate::tools::plot::PlotOut) -> Result<u64> {
    let title = format!(
        "scx_sisutil placement-cost on {} (kernel {})",
        cpu_model(),
        kernel_release()
    );
    crate::tools::plot::render(PLOT_PY, rows, out, &title)
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The loader's per-interval cost.
#[derive(Serialize, Debug)]
pub struct LoaderRow {
    pub cpus: u32,
    pub llc_weight: u32,
    pub interval_ms: u64,
    /// the CPU the timing (loader) thread is pinned to, and the writer thread's
    pub loader_cpu: usize,
    pub writer_cpu: usize,
    /// hot: the update alone, every line last written by the timing thread itself just
    /// before (all that --loader measured at first)
    pub hot_intervals: u32,
    pub hot_us: f64,
    pub hot_p25: f64,
    pub hot_p75: f64,
    /// the update alone, the per-CPU and per-LLC lines last written by the writer thread
    /// on writer_cpu (as BPF writes them between two intervals), after the wait
    pub intervals: u32,
    pub us_per_interval: f64,
    pub us_p25: f64,
    pub us_p75: f64,
    /// the loader thread's wake-up: from the wait's deadline (loader::IntervalWait, the
    /// scheduler's own wait) to its return: timer expiry, timer slack, idle exit, switch-in
    pub wake_us: f64,
    pub wake_p25: f64,
    pub wake_p75: f64,
    /// the wait's deadline to the end of the update (wake-up + update, per interval)
    pub total_us: f64,
    pub total_p25: f64,
    pub total_p75: f64,
    /// the writer's first writes after an interval, ns per CPU (its idle_ns and idle_start,
    /// each LLC's has_idle_cores): what BPF's next idle transitions pay for the update
    pub bpf_ns_per_cpu: f64,
    pub bpf_p25: f64,
    pub bpf_p75: f64,
    /// the update's share of one CPU at interval_ms (us_per_interval)
    pub cpu_pct: f64,
    /// total's share (an upper bound: the wake-up's latency is not all CPU work)
    pub total_pct: f64,
    /// the loader thread's own CPU time per interval, wait and update (the kernel's count:
    /// CLOCK_THREAD_CPUTIME_ID from the wait's start to the update's end), and its share
    /// of one CPU at interval_ms: what the loader's main thread costs, measured
    pub thread_cpu_us: f64,
    pub thread_cpu_p25: f64,
    pub thread_cpu_p75: f64,
    pub thread_cpu_pct: f64,
}

/// What each of `LoaderRow::figures` is, in its order: --loader's table's last column.
const LOADER_FIGURES: [&str; 6] = [
    "update, lines last written by the timing thread",
    "update, lines last written by the writer on the other CPU",
    "the wait's deadline to its return (timer slack included)",
    "deadline to the end of the update",
    "ns per CPU: the writer's first writes after an update (BPF's side)",
    "the loader thread's own CPU time per interval (wait + update, CLOCK_THREAD_CPUTIME_ID)",
];

impl LoaderRow {
    /// Each figure (`LOADER_FIGURES`): its name, the intervals it was timed over, and its
    /// median, p25 and p75.
    fn figures(&self) -> [(&'static str, u32, [f64; 3]); 6] {
        let (hot, n) = (self.hot_intervals, self.intervals);
        [
            ("hot", hot, [self.hot_us, self.hot_p25, self.hot_p75]),
            (
                "update",
                n,
                [self.us_per_interval, self.us_p25, self.us_p75],
            ),
            ("wake", n, [self.wake_us, self.wake_p25, self.wake_p75]),
            ("total", n, [self.total_us, self.total_p25, self.total_p75]),
            ("bpf", n, [self.bpf_ns_per_cpu, self.bpf_p25, self.bpf_p75]),
            (
                "cpu",
                n,
                [self.thread_cpu_us, self.thread_cpu_p25, self.thread_cpu_p75],
            ),
        ]
    }
}

/// The .bss lines both threads of `measure_loader` use; one at a time (they hand over
/// through channels, which order the accesses).
#[derive(Clone, Copy)]
struct Lines {
    cpu: *mut bi::cpu_ctx,
    llc: *mut bi::llc_ctx,
    nr_cpus: usize,
    nr_llcs: usize,
}
// SAFETY: the pointers are into the object's mmapped .bss, alive for measure_loader's
// scope; the threads touch them in turn, never at once (see Lines)
unsafe impl Send for Lines {}

impl Lines {
    /// `measure_loader`'s writer thread, pinned to `cpu`: for each `Some(now)` on `go`, the
    /// lines written as BPF does, its time per CPU (ns) sent back on `done`; `None` ends it.
    fn writer(
        self,
        cpu: usize,
        go: crossbeam::channel::Receiver<Option<u64>>,
        done: crossbeam::channel::Sender<f64>,
        interval_ns: u64,
    ) -> Result<()> {
        pin_to(cpu)?;
        let mut seed = 7u64;
        while let Ok(Some(now)) = go.recv() {
            let t = Instant::now();
            self.write_as_bpf(&mut seed, now, interval_ns);
            let ns = t.elapsed().as_secs_f64() * 1e9 / self.nr_cpus as f64;
            if done.send(ns).is_err() {
                break;
            }
        }
        Ok(())
    }

    /// What BPF writes between two intervals, with idle.bpf.h's instructions: each CPU's
    /// open idle period closed (idle_exit: cmpxchg of idle_start to 0), its closed periods
    /// added to idle_ns (the atomic add), a new period opened on a quarter of them
    /// (idle_enter: a plain write); each LLC's has_idle_cores written.
    fn write_as_bpf(&self, seed: &mut u64, now: u64, interval_ns: u64) {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        for cpu in 0..self.nr_cpus {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // SAFETY: cpu < nr_cpus, the slice's length; the words are 8-aligned; see Lines
            unsafe {
                let cc = self.cpu.add(cpu);
                let start = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*cc).idle_start));
                let ns = AtomicU64::from_ptr(std::ptr::addr_of_mut!((*cc).idle_ns));
                let open = start.load(SeqCst);
                if open != 0 {
                    let _ = start.compare_exchange(open, 0, SeqCst, SeqCst);
                }
                ns.fetch_add((*seed >> 33) % interval_ns, SeqCst);
                if (*seed >> 20) & 3 == 0 {
                    start.store(
                        now - (*seed >> 40) % interval_ns,
                        std::sync::atomic::Ordering::Relaxed,
                    );
                }
            }
        }
        for l in 0..self.nr_llcs {
            // SAFETY: l < nr_llcs; see Lines
            unsafe {
                let lc = self.llc.add(l);
                std::ptr::write_volatile(&mut (*lc).has_idle_cores, (*seed >> (l % 64)) & 1);
            }
        }
    }
}

/// The calling thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to fill
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Let the calling thread run on `cpus` only.
fn set_affinity(cpus: &[usize]) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; it holds `cpus` only
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        bail!(
            "pinning to CPUs {cpus:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Pin the calling thread to `cpu`.
fn pin_to(cpu: usize) -> Result<()> {
    set_affinity(&[cpu])
}

/// Median, p25 and p75 of `v` (sorted here).
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (percentile(v, 0.5), percentile(v, 0.25), percentile(v, 0.75))
}

/// The loader's per-interval work, UtilUpdate on the cost object's .bss, two ways, on a
/// thread pinned to the first CPU this process may use:
/// hot (runs x 300 intervals): the timing thread writes the lines itself just before;
/// cross (runs x 50 intervals): a writer thread pinned to the second CPU writes them as BPF
/// does, the loader thread then waits for the interval as the scheduler does
/// (loader::IntervalWait) and is timed from the deadline (wake) to the end of the update;
/// its own CPU time (CLOCK_THREAD_CPUTIME_ID) from one wait to the next.
pub fn measure_loader(opts: &CostOpts) -> Result<LoaderRow> {
    let (llcs, cpus) = loader_machine(opts)?;
    let (loader_cpu, writer_cpu) = (cpus[0], cpus[1]);
    let mut obj = MaybeUninit::uninit();
    let mut bpf = CostBpf::load(&mut obj)?;
    let rig = LoaderRig::new(&mut bpf, llcs, opts.interval_ms)?;
    let hot_intervals = opts.runs.max(1) * 300;
    let intervals = opts.runs.max(1) * 50;
    let (go_tx, go_rx) = crossbeam::channel::bounded::<Option<u64>>(1);
    let (done_tx, done_rx) = crossbeam::channel::bounded::<f64>(1);
    let lines = rig.lines;
    let (hot, cross) = std::thread::scope(|sc| -> Result<_> {
        let interval_ns = rig.interval_ns;
        let writer = sc.spawn(move || lines.writer(writer_cpu, go_rx, done_tx, interval_ns));
        // the timing runs on this thread (the feature word's mapping stays on it), pinned
        // for the measurement, its affinity given back after
        let timer = || -> Result<_> {
            pin_to(loader_cpu)?;
            let mut rig = rig;
            let mut now = 1_000_000_000u64;
            let hot = rig.time_hot(hot_intervals, &mut now);
            let cross = rig.time_cross(intervals, &mut now, &go_tx, &done_rx)?;
            Ok((hot, cross))
        };
        let r = timer();
        let _ = go_tx.send(None);
        let back = set_affinity(&cpus);
        writer
            .join()
            .unwrap_or_else(|_| bail!("the writer thread panicked"))?;
        back?;
        r
    })?;
    Ok(loader_row(
        opts,
        (loader_cpu, writer_cpu),
        (hot_intervals, hot),
        (intervals, cross),
    ))
}

/// --loader's machine: its LLCs (CPUs 0..--loader-cpus in LLCs of --loader-llc), and the
/// CPUs this process may use, two at least (the timing thread's and the writer's).
fn loader_machine(opts: &CostOpts) -> Result<(Vec<Vec<usize>>, Vec<usize>)> {
    let n = opts.loader_cpus as usize;
    let per = (opts.loader_llc as usize).min(n);
    let nr_llcs = n.div_ceil(per);
    if nr_llcs > bi::sis_consts_MAX_LLCS as usize {
        bail!(
            "--loader-cpus {n} in LLCs of {per}: {nr_llcs} LLCs, at most {}",
            bi::sis_consts_MAX_LLCS
        );
    }
    let cpus = allowed_cpus()?;
    if cpus.len() < 2 {
        bail!(
            "--loader needs two CPUs this process may run on (one times the loader, one writes the lines as BPF does); it may use {}",
            cpus.len()
        );
    }
    let llcs = (0..nr_llcs)
        .map(|l| (l * per..((l + 1) * per).min(n)).collect())
        .collect();
    Ok((llcs, cpus))
}

/// The cross-thread timings of `measure_loader`, per interval (us, except `bpf_ns`).
#[derive(Default)]
struct LoaderCross {
    us: Vec<f64>,
    wake: Vec<f64>,
    total: Vec<f64>,
    bpf_ns: Vec<f64>,
    /// the loader thread's CPU time from the wait's start to the update's end
    thread_cpu: Vec<f64>,
}

/// The loader's side of `measure_loader`: the lines in the cost object's .bss, the feature
/// word's mapping (patched) and the update the scheduler's loader runs on them.
struct LoaderRig {
    lines: Lines,
    fw: crate::sched::bpf_maps::MappedWords,
    up: crate::sched::loader::UtilUpdate,
    interval_ns: u64,
    interval: Duration,
}

impl LoaderRig {
    fn new(bpf: &mut CostBpf<'_>, llcs: Vec<Vec<usize>>, interval_ms: u64) -> Result<Self> {
        let nr_llcs = llcs.len();
        let n = llcs.iter().map(Vec::len).sum();
        let feat = features::preset(Preset::patched());
        bpf.skel
            .maps
            .sis_features
            .update(&0u32.to_ne_bytes(), &feat.to_ne_bytes(), MapFlags::ANY)
            .context("setting the feature word")?;
        let fw = crate::sched::bpf_maps::MappedWords::map(
            &bpf.skel.maps.sis_features,
            1,
            "the feature word",
        )?;
        let up = crate::sched::loader::UtilUpdate::new(llcs, n, DEFAULT_IMBALANCE_PCT);
        let bss = bpf.skel.maps.bss_data.as_mut().context("no bss")?;
        let lines = Lines {
            cpu: crate::sched::bpf_maps::intf_slice::<_, bi::cpu_ctx>(&mut bss.cpu_ctxs)
                .as_mut_ptr(),
            llc: crate::sched::bpf_maps::intf_slice::<_, bi::llc_ctx>(&mut bss.llc_ctxs)
                .as_mut_ptr(),
            nr_cpus: n,
            nr_llcs,
        };
        Ok(LoaderRig {
            lines,
            fw,
            up,
            interval_ns: interval_ms * 1_000_000,
            interval: Duration::from_millis(interval_ms),
        })
    }

    /// One interval's update at `now`, as the scheduler's loader runs it.
    fn update(&mut self, now: u64) {
        let l = self.lines;
        // SAFETY: the .bss arrays hold MAX_CPUS / MAX_LLCS entries; nr_cpus and nr_llcs are
        // within them (checked by loader_machine and by the option's range); see Lines
        unsafe {
            self.up.update(
                DepthRules::of(self.fw.read(0)),
                now,
                std::slice::from_raw_parts_mut(l.cpu, l.nr_cpus),
                std::slice::from_raw_parts_mut(l.llc, l.nr_llcs),
                &[],
            )
        };
    }

    /// hot: this thread writes the lines as BPF does, then times the update (us each; the
    /// first interval, which starts the averages, not kept).
    fn time_hot(&mut self, intervals: u32, now: &mut u64) -> Vec<f64> {
        let mut seed = 1u64;
        let mut hot = vec![];
        for i in 0..intervals + 1 {
            self.lines.write_as_bpf(&mut seed, *now, self.interval_ns);
            *now += self.interval_ns;
            let t = Instant::now();
            self.update(*now);
            if i > 0 {
                hot.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        hot
    }

    /// cross: the writer thread writes the lines (`go`, its time per CPU back on `done`),
    /// this thread waits out the interval as the scheduler does and is timed from the
    /// deadline.
    fn time_cross(
        &mut self,
        intervals: u32,
        now: &mut u64,
        go: &crossbeam::channel::Sender<Option<u64>>,
        done: &crossbeam::channel::Receiver<f64>,
    ) -> Result<LoaderCross> {
        // the scheduler's wait, its stats channel never sent on (as between stats requests)
        let (_idle_tx, idle_rx) = crossbeam::channel::bounded::<()>(1);
        let mut wait = crate::sched::loader::IntervalWait::new(self.interval, Some(idle_rx));
        let mut clock = crate::sched::clock::monotonic_ns;
        // the first wait returns at once: the deadlines from here on are the loop's
        let _ = wait.wait(&mut clock);
        let stopped = || anyhow::anyhow!("the writer thread stopped");
        let us_of = |ns: u64| ns as f64 / 1e3;
        let mut c = LoaderCross::default();
        for i in 0..intervals + 1 {
            go.send(Some(*now)).map_err(|_| stopped())?;
            let w = done.recv().map_err(|_| stopped())?;
            *now += self.interval_ns;
            let deadline = wait.deadline();
            let cpu0 = thread_cpu_ns();
            let woke = match wait.wait(&mut clock) {
                crate::sched::loader::Wake::Interval(t) => t,
                crate::sched::loader::Wake::Requests(_) => bail!("a request nobody sent"),
            };
            self.update(*now);
            let end = crate::sched::clock::monotonic_ns();
            let cpu = thread_cpu_ns();
            if i > 0 {
                c.wake.push(us_of(woke.saturating_sub(deadline)));
                c.us.push(us_of(end - woke));
                c.total.push(us_of(end.saturating_sub(deadline)));
                c.bpf_ns.push(w);
                // from the wait's start to the update's end: the writer's hand-off above is
                // the measurement's, not the loader's
                c.thread_cpu.push(us_of(cpu - cpu0));
            }
        }
        Ok(c)
    }
}

/// `measure_loader`'s row from its timings: medians with p25 and p75.
fn loader_row(
    opts: &CostOpts,
    (loader_cpu, writer_cpu): (usize, usize),
    (hot_intervals, mut hot): (u32, Vec<f64>),
    (intervals, mut c): (u32, LoaderCross),
) -> LoaderRow {
    let n = opts.loader_cpus as usize;
    let per = (opts.loader_llc as usize).min(n);
    let (hot_us, hot_p25, hot_p75) = spread(&mut hot);
    let (med, us_p25, us_p75) = spread(&mut c.us);
    let (wake_us, wake_p25, wake_p75) = spread(&mut c.wake);
    let (total_us, total_p25, total_p75) = spread(&mut c.total);
    let (bpf_ns_per_cpu, bpf_p25, bpf_p75) = spread(&mut c.bpf_ns);
    let (thread_cpu_us, thread_cpu_p25, thread_cpu_p75) = spread(&mut c.thread_cpu);
    let pct = |us: f64| 100.0 * us / (opts.interval_ms as f64 * 1000.0);
    LoaderRow {
        cpus: n as u32,
        llc_weight: per as u32,
        interval_ms: opts.interval_ms,
        loader_cpu,
        writer_cpu,
        hot_intervals,
        hot_us,
        hot_p25,
        hot_p75,
        intervals,
        us_per_interval: med,
        us_p25,
        us_p75,
        wake_us,
        wake_p25,
        wake_p75,
        total_us,
        total_p25,
        total_p75,
        bpf_ns_per_cpu,
        bpf_p25,
        bpf_p75,
        cpu_pct: pct(med),
        total_pct: pct(total_us),
        thread_cpu_us,
        thread_cpu_p25,
        thread_cpu_p75,
        thread_cpu_pct: pct(thread_cpu_us),
    }
}

/// --contention's table: a row per mode and thread count, then wake-shards over wake-queue.
fn print_contention(opts: &CostOpts, rows: &[ContRow]) {
    println!(
        "# {} (kernel {}), {} rounds of {} updates per thread; a round counts when the \
         threads ran at once >= {CONT_TOGETHER_PCT} % of the time (per-iteration stamps)",
        cpu_model(),
        kernel_release(),
        opts.runs,
        CONT_UPDATES
    );
    println!(
        "{:<14} {:>7} {:>9} {:>15} {:>9} {:>6} {:>8}",
        "mode", "threads", "ns/upd", "min..max", "together%", "rounds", "refused"
    );
    for r in rows {
        println!(
            "{:<14} {:>7} {:>9.2} {:>15} {:>9.1} {:>6} {:>8}",
            r.mode,
            r.threads,
            r.ns_per_update,
            format!("{:.2}..{:.2}", r.ns_min, r.ns_max),
            r.together_pct,
            r.runs,
            r.refused
        );
    }
    for r in rows.iter().filter(|r| r.ratio_to_wake_queue.is_some()) {
        println!(
            "wake-shards / wake-queue at {} threads: {:.2} (min {:.2}, max {:.2}, over the \
             rounds both accepted)",
            r.threads,
            r.ratio_to_wake_queue.unwrap_or(0.0),
            r.ratio_min.unwrap_or(0.0),
            r.ratio_max.unwrap_or(0.0)
        );
    }
}

/// --loader's table: one line per figure, medians with p25..p75.
fn print_loader(r: &LoaderRow) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "# {} (kernel {}), loadavg {}; loader thread on CPU {}, writer on CPU {}",
        cpu_model(),
        kernel_release(),
        load.trim(),
        r.loader_cpu,
        r.writer_cpu
    );
    println!(
        "# loader: {} CPUs in LLCs of {}, interval {} ms; µs per interval, median (p25..p75)",
        r.cpus, r.llc_weight, r.interval_ms
    );
    for ((name, n, v), what) in r.figures().into_iter().zip(LOADER_FIGURES) {
        println!(
            "{name:<8} {n:>6} {:>9.2} ({:.2}..{:.2})  {what}",
            v[0], v[1], v[2]
        );
    }
    println!(
        "% of one CPU at {} ms: update {:.4} %, total {:.4} % (an upper bound), loader thread {:.4} % (its CPU time)",
        r.interval_ms, r.cpu_pct, r.total_pct, r.thread_cpu_pct
    );
}

/// One --contention case.
#[derive(Serialize, Debug, Clone)]
pub struct ContRow {
    pub mode: &'static str,
    pub threads: usize,
    /// median over the accepted rounds of the threads' mean ns per update; min..max, p25..p75
    pub ns_per_update: f64,
    pub ns_p25: f64,
    pub ns_p75: f64,
    pub ns_min: f64,
    pub ns_max: f64,
    /// median over the accepted rounds: the time every thread was running at once, from
    /// their per-iteration stamps, in % of the longest thread's (near 100: two CPUs at once)
    pub together_pct: f64,
    /// rounds accepted (all threads running at once >= CONT_TOGETHER_PCT % of the time) and
    /// refused (fewer than --runs accepted after 3 x --runs tries: said on stderr)
    pub runs: u32,
    pub refused: u32,
    pub updates: u32,
    /// wake-shards only: its ns per update over wake-queue's, per round (the two measured
    /// back to back in each), median, min and max over the rounds both accepted
    pub ratio_to_wake_queue: Option<f64>,
    pub ratio_min: Option<f64>,
    pub ratio_max: Option<f64>,
}

/// tool_intf.h's cont_modes, in order: each mode's name
const CONT_MODES: [&str; ti::cont_modes_CONT_NR as usize] = [
    "shared-atomic",
    "packed-atomic",
    "line-atomic",
    "line-plain",
    "wake-queue",
    "wake-shards",
];
const CONT_UPDATES: u32 = 1 << 20;
/// tool_intf.h's CONT_TS (stamps per thread) and CONT_TS_CPUS
const CONT_TS: usize = ti::cont_consts_CONT_TS as usize;
const CONT_TS_CPUS: usize = ti::cont_consts_CONT_TS_CPUS as usize;
/// A round counts only if every thread ran at the same time for this % of the longest
/// thread's run (from the stamps); two threads time-sliced on one CPU are near 0.
const CONT_TOGETHER_PCT: f64 = 50.0;

/// The time every thread was running at once, in % of the longest thread's span, from each
/// thread's per-iteration stamps (`ts[t]`, ascending): thread t is running between two
/// consecutive stamps when they are at most 4 x its median step apart (a longer gap is a
/// preemption, or the CPU lent to the other thread).
pub fn together_pct(ts: &[Vec<u64>]) -> f64 {
    if ts.is_empty() || ts.iter().any(|v| v.len() < 2) {
        return 0.0;
    }
    // each thread's running intervals, merged
    let runs: Vec<Vec<(u64, u64)>> = ts
        .iter()
        .map(|v| {
            let mut gaps: Vec<u64> = v.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
            gaps.sort_unstable();
            let limit = 4 * gaps[gaps.len() / 2].max(1);
            let mut iv: Vec<(u64, u64)> = vec![];
            for w in v.windows(2) {
                if w[1] <= w[0] || w[1] - w[0] > limit {
                    continue;
                }
                match iv.last_mut() {
                    Some(l) if l.1 == w[0] => l.1 = w[1],
                    _ => iv.push((w[0], w[1])),
                }
            }
            iv
        })
        .collect();
    let longest = ts
        .iter()
        .map(|v| v[v.len() - 1] - v[0])
        .max()
        .unwrap_or(0)
        .max(1);
    // intersect the threads' interval lists, two at a time
    let mut both = runs[0].clone();
    for r in &runs[1..] {
        let (mut i, mut j, mut out) = (0, 0, vec![]);
        while i < both.len() && j < r.len() {
            let (lo, hi) = (both[i].0.max(r[j].0), both[i].1.min(r[j].1));
            if lo < hi {
                out.push((lo, hi));
            }
            if both[i].1 < r[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        both = out;
    }
    100.0 * both.iter().map(|&(a, b)| b - a).sum::<u64>() as f64 / longest as f64
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        bail!("sched_getaffinity: {}", std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pin the calling thread to `cpu`, then run the program of `fd` once.
fn pinned_test_run(fd: i32, cpu: usize, start: &std::sync::Barrier) -> Result<()> {
    // SAFETY: as in allowed_cpus; the set holds `cpu` only
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        bail!("pinning to CPU {cpu}: {}", std::io::Error::last_os_error());
    }
    start.wait();
    let mut o = libbpf_rs::libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_test_run_opts>() as _,
        ..Default::default()
    };
    // SAFETY: fd is the loaded program's, alive for the scope; o is initialised with its size
    if unsafe { libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(fd, &mut o) } != 0 {
        bail!("BPF_PROG_TEST_RUN: {}", std::io::Error::last_os_error());
    }
    if o.retval != 0 {
        bail!(
            "the contention program refused its configuration ({})",
            o.retval
        );
    }
    Ok(())
}

/// What one contention run gives per thread: its (t0, t1) and its per-iteration stamps.
type ContSpans = (Vec<(u64, u64)>, Vec<Vec<u64>>);

/// One run of the contention program in mode `mode`, `updates` per thread, a thread pinned
/// to each of `cpus`, all started together: each thread's (t0, t1), and the stamps of the
/// threads on CPUs below CONT_TS_CPUS.
fn contention_run(
    bpf: &mut CostBpf<'_>,
    fd: i32,
    mode: u32,
    cpus: &[usize],
    updates: u32,
) -> Result<ContSpans> {
    // a stamp every 2^shift steps of 16 updates: at most CONT_TS of them
    let steps = (updates / 16).max(1) as usize;
    let shift = (steps.div_ceil(CONT_TS))
        .next_power_of_two()
        .trailing_zeros();
    {
        let bss = bpf.skel.maps.bss_data.as_mut().context("no bss")?;
        bss.cont_cfg.mode = mode;
        bss.cont_cfg.iters = updates;
        bss.cont_cfg.ts_shift = shift;
        bss.cont_t0.fill(0);
        bss.cont_t1.fill(0);
        for t in bss.cont_ts.iter_mut() {
            t.fill(0);
        }
    }
    let start = std::sync::Barrier::new(cpus.len());
    std::thread::scope(|sc| {
        let hs: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let start = &start;
                sc.spawn(move || pinned_test_run(fd, cpu, start))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| bail!("a measuring thread panicked"))
            })
            .collect::<Result<Vec<()>>>()
    })?;
    let bss = bpf.skel.maps.bss_data.as_ref().context("no bss")?;
    let spans: Vec<(u64, u64)> = cpus
        .iter()
        .map(|&c| (bss.cont_t0[c], bss.cont_t1[c]))
        .collect();
    if spans.iter().any(|&(a, b)| b <= a) {
        bail!("a thread's run left no timing (was it moved off its CPU?)");
    }
    let n = (steps >> shift).clamp(1, CONT_TS);
    let stamps = cpus
        .iter()
        .filter(|&&c| c < CONT_TS_CPUS)
        .map(|&c| bss.cont_ts[c][..n].to_vec())
        .collect();
    Ok((spans, stamps))
}

/// Per case of `measure_contention`, per round, Some((ns per update, together %)) where
/// the round was accepted; the rounds refused per case; the rounds tried.
type Rounds = (Vec<Vec<Option<(f64, f64)>>>, Vec<u32>, u32);

/// `measure_contention`'s rounds: each every case (mode, threads) back to back, until each
/// case has --runs accepted rounds or 3 x --runs rounds were tried.
fn contention_rounds(
    opts: &CostOpts,
    bpf: &mut CostBpf<'_>,
    fd: i32,
    cpus: &[usize],
    cases: &[(usize, usize)],
) -> Result<Rounds> {
    // per case: per round, Some((ns per update, together %)) if accepted
    let mut got: Vec<Vec<Option<(f64, f64)>>> = vec![vec![]; cases.len()];
    let mut refused = vec![0u32; cases.len()];
    let mut tries = 0;
    while tries < 3 * opts.runs
        && got
            .iter()
            .any(|g| g.iter().flatten().count() < opts.runs as usize)
    {
        tries += 1;
        for (k, &(mode, t)) in cases.iter().enumerate() {
            let (spans, stamps) = contention_run(bpf, fd, mode as u32, &cpus[..t], CONT_UPDATES)?;
            let mean = spans.iter().map(|&(a, b)| (b - a) as f64).sum::<f64>() / t as f64;
            let ns = mean / CONT_UPDATES as f64;
            let together = if t > 1 { together_pct(&stamps) } else { 100.0 };
            if t > 1 && together < CONT_TOGETHER_PCT {
                refused[k] += 1;
                eprintln!(
                    "placement-cost --contention: {} with {t} threads, round {tries} refused: \
                     the threads ran at once {together:.0} % of the time (per-iteration \
                     stamps; < {CONT_TOGETHER_PCT} %)",
                    CONT_MODES[mode]
                );
                got[k].push(None);
            } else {
                got[k].push(Some((ns, together)));
            }
        }
    }
    Ok((got, refused, tries))
}

pub fn measure_contention(opts: &CostOpts) -> Result<Vec<ContRow>> {
    use std::os::fd::{AsFd, AsRawFd};
    let cpus = allowed_cpus()?;
    if cpus.is_empty() {
        bail!("no CPU to run on (sched_getaffinity gave an empty set)");
    }
    let mut obj = MaybeUninit::uninit();
    let mut bpf = CostBpf::load(&mut obj)?;
    let fd = bpf.skel.progs.contention.as_fd().as_raw_fd();
    let mut counts = vec![1];
    if cpus.len() > 1 {
        counts.push(cpus.len().min(bi::sis_consts_MAX_CPUS as usize));
    }
    // rounds, each every mode at each thread count back to back (a ratio within a round
    // sees one state of the host); a round whose threads did not run at once is refused and
    // tried again, up to 3 x --runs tries in all
    let cases: Vec<(usize, usize)> = (0..CONT_MODES.len())
        .flat_map(|m| counts.iter().map(move |&t| (m, t)))
        .collect();
    let (got, refused, tries) = contention_rounds(opts, &mut bpf, fd, &cpus, &cases)?;
    let mut rows = vec![];
    for (k, &(mode, t)) in cases.iter().enumerate() {
        let mut ns: Vec<f64> = got[k].iter().flatten().map(|x| x.0).collect();
        let mut together: Vec<f64> = got[k].iter().flatten().map(|x| x.1).collect();
        if ns.is_empty() {
            bail!(
                "--contention: {} with {t} threads: no round in {tries} where the threads ran \
                 at once (the host gave them no two CPUs together)",
                CONT_MODES[mode]
            );
        }
        if ns.len() < opts.runs as usize {
            eprintln!(
                "placement-cost --contention: {} with {t} threads: {} rounds accepted of \
                 {tries} tried ({} refused)",
                CONT_MODES[mode],
                ns.len(),
                refused[k]
            );
        }
        ns.sort_by(|a, b| a.total_cmp(b));
        together.sort_by(|a, b| a.total_cmp(b));
        // wake-shards over wake-queue, round by round where both were accepted
        let mut ratio: Vec<f64> = vec![];
        if mode == ti::cont_modes_CONT_WAKE_SHARDS as usize {
            let q = cases
                .iter()
                .position(|&(m, tt)| m == ti::cont_modes_CONT_WAKE_QUEUE as usize && tt == t)
                .context("no wake-queue case")?;
            ratio = got[k]
                .iter()
                .zip(&got[q])
                .filter_map(|(a, b)| Some(a.as_ref()?.0 / b.as_ref()?.0))
                .collect();
            ratio.sort_by(|a, b| a.total_cmp(b));
        }
        rows.push(ContRow {
            mode: CONT_MODES[mode],
            threads: t,
            ns_per_update: percentile(&ns, 0.5),
            ns_p25: percentile(&ns, 0.25),
            ns_p75: percentile(&ns, 0.75),
            ns_min: ns[0],
            ns_max: ns[ns.len() - 1],
            together_pct: percentile(&together, 0.5),
            runs: ns.len() as u32,
            refused: refused[k],
            updates: CONT_UPDATES,
            ratio_to_wake_queue: (!ratio.is_empty()).then(|| percentile(&ratio, 0.5)),
            ratio_min: ratio.first().copied(),
            ratio_max: ratio.last().copied(),
        });
    }
    Ok(rows)
}

/// A measurement's result on stdout: JSON with --json, else the table `table` prints.
fn emit<T: Serialize + ?Sized>(opts: &CostOpts, rows: &T, table: impl FnOnce(&T)) -> Result<()> {
    if opts.json {
        println!("{}", serde_json::to_string_pretty(rows)?);
    } else {
        table(rows);
    }
    Ok(())
}

pub fn cost_main(opts: &CostOpts) -> Result<()> {
    if opts.contention && (opts.loader || opts.plot.is_some()) {
        bail!("--contention measures alone: no --loader, no --plot");
    }
    if opts.contention {
        let rows = measure_contention(opts)?;
        return emit(opts, &rows, |rows| print_contention(opts, rows));
    }
    if opts.loader && opts.plot.is_some() {
        bail!("--plot draws the placement table; --loader has none to draw");
    }
    if opts.loader {
        return emit(opts, &measure_loader(opts)?, print_loader);
    }
    // a bad --plot fails now, not after the measuring
    let plot_out = opts
        .plot
        .as_deref()
        .map(crate::tools::plot::check_out)
        .transpose()?;
    // a test run cannot be interrupted: the signal stops the measurement between two
    ctrlc::set_handler(|| STOP.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;
    let rows = measure(opts, true)?;
    emit(opts, &rows, |rows| {
        println!(
            "# {} (kernel {}), {} runs of {} placements and as many ticks per case",
            cpu_model(),
            kernel_release(),
            opts.runs,
            opts.placements
        );
        println!(
            "# wake ns: select_cpu + the enqueue as the policy runs them (the kick search only \
             with WAKE_RESCUE); tick ns: a busy CPU's tick with a task queued (the kick \
             decision and search); both the median over the runs, min..max, net of the clock \
             (its empty region: the clock column)"
        );
        println!("# not timed: {NOT_TIMED}");
        print_table(rows);
    })?;
    if let Some(out) = &plot_out {
        let n = plot(&rows, out)?;
        eprintln!("placement-cost: wrote {} ({n} bytes)", out.path().display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! What does not depend on timing: the CPUs each policy examines, exact where the
    //! arithmetic fixes it. Needs root (bpf()); no skip without it.
    use super::*;

    fn opts(sizes: &[u32], busy: &[u32], smt: bool, policies: &[&str]) -> CostOpts {
        CostOpts {
            llc_sizes: sizes.to_vec(),
            topologies: vec![],
            busy: busy.to_vec(),
            smt,
            policies: policies.iter().map(|s| s.to_string()).collect(),
            runs: 2,
            placements: 500,
            cold: false,
            omit: vec![],
            json: true,
            plot: None,
            loader: false,
            loader_cpus: 256,
            loader_llc: 32,
            interval_ms: 20,
            contention: false,
            trace_test_runs: false,
        }
    }

    /// --loader runs both ways (hot, and with the lines written on another CPU and the
    /// wait's wake-up) and reports every field; not a timing assertion (the figures are the
    /// host's): counts as asked, two distinct CPUs, each spread ordered, and total, which
    /// is wake-up + update per interval, not below either.
    #[test]
    fn loader_mode_reports_every_field() {
        let mut o = opts(&[8], &[0], false, &[]);
        (o.loader, o.loader_cpus, o.loader_llc, o.interval_ms, o.runs) = (true, 64, 16, 1, 1);
        let r = measure_loader(&o).unwrap();
        assert_eq!((r.cpus, r.llc_weight, r.interval_ms), (64, 16, 1));
        assert_eq!((r.hot_intervals, r.intervals), (300, 50));
        assert_ne!(r.loader_cpu, r.writer_cpu);
        // every figure but the thread's CPU time (below: it may read 0 at a clock's grain)
        for (name, _, [med, p25, p75]) in &r.figures()[..5] {
            assert!(
                *p25 > 0.0 && p25 <= med && med <= p75 && p75.is_finite(),
                "{name}: {p25} {med} {p75}"
            );
        }
        assert!(
            r.total_us >= r.wake_us && r.total_us >= r.us_per_interval,
            "{r:?}"
        );
        assert!((r.cpu_pct - r.us_per_interval / 10.0).abs() < 1e-9, "{r:?}");
        assert!(r.total_pct >= r.cpu_pct, "{r:?}");
        // the thread's CPU time covers the update it timed (and the wait's syscalls)
        assert!(
            r.thread_cpu_p25 <= r.thread_cpu_us && r.thread_cpu_us <= r.thread_cpu_p75,
            "{r:?}"
        );
        assert!(
            (r.thread_cpu_pct - r.thread_cpu_us / 10.0).abs() < 1e-9,
            "{r:?}"
        );
    }

    /// wake_allowed (ctx.bpf.h, timed here): a task allowed everywhere (its weight is the
    /// possible CPUs') gets the possible mask kept at ops.init without its own being read;
    /// any other task its own mask, word by word, nothing past nr_cpu_ids.
    #[test]
    fn wake_allowed_copies_only_restricted_masks() {
        let words = |cpus: &[usize]| {
            let mut w = [0u64; bi::sis_consts_MAX_CPUS as usize / 64];
            for &c in cpus {
                w[c / 64] |= 1 << (c % 64);
            }
            w
        };
        let mut obj = MaybeUninit::uninit();
        let mut bpf = CostBpf::load(&mut obj).unwrap();
        let possible = words(&(0..8).collect::<Vec<_>>());
        let bss = bpf.skel.maps.bss_data.as_mut().unwrap();
        bss.possible_cpus = possible;
        bss.nr_possible_cpus = 8;
        bss.topo.nr_cpu_ids = 8;
        // (cpus_ptr, nr_cpus_allowed, the words the wake-up must get)
        for (mask, weight, want) in [
            // allowed everywhere: the kept mask, whatever cpus_ptr holds (it is not read)
            (words(&[0]), 8, possible),
            // restricted: its own mask
            (words(&[1, 2]), 2, words(&[1, 2])),
            (
                words(&[0, 1, 2, 3, 4, 5, 6]),
                7,
                words(&[0, 1, 2, 3, 4, 5, 6]),
            ),
            // bits past nr_cpu_ids (8 CPUs: word 0 only) are not copied
            (words(&[3, 100, 300]), 3, words(&[3])),
        ] {
            let bss = bpf.skel.maps.bss_data.as_mut().unwrap();
            bss.wa_mask = mask;
            bss.wa_weight = weight;
            bss.wa_out = [u64::MAX; bi::sis_consts_MAX_CPUS as usize / 64];
            let ret = run_once(&bpf.skel.progs.wake_allowed_test).unwrap();
            assert_eq!(ret, 0);
            let got = bpf.skel.maps.bss_data.as_ref().unwrap().wa_out;
            assert_eq!(got, want, "weight {weight}");
        }
    }

    /// --contention: each mode updates the words it names (one shared word from every
    /// thread, a word per CPU packed or a line apart), every update counted once.
    #[test]
    fn placement_cost_contention_words() {
        use std::os::fd::{AsFd, AsRawFd};
        let cpus = allowed_cpus().unwrap();
        let t = cpus.len().min(4);
        let mut obj = MaybeUninit::uninit();
        let mut bpf = CostBpf::load(&mut obj).unwrap();
        let fd = bpf.skel.progs.contention.as_fd().as_raw_fd();
        for (mode, name) in CONT_MODES.iter().enumerate() {
            bpf.skel.maps.bss_data.as_mut().unwrap().cont_words.fill(0);
            bpf.skel.maps.bss_data.as_mut().unwrap().cont_wake.fill(0);
            let (_, stamps) = contention_run(&mut bpf, fd, mode as u32, &cpus[..t], 4096).unwrap();
            // 256 steps of 16 updates: a stamp each, ascending, per thread on CPUs 0..7
            assert!(stamps
                .iter()
                .all(|v| v.len() == 256 && v.windows(2).all(|w| w[0] <= w[1])));
            let bss = bpf.skel.maps.bss_data.as_ref().unwrap();
            let (w, q) = (&bss.cont_words, &bss.cont_wake);
            let mut want = vec![0u64; w.len()];
            let mut want_q = vec![0u64; q.len()];
            let mode = mode as u32;
            for &c in &cpus[..t] {
                match mode {
                    ti::cont_modes_CONT_SHARED => want[0] += 4096,
                    ti::cont_modes_CONT_PACKED => want[c] += 4096,
                    ti::cont_modes_CONT_LINES | ti::cont_modes_CONT_LOCAL => want[c * 8] += 4096,
                    // 1024 wake-ups: the queue's line (shared, or the CPU's shard's), V, W,
                    // the steal count
                    _ => {
                        let queue = mode == ti::cont_modes_CONT_WAKE_QUEUE;
                        want_q[if queue { 0 } else { (4 + c) * 8 }] += 1024;
                        for l in 1..4 {
                            want_q[l * 8] += 1024;
                        }
                    }
                }
            }
            assert!(w.iter().eq(want.iter()), "mode {name}");
            assert!(q.iter().eq(want_q.iter()), "mode {name}: the wake-up lines");
        }
    }

    /// --contention's proof that the threads ran at once comes from their per-iteration
    /// stamps, not their windows: two threads stamping every 10 ns side by side ran together
    /// (~100 %); the same two time-sliced on one CPU (each 1 ms on, 1 ms off, in turn) have
    /// overlapping windows but ran together ~0 %; one thread preempted half of the time
    /// ran with the other half of it.
    #[test]
    fn contention_together_from_stamps() {
        let steady = |from: u64, n: u64| (0..n).map(|k| from + 10 * k).collect::<Vec<u64>>();
        // 1 ms slices of 100_000 stamps, thread a in even slices, b in odd ones
        let sliced = |odd: u64| {
            (0..10u64)
                .filter(|s| s % 2 == odd)
                .flat_map(|s| (0..100_000u64).map(move |k| s * 1_000_000 + 10 * k))
                .collect::<Vec<u64>>()
        };
        let both = together_pct(&[steady(0, 100_000), steady(5, 100_000)]);
        assert!(both > 99.0, "{both}");
        let shared = together_pct(&[sliced(0), sliced(1)]);
        assert!(shared < 1.0, "{shared}");
        let half = together_pct(&[steady(0, 1_000_000), sliced(0)]);
        assert!((45.0..55.0).contains(&half), "{half}");
        assert_eq!(together_pct(&[steady(0, 1), steady(0, 5)]), 0.0);
    }

    fn row<'a>(rows: &'a [Row], policy: &str, n: u32, busy: u32) -> &'a Row {
        rows.iter()
            .find(|r| r.policy == policy && r.llc_weight == n && r.busy_pct == busy)
            .unwrap_or_else(|| panic!("no row {policy} {n} {busy}"))
    }

    #[test]
    fn placement_cost_examined_per_policy() {
        let sizes = [8, 64, 256];
        let rows = measure(
            &opts(
                &sizes,
                &[0, 90, 100],
                false,
                &["vanilla", "patched", "patched-unbounded"],
            ),
            false,
        )
        .expect("placement-cost");
        for &n in &sizes {
            for p in ["vanilla", "patched", "patched-unbounded"] {
                // all idle: target (or prev) is idle, the fast checks count one, no enqueue
                let r = row(&rows, p, n, 0);
                assert_eq!(r.cpus_examined, 1.0, "{p} {n} 0 %");
                assert_eq!(r.direct_pct, 100.0, "{p} {n} 0 %");
            }
            // nothing idle: the kick search walks nothing (the word test), only the select path
            let r = row(&rows, "patched-unbounded", n, 100);
            assert_eq!(
                r.cpus_examined,
                n as f64 + 1.0,
                "unbounded scans the whole LLC"
            );
            assert_eq!(r.kick_scanned, 0.0);
            // SIS_UTIL: the util sum of a full LLC gives nr_idle_scan 0, no scan at all
            let r = row(&rows, "patched", n, 100);
            assert_eq!(r.nr_idle_scan, 0);
            assert_eq!(r.cpus_examined, 1.0, "patched at full load is O(1)");
            // SIS_PROP: avg_idle 0 gives its minimum depth 4, and !--nr stops after 3 probes
            let r = row(&rows, "vanilla", n, 100);
            assert_eq!(r.cpus_examined, 4.0, "SIS_PROP's minimum depth");
            for p in ["vanilla", "patched", "patched-unbounded"] {
                assert_eq!(row(&rows, p, n, 100).direct_pct, 0.0, "{p} {n} 100 %");
            }
            // 90 %: SIS_UTIL scans nothing (depth 0): the task is queued, and the enqueue does
            // not search (no WAKE_RESCUE in the preset); a busy CPU's tick finds the idle
            // CPUs; the unbounded scan finds one itself
            let r = row(&rows, "patched", n, 90);
            assert_eq!(r.nr_idle_scan, 0);
            assert!(r.direct_pct < 100.0, "{r:?}");
            assert_eq!(
                (r.kick_scanned, r.word_tests, r.rescue_pct),
                (0.0, 0.0, 0.0)
            );
            assert_eq!(r.tick_search_pct, 100.0, "{r:?}");
            assert!(r.tick_kick_scanned >= 1.0, "{r:?}");
            let r = row(&rows, "patched-unbounded", n, 90);
            assert_eq!((r.kick_scanned, r.direct_pct), (0.0, 100.0), "{r:?}");
        }
    }

    /// The tick's kick search at full load on machines of many LLCs: the own LLC's words,
    /// then one pass over the machine's words, and no walk of the other LLCs (without the
    /// machine-wide test: one word per other LLC, 64 at 64x8). The rescue runs the same
    /// search from the enqueue, only with WAKE_RESCUE (and then the tick does not search).
    #[test]
    fn placement_cost_kick_words_multi_llc() {
        let mut o = opts(&[], &[100, 90], false, &["patched", "patched+WAKE_RESCUE"]);
        o.topologies = vec!["64x8".into(), "8x32".into(), "4x128".into()];
        let rows = measure(&o, false).expect("placement-cost");
        for (l, n, words) in [(64, 8, 1.0 + 8.0), (8, 32, 1.0 + 4.0), (4, 128, 2.0 + 8.0)] {
            let find = |p: &str, busy| {
                rows.iter()
                    .find(|r| {
                        r.policy == p && r.llcs == l && r.llc_weight == n && r.busy_pct == busy
                    })
                    .expect("row")
            };
            let r = find("patched", 100);
            assert_eq!(r.tick_word_tests, words, "{l}x{n}: {r:?}");
            assert_eq!(
                (r.tick_kick_scanned, r.tick_search_pct),
                (0.0, 100.0),
                "{r:?}"
            );
            assert_eq!((r.word_tests, r.cpus_examined), (0.0, 1.0), "{r:?}");
            // the rescue: every queued wake-up searches, the same words
            let r = find("patched+WAKE_RESCUE", 100);
            assert_eq!(
                (r.word_tests, r.rescue_pct),
                (words, 100.0),
                "{l}x{n}: {r:?}"
            );
            assert_eq!((r.tick_search_pct, r.tick_word_tests), (0.0, 0.0), "{r:?}");
            // 90 %: idle CPUs everywhere, the search finds one (never more than the LLC's walk)
            let r = find("patched", 90);
            assert!(
                r.tick_kick_scanned >= 1.0 && r.tick_kick_scanned <= n as f64,
                "{r:?}"
            );
            let r = find("patched+WAKE_RESCUE", 90);
            assert!(r.kick_scanned >= 1.0 && r.kick_scanned <= n as f64, "{r:?}");
        }
        assert!(parse_topology("0x8").is_err() && parse_topology("65x2").is_err());
        assert!(parse_topology("2x300").is_err() && parse_topology("8").is_err());
        assert_eq!(parse_topology("64x8").unwrap(), (64, 8));
    }

    #[test]
    fn placement_cost_examined_smt() {
        let rows = measure(
            &opts(&[16, 128], &[100], true, &["patched", "patched-unbounded"]),
            false,
        )
        .expect("placement-cost");
        for n in [16, 128] {
            // no idle core: select_idle_smt() visits prev's two threads first
            assert_eq!(row(&rows, "patched", n, 100).cpus_examined, 3.0);
            assert_eq!(
                row(&rows, "patched-unbounded", n, 100).cpus_examined,
                n as f64 + 3.0
            );
        }
    }

    /// A run longer than one test run is split, and its counts add up: 3 test runs of a
    /// whole-LLC scan still examine exactly n + 1 CPUs per placement.
    #[test]
    fn placement_cost_split_runs_add_up() {
        assert_eq!(chunk_for(512), 32768);
        assert_eq!(chunk_for(2), 1 << 18);
        let mut o = opts(&[512], &[100], false, &["patched-unbounded"]);
        o.runs = 1;
        o.placements = 2 * chunk_for(512) + 100;
        let rows = measure(&o, false).expect("placement-cost");
        let r = row(&rows, "patched-unbounded", 512, 100);
        assert_eq!(r.cpus_examined, 513.0, "{r:?}");
        assert_eq!(r.placements_per_run, o.placements);
    }

    #[test]
    fn placement_cost_policies_parse() {
        assert_eq!(
            parse_policy("vanilla+SIS_UTIL").unwrap().1,
            features::preset(Preset::vanilla()) | features::bit::SIS_UTIL
        );
        // a preset's name means that preset: unbounded is vanilla's path, patched-unbounded
        // patched's, both with no scan depth
        for (name, base) in [
            ("unbounded", Preset::vanilla()),
            ("patched-unbounded", Preset::patched()),
        ] {
            let (_, u) = parse_policy(name).unwrap();
            let depth = features::bit::SIS_UTIL | features::bit::SIS_PROP;
            assert_eq!(u, features::preset(base) & !depth, "{name}");
            assert_eq!(parse_policy(&name.to_uppercase()).unwrap().1, u);
        }
        for bad in ["", "fast", "vanilla+", "vanilla+NOPE", "patched++SIS_UTIL"] {
            assert!(parse_policy(bad).is_err(), "{bad:?} accepted");
        }
        // one policy per feature patched turns on, plus the three
        let d = default_policies();
        assert_eq!(
            d.len(),
            3 + (features::preset(Preset::patched()) & !features::preset(Preset::vanilla()))
                .count_ones() as usize
        );
    }
}
