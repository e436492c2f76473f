// SPDX-License-Identifier: GPL-2.0-only
//! Host BPF test of the depth calibration (src/bpf/calib.bpf.h) through the production wake
//! path: sis_test.bpf.c runs select_task_rq_fair() with the calibration hook of
//! select_idle_cpu(), on random states, and each wake-up's record (bucket, allowed depth,
//! distance histogram, found / missed / wasted) must equal a reference computed here by
//! walking the scan order CPU by CPU; where the scan found an idle CPU it must be the one at
//! that distance. A full scan (no SIS_UTIL, no SIS_PROP) must never miss. Needs root (bpf()).

use std::mem::MaybeUninit;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::bpf_intf as bi;
use crate::sched::bpf_maps::{run_once, run_with_ctx};
use crate::sched::features::bit;
use crate::sched::sis_fit::{Rec, BUCKETS};
use crate::sched::topology::{copy_same_c_type, TopoDesc};
use crate::testing::sis_test::skel::{types, SisTestSkel};
use crate::testing::sis_test::{load_skel as load, MAX_CPUS, WORDS};

const EXACT: usize = bi::calib_consts_CALIB_EXACT as usize;
const HIST: usize = bi::calib_consts_CALIB_HIST as usize;

fn read_recs(skel: &SisTestSkel<'_>, n: usize) -> Vec<Rec> {
    (0..n as u32)
        .map(|k| {
            let mut r = Rec::default();
            let recs = crate::sched::bpf_maps::lookup_percpu_as::<Rec, _>(
                &skel.maps.calib_recs,
                k,
                "calib_recs",
            );
            for v in recs.expect("one calib_rec per CPU") {
                r.add(&v);
            }
            r
        })
        .collect()
}

fn bin(d: usize) -> usize {
    if d < EXACT {
        d
    } else {
        (EXACT + (usize::BITS - 1 - (d / EXACT).leading_zeros()) as usize).min(HIST - 1)
    }
}

fn words(cpus: &[usize]) -> [u64; WORDS] {
    let mut w = [0u64; WORDS];
    for &c in cpus {
        w[c / 64] |= 1 << (c % 64);
    }
    w
}

/// One wake-up: (features, depth the policy allows before the cap, util bucket).
struct Case {
    features: u64,
    nr_idle_scan: u64,
    depth: u64,
}

