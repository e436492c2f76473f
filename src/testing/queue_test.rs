// SPDX-License-Identifier: GPL-2.0-only
//! Host BPF tests of the queue's callbacks' decisions (src/bpf/queue.bpf.h) and of the kick
//! they run (src/bpf/kick.bpf.h's kick_for_work()), through the seam's synthetic machine
//! (src/bpf/tools/synth.bpf.h) in the host test object (src/bpf/testing/sis_test.bpf.c):
//! the tick's choice of the shard whose head is kicked for, and dispatch's order. Hand-worked
//! cases on decide_test's 2x4 SMT machine; each test is broken by the one-line mutants of
//! tools/mutants named in its comment. Needs root (bpf()).

use std::mem::MaybeUninit;

use crate::bpf_intf as bi;
use crate::sched::bpf_maps::run_with_ctx;
use crate::sched::features::bit;
use crate::testing::decide_test::{io, machine, run, words, Rig};

const KICK: usize = bi::sis_stat_STAT_KICK as usize;
const KICK_SCANNED: usize = bi::sis_stat_STAT_KICK_SCANNED as usize;
const HIT_KICK_SKIP_REDUNDANT: usize = bi::sis_stat_STAT_HIT_KICK_SKIP_REDUNDANT as usize;
const MAX_LLCS: usize = bi::sis_consts_MAX_LLCS as usize;
const MAX_LLC_SHARDS: usize = bi::sis_consts_MAX_LLC_SHARDS as usize;

/// shard_dsq(): LLC `llc`'s shard `s`'s DSQ id
fn shard_dsq(llc: usize, s: usize) -> usize {
    if s == 0 {
        llc
    } else {
        MAX_LLCS + llc * MAX_LLC_SHARDS + s
    }
}

struct Tick {
    shard: i32,
    kicked: u32,
    kicked_mask: u64,
    kick_pending: u64,
    scanned: u64,
    kicks: u64,
    skipped: u64,
}

/// test_tick on LLC 0 from CPU 0: the tick's shard, then kick_for_work() when it kicks.
fn tick(skel: &mut Rig<'_>, feat: u64) -> Tick {
    let d = io(skel);
    d.feat = feat;
    d.llc = 0;
    d.this_cpu = 0;
    d.out_cpu = -99;
    run!(skel, test_tick);
    let (bss, d) = (skel.maps.bss_data.as_ref().unwrap(), &skel.io);
    Tick {
        shard: d.out_cpu,
        kicked: d.out,
        kicked_mask: bss.synth_kicked[0],
        kick_pending: bss.kick_pending[0],
        scanned: d.cnt[KICK_SCANNED],
        kicks: d.cnt[KICK],
        skipped: d.cnt[HIT_KICK_SKIP_REDUNDANT],
    }
}

/// ops.tick's kick (nohz_balancer_kick() -> kick_ilb()): LLC 0 of 4 CPUs in 2 shards of 2
/// (shard_cpus 2), a task waiting in shard 1 only, CPU 2 idle. Once LLC_SHARDS has used a
/// shard other than 0 the tick finds that task and kick_for_work() kicks CPU 2 (its bit
/// in the flag word, the IPI, counted in LLC 0: 3 CPUs scanned from CPU 0); the second tick
/// finds CPU 2 asked already (KICK_SKIP_REDUNDANT: skipped and counted). Before any other
/// shard was used, and with WAKE_RESCUE (the enqueue kicked), the tick kicks nobody.
/// Kills "the tick's kick scans shard 0 only under LLC_SHARDS" (tools/mutants).
#[test]
fn queue_tick_kicks_for_any_live_shard() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    skel.maps.data_data.as_mut().unwrap().shard_cpus = 2;
    {
        let bss = skel.maps.bss_data.as_mut().unwrap();
        bss.synth_dsq_nr.fill(0);
        bss.synth_dsq_nr[shard_dsq(0, 1)] = 1;
        bss.synth_idle = words(&[2]);
        bss.kick_pending.fill(0);
        bss.llc_shards_used = 0;
    }
    let t = tick(&mut skel, bit::LLC_SHARDS);
    assert_eq!(
        (t.shard, t.kicked, t.kicked_mask),
        (-1, 0, 0),
        "shard 1 not live yet"
    );

    skel.maps.bss_data.as_mut().unwrap().llc_shards_used = 1;
    let t = tick(&mut skel, bit::LLC_SHARDS | bit::WAKE_RESCUE);
    assert_eq!(
        (t.shard, t.kicked, t.kicked_mask),
        (-1, 0, 0),
        "WAKE_RESCUE: no tick kick"
    );

    let t = tick(&mut skel, bit::LLC_SHARDS | bit::KICK_SKIP_REDUNDANT);
    assert_eq!(t.shard, 1, "the first shard holding a task");
    assert_eq!(
        (t.kicked, t.kicked_mask, t.kick_pending),
        (1, 1 << 2, 1 << 2)
    );
    assert_eq!((t.scanned, t.kicks, t.skipped), (3, 1, 0));

    let t = tick(&mut skel, bit::LLC_SHARDS | bit::KICK_SKIP_REDUNDANT);
    assert_eq!(
        (t.shard, t.kicked, t.kicked_mask),
        (1, 0, 0),
        "CPU 2 asked already"
    );
    assert_eq!((t.kicks, t.skipped, t.kick_pending), (0, 1, 1 << 2));
}