/// Run `n` random wake-ups per feature set on `desc`; returns (states, full-scan misses).
fn run_topology(skel: &mut SisTestSkel<'_>, desc: &TopoDesc, seed: u64, n: usize) -> (usize, u64) {
    let llcs = desc.llcs();
    let topo = desc.build().expect("topology");
    let nr_cpu_ids = desc.nr_cpu_ids();
    {
        let bss = skel.maps.bss_data.as_mut().unwrap();
        unsafe { copy_same_c_type(&*topo, &mut bss.topo) };
        bss.calib_span = [[0; WORDS]; bi::sis_consts_MAX_LLCS as usize];
        for (l, cpus) in llcs.iter().enumerate() {
            bss.calib_span[l] = words(cpus);
            bss.llc_ctxs[l].weight = cpus.len() as u64;
            bss.llc_ctxs[l].has_idle_cores = 0;
        }
        bss.calib_on = 1;
    }
    let nrec = llcs.len() * BUCKETS;
    let before = read_recs(skel, nrec);
    let mut want = before.clone();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut full_misses = 0;
    let mut states = 0;
    for i in 0..n {
        let l = rng.gen_range(0..llcs.len());
        let span = &llcs[l];
        let weight = span.len() as u64;
        let target = span[rng.gen_range(0..span.len())];
        let density = [0.0, 0.05, 0.3, 0.9][rng.gen_range(0..4)];
        let idle: Vec<usize> = (0..nr_cpu_ids)
            .filter(|&c| c != target && rng.gen_bool(density))
            .collect();
        let allowed: Vec<usize> = match rng.gen_range(0..3) {
            0 => (0..MAX_CPUS).collect(),
            1 => (0..nr_cpu_ids).filter(|_| rng.gen_bool(0.7)).collect(),
            _ => (0..nr_cpu_ids).filter(|_| rng.gen_bool(0.15)).collect(),
        };
        let util_sum = rng.gen_range(0..=weight * 1024);
        let case = match i % 3 {
            0 => Case {
                features: 0,
                nr_idle_scan: 0,
                depth: u64::MAX,
            },
            1 => {
                let nr = rng.gen_range(0..=weight);
                Case {
                    features: bit::SIS_UTIL,
                    nr_idle_scan: nr,
                    depth: nr,
                }
            }
            // wake_avg_idle 0: SIS_PROP's minimum, nr = 4, three CPUs probed
            _ => Case {
                features: bit::SIS_PROP,
                nr_idle_scan: 0,
                depth: 3,
            },
        };
        {
            let bss = skel.maps.bss_data.as_mut().unwrap();
            bss.llc_ctxs[l].util_sum = util_sum;
            bss.llc_ctxs[l].nr_idle_scan = case.nr_idle_scan;
            let c = &mut bss.cpu_ctxs[target];
            c.wake_avg_idle = 0;
            c.wake_stamp = 100;
            c.avg_scan_cost = 0;
            c.util = 0;
        }
        let mut args = types::sis_test_args {
            features: case.features,
            prev: target as i32,
            this_cpu: target as i32,
            recent: -1,
            wakee_id: 1,
            waker_last_wakee: 1,
            hz: 250,
            jiffies: 100,
            imbalance_pct: 117,
            idle: words(&idle),
            allowed: words(&allowed),
            cpu: -2,
            ..Default::default()
        };
        // SAFETY: tool_intf.h's struct sis_test_args, plain integers
        let ret = unsafe { run_with_ctx(&skel.progs.sis_test, &mut args) }.unwrap();
        assert_eq!(ret, 0);
        run_once(&skel.progs.calib_test_flush).unwrap();

        // the reference: for_each_cpu_wrap(cpu, span & allowed, target + 1), CPU by CPU
        let pos = span.iter().position(|&c| c == target).unwrap();
        let order: Vec<usize> = (1..=span.len())
            .map(|k| span[(pos + k) % span.len()])
            .filter(|c| allowed.contains(c))
            .collect();
        let dist = order.iter().position(|c| idle.contains(c)).map(|p| p + 1);
        let allowed_depth = case.depth.min(order.len() as u64);
        let b = ((util_sum * 10 / (weight * 1024)) as usize).min(BUCKETS - 1);
        let r = &mut want[l * BUCKETS + b];
        r.wakeups += 1;
        r.depth_sum += allowed_depth;
        if case.depth == 0 {
            r.skipped += 1;
        }
        let ctx = format!(
            "seed {seed} state {i}: llc {l} target {target} features {:#x} depth {} dist {dist:?} \
             order {order:?} idle {idle:?}",
            case.features, case.depth
        );
        match dist {
            Some(d) => {
                r.hist[bin(d)] += 1;
                if d as u64 <= allowed_depth {
                    r.found += 1;
                    // the scan found the idle CPU at that distance
                    assert_eq!(args.cpu as usize, order[d - 1], "{ctx}");
                } else {
                    r.missed += 1;
                    if case.features == 0 {
                        full_misses += 1;
                    }
                    assert_eq!(args.cpu as usize, target, "{ctx}");
                }
            }
            None => {
                r.no_idle += 1;
                r.wasted += allowed_depth;
                assert_eq!(args.cpu as usize, target, "{ctx}");
            }
        }
        // record by record: the first wrong wake-up names itself
        let got = read_recs(skel, nrec);
        assert_eq!(got, want, "{ctx}");
        states += 1;
    }

    // recording off: the same wake-ups leave the records alone
    skel.maps.bss_data.as_mut().unwrap().calib_on = 0;
    let mut args = types::sis_test_args {
        prev: llcs[0][0] as i32,
        this_cpu: llcs[0][0] as i32,
        recent: -1,
        hz: 250,
        imbalance_pct: 117,
        idle: words(&llcs[0][1..]),
        allowed: words(&(0..MAX_CPUS).collect::<Vec<_>>()),
        ..Default::default()
    };
    // SAFETY: tool_intf.h's struct sis_test_args, plain integers
    unsafe { run_with_ctx(&skel.progs.sis_test, &mut args) }.unwrap();
    run_once(&skel.progs.calib_test_flush).unwrap();
    assert_eq!(read_recs(skel, nrec), want, "recorded with calib_on = 0");
    (states, full_misses)
}

#[test]
fn calib_records_match_the_scan() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = load(&mut obj);
    let mut total = 0;
    for (i, desc) in [
        TopoDesc::synthetic(1, 8, 1, 1),
        TopoDesc::synthetic(2, 4, 2, 1),
        TopoDesc::synthetic(1, 100, 1, 1), // distances in the octave bins, two words
        TopoDesc::synthetic(3, 70, 1, 1),  // LLCs straddling words
    ]
    .iter()
    .enumerate()
    {
        let (n, full_misses) = run_topology(&mut skel, desc, 0x5151_ca11 + i as u64, 900);
        assert_eq!(full_misses, 0, "a full scan missed an idle CPU");
        total += n;
    }
    assert!(total >= 3600);
    // the octave bins and the wrap were exercised
    let recs = read_recs(&skel, 3 * BUCKETS);
    assert!(recs.iter().any(|r| r.hist[EXACT..].iter().any(|&n| n > 0)));
    assert!(recs.iter().map(|r| r.missed).sum::<u64>() > 0);
    assert!(recs.iter().map(|r| r.wasted).sum::<u64>() > 0);
}