/// One test_dispatch on CPU 1 (LLC 0): the step, the DSQ moves tried.
fn dispatch(skel: &mut Rig<'_>, feat: u64, prev_queued: bool) -> (u32, u32) {
    let d = io(skel);
    d.feat = feat;
    d.cpu = 1;
    d.flag = prev_queued as u32;
    d.out = 99;
    run!(skel, test_dispatch);
    let d = io(skel);
    (d.out, d.probed)
}

/// ops.dispatch's order (pick_next_task_fair(): own runqueue, prev, then the newidle
/// balance): the LLC's queue before prev, prev before NEWIDLE_SKIP_IPI's stop and before
/// the steal, the stop before the steal; this CPU's kick bit taken on the way (only its
/// own). Kills the dispatch-order mutants of tools/mutants (prev served before the LLC's
/// queue; NEWIDLE_SKIP_IPI's stop before prev).
#[test]
fn queue_dispatch_order() {
    const NONE: u32 = bi::dispatch_step_DISPATCH_NONE;
    const LLC: u32 = bi::dispatch_step_DISPATCH_LLC;
    const PREV: u32 = bi::dispatch_step_DISPATCH_PREV;
    const SKIP_IDLE: u32 = bi::dispatch_step_DISPATCH_SKIP_IDLE;
    const STEAL: u32 = bi::dispatch_step_DISPATCH_STEAL;
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    // `own`: tasks in LLC 0's queue, `other`: in LLC 1's; CPU 1 idle (idle_start set) or
    // not, kicked (its bit in the flag word, beside CPU 5's) or not
    let set = |skel: &mut Rig<'_>, own: u32, other: u32, idle: bool, kicked: bool| {
        let bss = skel.maps.bss_data.as_mut().unwrap();
        bss.llc_shards_used = 0;
        bss.steal_uncounted = 0;
        bss.synth_dsq_nr.fill(0);
        bss.synth_dsq_nr[0] = own;
        bss.synth_dsq_nr[1] = other;
        bss.llc_queued[0].n = own as u64;
        bss.llc_queued[1].n = other as u64;
        bss.cpu_ctxs[1].idle_start = idle as u64;
        bss.kick_pending.fill(0);
        bss.kick_pending[0] = 1 << 5 | (kicked as u64) << 1;
    };
    // (own, other, idle, kicked, feat, prev queued) -> (step, moves tried)
    type Case = ((u32, u32, bool, bool, u64, bool), (u32, u32));
    let cases: [Case; 8] = [
        ((1, 1, false, false, 0, true), (LLC, 1)),
        ((1, 1, true, false, bit::NEWIDLE_SKIP_IPI, true), (LLC, 1)),
        ((0, 1, false, false, 0, true), (PREV, 1)),
        ((0, 1, true, false, bit::NEWIDLE_SKIP_IPI, true), (PREV, 1)),
        (
            (0, 1, true, false, bit::NEWIDLE_SKIP_IPI, false),
            (SKIP_IDLE, 1),
        ),
        ((0, 1, true, true, bit::NEWIDLE_SKIP_IPI, false), (STEAL, 2)),
        ((0, 1, true, false, 0, false), (STEAL, 2)),
        ((0, 0, false, false, 0, false), (NONE, 1)),
    ];
    for ((own, other, idle, kicked, feat, prev), want) in cases {
        set(&mut skel, own, other, idle, kicked);
        let got = dispatch(&mut skel, feat, prev);
        let bss = skel.maps.bss_data.as_ref().unwrap();
        let case = format!(
            "own {own} other {other} idle {idle} kicked {kicked} feat {feat:#x} prev {prev}"
        );
        assert_eq!(got, want, "{case}");
        assert_eq!(
            bss.kick_pending[0],
            1 << 5,
            "{case}: only CPU 1's kick bit taken"
        );
        let taken = match want.0 {
            LLC => (own - 1, other),
            STEAL => (own, other - 1),
            _ => (own, other),
        };
        assert_eq!((bss.synth_dsq_nr[0], bss.synth_dsq_nr[1]), taken, "{case}");
    }
}
