// SPDX-License-Identifier: GPL-2.0-only
//! Host BPF tests of the decisions outside select_task_rq_fair(), run through the
//! production code (src/bpf/sis.bpf.h with __update_idle_core, idle.bpf.h, queue.bpf.h,
//! shards.bpf.h, kick.bpf.h) in the host test object (src/bpf/testing/sis_test.bpf.c: one program per
//! decision, on the synthetic machine of its .bss) - the real verifier and
//! BPF_PROG_TEST_RUN, as sis_test.rs runs the wake path. Hand-worked cases: each expected
//! value is the kernel code's answer on that state, and each test is broken by a one-line
//! mutant of its decision (tools/mutants applies them). Needs root (bpf()); no skip
//! without it.

use std::mem::MaybeUninit;

use crate::bpf_intf as bi;
use crate::sched::bpf_maps::run_with_ctx;
use crate::sched::features::bit;
use crate::sched::topology::{copy_same_c_type, CpuDesc, TopoDesc};
use crate::testing::sis_test::{load_skel, skel::SisTestSkel, MAX_CPUS, WORDS};
use crate::testing::test_intf::{dec_io, wait_bucket_io};

const HIT_TTWU_QUEUE_DESCHED: usize = bi::sis_stat_STAT_HIT_TTWU_QUEUE_DESCHED as usize;
const HIT_KICK_SKIP_REDUNDANT: usize = bi::sis_stat_STAT_HIT_KICK_SKIP_REDUNDANT as usize;
/// include/linux/sched.h
const MAX_LLCS: usize = bi::sis_consts_MAX_LLCS as usize;
const PF_EXITING: u32 = 0x4;
const PF_KTHREAD: u32 = 0x0020_0000;

/// Two LLCs of 4 CPUs, SMT pairs: {0,1} {2,3} | {4,5} {6,7}.
fn topo_2x4_smt() -> TopoDesc {
    TopoDesc {
        cpus: (0..8)
            .map(|id| CpuDesc {
                id,
                llc: id / 4,
                core: id & !1,
                node: 0,
            })
            .collect(),
    }
}

pub(crate) fn words(cpus: &[usize]) -> [u64; WORDS] {
    let mut w = [0u64; WORDS];
    for &c in cpus {
        assert!(c < MAX_CPUS);
        w[c / 64] |= 1 << (c % 64);
    }
    w
}

/// The host test object and its decision programs' argument (test_intf.h's struct dec_io,
/// the one idiom of a test's inputs): a test writes `io`, `run!` passes it to a program and
/// reads it back as the program left it. The synthetic machine is the skeleton's .bss,
/// reached through the skeleton (`rig.maps`).
pub(crate) struct Rig<'o> {
    pub skel: SisTestSkel<'o>,
    pub io: dec_io,
}

impl<'o> std::ops::Deref for Rig<'o> {
    type Target = SisTestSkel<'o>;
    fn deref(&self) -> &SisTestSkel<'o> {
        &self.skel
    }
}

impl<'o> std::ops::DerefMut for Rig<'o> {
    fn deref_mut(&mut self) -> &mut SisTestSkel<'o> {
        &mut self.skel
    }
}

/// The loaded object on the 2x4 SMT machine, every CPU busy (not idle, nothing queued), the
/// argument's allowed mask every CPU.
pub(crate) fn machine(obj: &mut MaybeUninit<libbpf_rs::OpenObject>) -> Rig<'_> {
    let mut skel = load_skel(obj);
    let topo = topo_2x4_smt().build().expect("topology");
    let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
    // SAFETY: both are `struct sis_topo` of intf.h
    unsafe { copy_same_c_type(&*topo, &mut bss.topo) };
    bss.synth_idle = [0; WORDS];
    bss.nr_running = [1; MAX_CPUS];
    // SAFETY: test_intf.h's struct dec_io, plain integers: all zeros is a value
    let mut io: dec_io = unsafe { std::mem::zeroed() };
    io.allowed = words(&(0..8).collect::<Vec<_>>());
    Rig { skel, io }
}

/// Replace the machine's topology: CPUs 0..n, one core each, the LLC of each by `llc_of`.
fn set_topo(skel: &mut Rig<'_>, n: usize, llc_of: impl Fn(usize) -> usize) {
    let cpus = (0..n)
        .map(|id| CpuDesc {
            id,
            llc: llc_of(id),
            core: id,
            node: 0,
        })
        .collect();
    let topo = TopoDesc { cpus }.build().expect("topology");
    // SAFETY: both are `struct sis_topo` of intf.h
    unsafe { copy_same_c_type(&*topo, &mut skel.maps.bss_data.as_mut().unwrap().topo) };
}

/// Runs a decision's program of the rig: its argument the rig's `io`, read back after.
macro_rules! run {
    ($rig:expr, $prog:ident) => {{
        // SAFETY: test_intf.h's struct dec_io, plain integers
        let ret = unsafe { run_with_ctx(&$rig.skel.progs.$prog, &mut $rig.io) }
            .expect(concat!("BPF_PROG_TEST_RUN ", stringify!($prog)));
        assert_eq!(ret, 0);
    }};
}
pub(crate) use run;

pub(crate) fn io<'a>(rig: &'a mut Rig<'_>) -> &'a mut dec_io {
    &mut rig.io
}

/// `table`'s `run` for a decision of one answer (sis_test.bpf.c's DEC_OUT): the program
/// run, its `io.out`.
macro_rules! out {
    ($prog:ident) => {
        |s: &mut Rig<'_>| {
            run!(s, $prog);
            io(s).out
        }
    };
}

/// A decision's table of cases, on a fresh `machine()`: for each `(inputs, want)`, dec_io's
/// `out` is set to 99 (a program that writes nothing fails), `set` writes the inputs, `run`
/// runs the decision's program and gives its output, which must be `want`; `what` names the
/// inputs' fields.
fn table<C: std::fmt::Debug + Copy, O: std::fmt::Debug + PartialEq>(
    what: &str,
    cases: &[(C, O)],
    set: impl Fn(&mut Rig<'_>, C),
    run: impl Fn(&mut Rig<'_>) -> O,
) {
    let mut obj = MaybeUninit::uninit();
    let skel = &mut machine(&mut obj);
    for (case, want) in cases {
        io(skel).out = 99;
        set(skel, *case);
        assert_eq!(&run(skel), want, "{what} {case:x?}");
    }
}

/// select_task_rq_fair's `sync = (wake_flags & WF_SYNC) && !(current->flags & PF_EXITING)`.
#[test]
fn decide_wake_sync_ignores_an_exiting_waker() {
    let cases = [
        ((1, 0), 1),
        ((1, PF_KTHREAD), 1),
        ((1, PF_EXITING), 0),
        ((1, PF_EXITING | PF_KTHREAD), 0),
        ((0, 0), 0),
        ((0, PF_EXITING), 0),
    ];
    let set = |skel: &mut Rig<'_>, (wf_sync, flags)| {
        io(skel).flag = wf_sync;
        io(skel).current_flags = flags;
    };
    table(
        "(WF_SYNC, current->flags)",
        &cases,
        set,
        out!(test_wake_sync),
    );
}

/// ttwu_queue_cond() with WF_ON_CPU: another CPU than the waker's, sharing its cache,
/// allowed, and `!cpu_rq(cpu)->nr_running` (the wakee is already dequeued there).
#[test]
fn decide_ttwu_queue_desched_condition() {
    // ((this_cpu, the wakee's cpu, allowed, nr_running there), queued?)
    let cases = [
        ((0, 1, 1, 0), 1), // same LLC, other CPU, nothing running: queued
        ((0, 3, 1, 0), 1),
        ((0, 1, 1, 1), 0), // one task running there: not (the `<= 1` of the old form)
        ((0, 1, 1, 2), 0),
        ((0, 0, 1, 0), 0), // the waker's own CPU
        ((0, 4, 1, 0), 0), // another LLC (the older cross-LLC rule, not this patch)
        ((5, 4, 1, 0), 1),
        ((0, 1, 0, 0), 0), // not in p->cpus_ptr
    ];
    let set = |skel: &mut Rig<'_>, (this, cpu, allowed, nr)| {
        let bss = skel.maps.bss_data.as_mut().unwrap();
        bss.nr_running = [1; MAX_CPUS];
        bss.nr_running[cpu as usize] = nr;
        let d = io(skel);
        (d.this_cpu, d.cpu, d.flag) = (this, cpu, allowed);
    };
    table(
        "(this, cpu, allowed, nr_running)",
        &cases,
        set,
        out!(test_ttwu_cond),
    );
}

/// The condition as sched_waking evaluates it (ttwu_waking_cond(), called by wake.bpf.h's
/// tracepoint; off without the feature): the waking CPU is this CPU, the wakee's CPU the one that must have nothing
/// running. With the two swapped (`ttwu_queue_cond_desched(wakee_cpu, this_cpu, ...)`) a
/// waker on a busy CPU waking a wakee whose CPU is empty is refused, and the reverse
/// accepted.
#[test]
fn decide_ttwu_waking_is_this_cpu_for_the_wakee_cpu() {
    // ((this CPU, its nr_running, the wakee's CPU, its nr_running, allowed), queued?)
    let cases = [
        ((0, 1, 1, 0, 1), 1), // the waker runs (nr 1), the wakee's CPU is empty: queued
        ((0, 0, 1, 1, 1), 0), // the wakee's CPU still runs a task: not
        ((2, 3, 3, 0, 1), 1),
        ((3, 0, 2, 2, 1), 0),
        ((0, 1, 1, 0, 0), 0), // not allowed there
        ((1, 1, 1, 0, 1), 0), // the wakee's CPU is this CPU
        ((0, 1, 5, 0, 1), 0), // another LLC
    ];
    // each case with the feature on, and off (then never queued)
    let cases: Vec<_> = [bit::TTWU_QUEUE_DESCHED, 0]
        .iter()
        .flat_map(|&feat| {
            cases
                .iter()
                .map(move |&((this, this_nr, cpu, cpu_nr, allowed), want)| {
                    let want = if feat == 0 { 0 } else { want };
                    ((feat, this, this_nr, cpu, cpu_nr, allowed), want)
                })
        })
        .collect();
    let set = |skel: &mut Rig<'_>, (feat, this, this_nr, cpu, cpu_nr, allowed)| {
        let bss = skel.maps.bss_data.as_mut().unwrap();
        bss.nr_running = [1; MAX_CPUS];
        bss.nr_running[this as usize] = this_nr;
        bss.nr_running[cpu as usize] = cpu_nr;
        let d = io(skel);
        (d.feat, d.this_cpu, d.cpu, d.flag) = (feat, this, cpu, allowed);
    };
    let what = "(feature word, this, its nr_running, the wakee's cpu, its nr_running, allowed)";
    table(what, &cases, set, out!(test_ttwu_waking));
}

/// ttwu_wake_path() (sis.bpf.h, ops.runnable): an activation on another CPU than the one
/// sched_waking ran on came from that CPU's wake list; a wakee that was on its CPU either
/// went there on the wake list (no select_task_rq()) or made the waker wait for on_cpu.
#[test]
fn decide_wake_path_by_the_activating_cpu() {
    let (list, on_cpu, spun) = (
        bi::wake_path_WAKE_PATH_LIST,
        bi::wake_path_WAKE_PATH_LIST_ON_CPU,
        bi::wake_path_WAKE_PATH_SPUN,
    );
    // ((on_cpu at sched_waking, the waking CPU, the activating CPU), counters)
    let cases = [
        ((0, 2, 2), 0),             // activated by the waker
        ((0, 2, 5), list),          // select_cpu, then ttwu_queue()'s wake list
        ((1, 2, 2), spun),          // waited for on_cpu, then activated by the waker
        ((1, 2, 3), list | on_cpu), // queued on the wakee's CPU, no select_cpu
        ((1, 0, 1), list | on_cpu),
        ((1, 1, 0), list | on_cpu),
        ((0, 7, 0), list),
    ];
    let set = |skel: &mut Rig<'_>, (on_cpu, waking, this)| {
        let d = io(skel);
        (d.flag, d.cpu, d.this_cpu) = (on_cpu, waking, this);
    };
    let what = "(on_cpu, waking cpu, activating cpu)";
    table(what, &cases, set, out!(test_wake_path));
}

/// take_kick() (kick.bpf.h, ops.dispatch's `kicked`): clears this CPU's kick-pending bit
/// and only it, true when it was set. Clearing every other bit instead (`~bit` -> `bit`)
/// leaves this CPU's set for ever (KICK_SKIP_REDUNDANT then skips it) and drops the
/// others' pending kicks.
#[test]
fn decide_take_kick_clears_its_own_bit_only() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let take = |skel: &mut Rig<'_>, pending: &[usize], cpu: i32| {
        skel.maps.bss_data.as_mut().unwrap().kick_pending = words(pending);
        let d = io(skel);
        d.cpu = cpu;
        d.out = 99;
        run!(skel, test_take_kick);
        (
            io(skel).out,
            skel.maps.bss_data.as_ref().unwrap().kick_pending,
        )
    };
    assert_eq!(take(&mut skel, &[1, 3, 70], 3), (1, words(&[1, 70])));
    assert_eq!(take(&mut skel, &[1, 70], 70), (1, words(&[1])));
    // not asked: nothing changes
    assert_eq!(take(&mut skel, &[1, 70], 3), (0, words(&[1, 70])));
    assert_eq!(take(&mut skel, &[], 0), (0, words(&[])));
    // taken once: the second take finds it clear (a CPU kicked once is not kicked for ever)
    assert_eq!(take(&mut skel, &[5], 5), (1, words(&[])));
    assert_eq!(take(&mut skel, &[], 5), (0, words(&[])));
}

/// wake_affine_weight()'s task load (task_load_update(), PELT's decay_load()): a period is
/// 1024 us (ns >> 20), y^32 = 1/2. 32 periods asleep halve the load; 32 periods runnable
/// bring it from 0 to half the weight's 1024; a new task (never slept) keeps its load over a
/// zero-length run. Periods counted in us (ns >> 10) decay everything to 0; in 32 us
/// (ns >> 15) the sleep takes the load to a 32nd.
#[test]
fn decide_task_load_decays_per_1024us() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let period: u64 = 1 << 20;
    let update = |skel: &mut Rig<'_>, avg, runnable_at, quiescent_at, w, now| {
        let bss = skel.maps.bss_data.as_mut().unwrap();
        bss.task_load_io.avg = avg;
        bss.task_load_io.runnable_at = runnable_at;
        bss.task_load_io.quiescent_at = quiescent_at;
        let d = io(skel);
        d.flag = w;
        d.now = now;
        run!(skel, test_task_load);
        let l = &skel.maps.bss_data.as_ref().unwrap().task_load_io;
        (l.avg, l.quiescent_at)
    };
    let t0 = 1_000_000_000u64;
    // asleep 32 periods, runnable 0: 1024 -> 512 (511: y^0 is 0xffffffff / 2^32)
    let (avg, q) = update(&mut skel, 1024, t0 + 32 * period, t0, 100, t0 + 32 * period);
    assert_eq!((avg, q), (511, t0 + 32 * period));
    // asleep 16 periods: 1024 * 2^-1/2 = 724
    let (avg, _) = update(&mut skel, 1024, t0 + 16 * period, t0, 100, t0 + 16 * period);
    assert!((723..=724).contains(&avg), "{avg}");
    // asleep less than a period: unchanged (1023: the table's y^0)
    let (avg, _) = update(&mut skel, 1024, t0 + period - 1, t0, 100, t0 + period - 1);
    assert_eq!(avg, 1023);
    // runnable 32 periods from 0, weight 100 (1024): 1024 - 512 = 513 (the rounding of y^0)
    let (avg, _) = update(&mut skel, 0, t0, t0, 100, t0 + 32 * period);
    assert!((512..=513).contains(&avg), "{avg}");
    // weight 200: twice
    let (avg, _) = update(&mut skel, 0, t0, t0, 200, t0 + 32 * period);
    assert!((1024..=1025).contains(&avg), "{avg}");
    // never slept (quiescent_at 0), no run: the initial load stays (decay of 0 ns)
    let (avg, _) = update(&mut skel, 1024, 0, 0, 100, t0);
    assert_eq!(avg, 1023 + 1024 - 1023);
}

/// select_cpu's side of TTWU_QUEUE_DESCHED: the hand-off from sched_waking is consumed
/// once; prev is taken straight when it can be claimed (the hit), else the wake-up still
/// goes to prev without a search but counts no hit.
#[test]
fn decide_ttwu_queue_desched_hand_off() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let select = |skel: &mut Rig<'_>, feat: u64, desched: u32, idle: &[usize]| {
        skel.maps.bss_data.as_mut().unwrap().synth_idle = words(idle);
        let d = io(skel);
        d.feat = feat;
        d.this_cpu = 0;
        d.cpu = 2;
        d.desched = desched;
        d.out_cpu = -99;
        d.cnt = [u64::MAX; bi::sis_stat_STAT_NR as usize];
        run!(skel, test_ttwu_select);
        let idle_after = skel.maps.bss_data.as_ref().unwrap().synth_idle[0];
        let d = io(skel);
        (
            d.out_cpu,
            d.out as i32,
            d.cnt[HIT_TTWU_QUEUE_DESCHED],
            d.desched,
            idle_after,
        )
    };
    // prev (2) idle: taken, claimed, one hit, the hand-off consumed
    assert_eq!(
        select(&mut skel, bit::TTWU_QUEUE_DESCHED, 1, &[2, 3]),
        (2, 2, 1, 0, 1 << 3)
    );
    // the next select_cpu of this task, with no sched_waking in between: a normal wake-up,
    // nothing claimed (sis_wake_begin(): the last wake-up's claim does not stay in the
    // per-CPU scratch)
    let d = io(&mut skel);
    d.out_cpu = -99;
    d.out = 99;
    run!(skel, test_ttwu_select);
    let d = io(&mut skel);
    assert_eq!((d.out_cpu, d.desched, d.out as i32), (-1, 0, -1));
    // prev cannot be claimed: still prev, no search, but no hit
    assert_eq!(
        select(&mut skel, bit::TTWU_QUEUE_DESCHED, 1, &[3]),
        (2, -1, 0, 0, 1 << 3)
    );
    // sched_waking did not see the condition, or the feature is off: the search runs
    assert_eq!(
        select(&mut skel, bit::TTWU_QUEUE_DESCHED, 0, &[2]),
        (-1, -1, 0, 0, 1 << 2)
    );
    assert_eq!(select(&mut skel, 0, 1, &[2]).0, -1);
}

/// NEWIDLE_SKIP_IPI in ops.dispatch: `prev == rq->idle` (the CPU was idle) and not
/// kicked for work → no pull from other LLCs.
#[test]
fn decide_newidle_skip_ipi() {
    let cases = [
        ((bit::NEWIDLE_SKIP_IPI, 1000, 0), 1),
        ((bit::NEWIDLE_SKIP_IPI, 1000, 1), 0), // asked to take work: it pulls
        ((bit::NEWIDLE_SKIP_IPI, 0, 0), 0),    // was running a task: the balance runs
        ((0, 1000, 0), 0),
    ];
    let set = |skel: &mut Rig<'_>, (feat, idle_start, kicked)| {
        skel.maps.bss_data.as_mut().unwrap().cpu_ctxs[3].idle_start = idle_start;
        let d = io(skel);
        (d.feat, d.cpu, d.flag) = (feat, 3, kicked);
    };
    table(
        "(features, idle_start, kicked)",
        &cases,
        set,
        out!(test_newidle),
    );
}

fn idle_update(skel: &mut Rig<'_>, feat: u64, cpu: i32, idle: bool, now: u64) {
    let d = io(skel);
    d.feat = feat;
    d.cpu = cpu;
    d.flag = idle as u32;
    d.now = now;
    d.jiffies = now / 1000;
    run!(skel, test_idle_update);
}

/// ops.update_idle's accounting: the idle periods sum into idle_ns (the loader's busy time
/// is elapsed - idle_ns), and SIS_PROP's avg_idle gets each period (update_avg, capped at
/// 2 * max_idle_balance_cost), wake_avg_idle = avg_idle / 2, wake_stamp = jiffies.
#[test]
fn decide_update_idle_accounts_idle_time() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    {
        let c = &mut skel.maps.bss_data.as_mut().unwrap().cpu_ctxs[1];
        c.idle_ns = 100;
        c.idle_start = 0;
        c.avg_idle = 8000;
        c.max_idle_balance_cost = 500_000;
    }
    let cc = |skel: &Rig<'_>| {
        let c = &skel.maps.bss_data.as_ref().unwrap().cpu_ctxs[1];
        (
            c.idle_ns,
            c.idle_start,
            c.avg_idle,
            c.wake_avg_idle,
            c.wake_stamp,
        )
    };
    idle_update(&mut skel, 0, 1, true, 10_000);
    assert_eq!(cc(&skel).1, 10_000, "the period opens");
    // a second idle transition does not restart it
    idle_update(&mut skel, 0, 1, true, 12_000);
    assert_eq!(cc(&skel).1, 10_000);
    idle_update(&mut skel, 0, 1, false, 50_000);
    // 40 us idle; avg_idle 8000 + (40000 - 8000) / 8 = 12000
    assert_eq!(cc(&skel), (40_100, 0, 12_000, 6_000, 50));
    // leaving idle again with no period open: nothing
    idle_update(&mut skel, 0, 1, false, 70_000);
    assert_eq!(cc(&skel), (40_100, 0, 12_000, 6_000, 50));
    // a second period adds to the first
    idle_update(&mut skel, 0, 1, true, 100_000);
    idle_update(&mut skel, 0, 1, false, 103_000);
    assert_eq!(cc(&skel).0, 43_100);
    // avg_idle is capped at 2 * max_idle_balance_cost
    idle_update(&mut skel, 0, 1, true, 1_000_000);
    idle_update(&mut skel, 0, 1, false, 1_000_000_000);
    assert_eq!(cc(&skel).2, 1_000_000);
}

/// SIS_PROP's state before a CPU's first idle period, as v6.6's sched_init() sets it
/// (kernel/sched/core.c): `rq->avg_idle = 2*sysctl_sched_migration_cost`,
/// `rq->max_idle_balance_cost = sysctl_sched_migration_cost`, `rq->wake_stamp = jiffies`,
/// `rq->wake_avg_idle = rq->avg_idle`, with fair.c's sysctl_sched_migration_cost = 500000UL;
/// then the first idle period moves avg_idle from there (update_avg(): 1/8 of the difference).
/// ops.init writes it for every CPU (cpu_ctx_init(), ctx.bpf.h).
#[test]
fn decide_sis_prop_starts_as_sched_init() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let cc = |skel: &Rig<'_>| {
        let c = &skel.maps.bss_data.as_ref().unwrap().cpu_ctxs[2];
        (
            [c.max_idle_balance_cost, c.avg_idle, c.wake_avg_idle],
            c.wake_stamp,
        )
    };
    {
        let c = &mut skel.maps.bss_data.as_mut().unwrap().cpu_ctxs[2];
        [
            c.max_idle_balance_cost,
            c.avg_idle,
            c.wake_avg_idle,
            c.wake_stamp,
        ] = [7; 4];
    }
    (io(&mut skel).cpu, io(&mut skel).jiffies) = (2, 4242);
    run!(skel, test_prop_init);
    assert_eq!(cc(&skel), ([500_000, 1_000_000, 1_000_000], 4242));
    // 40 us idle: 1_000_000 + (40_000 - 1_000_000) / 8 = 880_000; wake_avg_idle half of it
    idle_update(&mut skel, 0, 2, true, 10_000);
    idle_update(&mut skel, 0, 2, false, 50_000);
    assert_eq!(cc(&skel), ([500_000, 880_000, 440_000], 50));
}

/// The LLC clock V (vt_advance(), vtime.bpf.h): a run of delta ns on the LLC advances V by
/// delta * 100 * VT_SCALE (256) / W, and a rate window of at least VT_RATE_NS (50 ms)
/// closes with the wait guard set to V's advance over VT_GUARD_NS (200 ms) at that
/// window's rate. Two nice-0 tasks (W 200), one running 50 ms: V += 6.4e9 in the window,
/// 25.6e9 per 200 ms. The code's integer form (the window in us, + 1, the quotient
/// truncated) may lose 0.01 % of it; the window counted in units of 1.001 us (`/ 1001`, a
/// generated mutant that survived, issue 35) gains 0.1 %.
#[test]
fn decide_vt_clock_rate_sets_the_guard() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let t0 = 1_000_000_000;
    {
        let l = &mut skel.maps.bss_data.as_mut().unwrap().llc_vtimes[1];
        (l.vclock, l.load, l.rate_t, l.rate_v, l.guard) = (0, 200, t0, 0, 0);
    }
    let lv = |skel: &Rig<'_>| {
        let l = &skel.maps.bss_data.as_ref().unwrap().llc_vtimes[1];
        (l.vclock, l.rate_t, l.rate_v, l.guard)
    };
    let advance = |skel: &mut Rig<'_>, delta: u64, now: u64| {
        let d = io(skel);
        (d.llc, d.flag, d.delta, d.now) = (1, 100, delta, now);
        run!(skel, test_vt_advance);
    };
    // 10 ms into the window: V moves by 1.28e9, the window stays open
    advance(&mut skel, 10_000_000, t0 + 10_000_000);
    assert_eq!(lv(&skel), (1_280_000_000, t0, 0, 0));
    // 40 ms more, at t0 + 50 ms: the window closes at V = 6.4e9
    advance(&mut skel, 40_000_000, t0 + 50_000_000);
    let (v, rate_t, rate_v, guard) = lv(&skel);
    assert_eq!(
        (v, rate_t, rate_v),
        (6_400_000_000, t0 + 50_000_000, 6_400_000_000)
    );
    let exact = 25_600_000_000u64;
    assert!(
        guard.abs_diff(exact) <= exact / 10_000,
        "guard {guard}: V's advance over 200 ms at the window's rate is {exact}"
    );
}

/// __update_idle_core(), from ops.update_idle: a CPU going idle sets its LLC's
/// has_idle_cores only when every other thread of its core is idle.
#[test]
fn decide_update_idle_core() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let hic = |skel: &Rig<'_>| {
        let b = skel.maps.bss_data.as_ref().unwrap();
        (b.llc_ctxs[0].has_idle_cores, b.llc_ctxs[1].has_idle_cores)
    };
    {
        let b = skel.maps.bss_data.as_mut().unwrap();
        for c in b.cpu_ctxs.iter_mut().take(8) {
            c.idle_start = 0;
        }
        b.llc_ctxs[0].has_idle_cores = 0;
        b.llc_ctxs[1].has_idle_cores = 0;
    }
    // CPU 1 goes idle, its sibling 0 is busy: no idle core
    idle_update(&mut skel, bit::SIS_CORE, 1, true, 1000);
    assert_eq!(hic(&skel), (0, 0));
    // CPU 2 idle, sibling 3 busy: still none
    idle_update(&mut skel, bit::SIS_CORE, 2, true, 1000);
    assert_eq!(hic(&skel), (0, 0));
    // without SIS_CORE the hint is not kept
    idle_update(&mut skel, 0, 0, true, 2000);
    assert_eq!(hic(&skel), (0, 0));
    idle_update(&mut skel, 0, 0, false, 3000);
    // CPU 0 idle with its sibling 1 idle: core {0,1} is idle, LLC 0 only
    idle_update(&mut skel, bit::SIS_CORE, 0, true, 4000);
    assert_eq!(hic(&skel), (1, 0));
}

struct Kick {
    cpu: i32,
    probed: u32,
    first: u32,
}

fn kick(skel: &mut Rig<'_>, feat: u64, llc: i32, this: i32, idle: &[usize]) -> Kick {
    skel.maps.bss_data.as_mut().unwrap().synth_idle = words(idle);
    let d = io(skel);
    d.feat = feat;
    d.llc = llc;
    d.this_cpu = this;
    d.flag = 0;
    let (cpu, probed, first) = walk(skel, |s| run!(s, test_kick));
    Kick { cpu, probed, first }
}

/// A walk's outputs after `run` (dec_io's out_cpu set to -99 first): the CPU or LLC found
/// (out_cpu), the places probed and the first one.
fn walk(skel: &mut Rig<'_>, run: impl Fn(&mut Rig<'_>)) -> (i32, u32, u32) {
    io(skel).out_cpu = -99;
    run(skel);
    let d = io(skel);
    (d.out_cpu, d.probed, d.first)
}

/// The enqueue's search for an idle CPU to kick (find_new_ilb()'s walk): the task's LLC
/// from its first CPU, then the other LLCs; KICK_WRAP_NEXT starts the walk of this_cpu's
/// LLC at this_cpu + 1 and wraps.
#[test]
fn decide_kick_search() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    // from the LLC's first CPU: 0 busy, 1 idle
    let k = kick(&mut skel, 0, 0, 1, &[1, 3]);
    assert_eq!((k.cpu, k.probed, k.first), (1, 2, 0));
    // KICK_WRAP_NEXT: from this_cpu + 1 (this_cpu 1 is idle itself, in an interrupt)
    let k = kick(&mut skel, bit::KICK_WRAP_NEXT, 0, 1, &[1, 3]);
    assert_eq!((k.cpu, k.probed, k.first), (3, 2, 2));
    // ... wrapping past the LLC's end
    let k = kick(&mut skel, bit::KICK_WRAP_NEXT, 0, 2, &[0]);
    assert_eq!((k.cpu, k.probed, k.first), (0, 2, 3));
    // this_cpu in another LLC: from the first CPU
    let k = kick(&mut skel, bit::KICK_WRAP_NEXT, 0, 5, &[1, 3]);
    assert_eq!((k.cpu, k.probed, k.first), (1, 2, 0));
    // nothing idle in the LLC (no walk), the next LLC's first idle allowed CPU
    let k = kick(&mut skel, 0, 0, 1, &[6, 7]);
    assert_eq!((k.cpu, k.probed), (6, 3));
    io(&mut skel).allowed = words(&[0, 1, 2, 3, 4, 5, 7]);
    let k = kick(&mut skel, 0, 0, 1, &[6, 7]);
    assert_eq!((k.cpu, k.probed), (7, 4));
    // only a disallowed CPU idle: none, and no CPU walked
    let k = kick(&mut skel, 0, 0, 1, &[6]);
    assert_eq!((k.cpu, k.probed), (-1, 0));
    io(&mut skel).allowed = words(&(0..8).collect::<Vec<_>>());
    let k = kick(&mut skel, bit::KICK_WRAP_NEXT, 1, 1, &[]);
    assert_eq!((k.cpu, k.probed), (-1, 0));
}

/// KICK_SKIP_REDUNDANT, kick_ilb()'s `if ((atomic_read(nohz_flags(ilb_cpu)) & flags) ==
/// flags) return;`: skipped (and counted) only with the feature on and the CPU already
/// asked.
#[test]
fn decide_kick_skip_redundant() {
    // ((features, asked), (skipped, counted))
    let cases = [
        ((bit::KICK_SKIP_REDUNDANT, 1), (1, 1)),
        ((bit::KICK_SKIP_REDUNDANT, 0), (0, 0)),
        ((bit::KICK_SKIP_REDUNDANT | bit::KICK_WRAP_NEXT, 1), (1, 1)),
        ((0, 1), (0, 0)),
        ((bit::KICK_WRAP_NEXT, 1), (0, 0)),
        ((0, 0), (0, 0)),
    ];
    let set = |skel: &mut Rig<'_>, (feat, asked)| {
        skel.maps.bss_data.as_mut().unwrap().synth_idle = words(&[2]);
        let d = io(skel);
        (d.feat, d.llc, d.this_cpu, d.flag) = (feat, 0, 0, asked);
    };
    table("(features, asked)", &cases, set, |s| {
        run!(s, test_kick);
        (io(s).out, io(s).cnt[HIT_KICK_SKIP_REDUNDANT])
    });
}

/// find_new_ilb()'s walk with no early-out: the task's LLC, then the others in steal order,
/// each CPU in turn from kick_search_first(); the first idle allowed CPU. `probed` counts
/// the CPUs of the LLCs that hold an idle allowed CPU (an LLC with none is not walked).
fn kick_full_walk(t: &bi::sis_topo, feat: u64, llc: usize, this: usize, ok: &[bool]) -> (i32, u32) {
    let nr_llcs = t.nr_llcs as usize;
    let order = std::iter::once(llc).chain((0..nr_llcs - 1).map(|k| t.llc_steal[llc][k] as usize));
    let mut probed = 0;
    for l in order {
        let (start, nr) = (t.llc_start[l] as usize, t.llc_nr[l] as usize);
        let cpus = &t.llc_cpus[start..start + nr];
        if !cpus.iter().any(|&c| ok[c as usize]) {
            continue;
        }
        let first = if feat & bit::KICK_WRAP_NEXT != 0 && t.cpu_llc[this] == l as i16 {
            t.cpu_llc_pos[this] as usize + 1
        } else {
            0
        };
        for i in 0..nr {
            let c = cpus[(first + i) % nr] as usize;
            probed += 1;
            if ok[c] {
                return (c as i32, probed);
            }
        }
    }
    (-1, probed)
}

/// The kick search's early-outs (an LLC's word test over the words it spans, the machine
/// test before the other LLCs) pick the CPU the full walk picks, with its probe count, on
/// random machines: LLCs of CPUs scattered over the id space (spanning several mask words,
/// holes included), random idle and allowed masks from empty to dense, both walk starts.
#[test]
fn decide_kick_search_matches_full_walk() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let mut rng = StdRng::seed_from_u64(26);
    let mut cases = 0;
    for _ in 0..24 {
        let nr_llcs = rng.gen_range(1..=12);
        let nr_ids = rng.gen_range(nr_llcs * 2..=MAX_CPUS);
        // each id: a hole, or a CPU of a random LLC (every LLC gets one CPU first)
        let mut cpus: Vec<CpuDesc> = (0..nr_llcs)
            .map(|l| CpuDesc {
                id: l,
                llc: l,
                core: l,
                node: l % 2,
            })
            .collect();
        for id in nr_llcs..nr_ids {
            if rng.gen_bool(0.15) {
                continue;
            }
            let llc = rng.gen_range(0..nr_llcs);
            cpus.push(CpuDesc {
                id,
                llc,
                core: id,
                node: llc % 2,
            });
        }
        let present: Vec<usize> = cpus.iter().map(|c| c.id).collect();
        let t = TopoDesc { cpus }.build().expect("topology");
        let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
        // SAFETY: both are `struct sis_topo` of intf.h
        unsafe { copy_same_c_type(&*t, &mut bss.topo) };
        for _ in 0..40 {
            let p_idle = [0.0, 0.002, 0.02, 0.2, 0.9][rng.gen_range(0..5)];
            let p_allowed = [1.0, 0.5, 0.05][rng.gen_range(0..3)];
            let idle: Vec<usize> = present
                .iter()
                .copied()
                .filter(|_| rng.gen_bool(p_idle))
                .collect();
            let allowed: Vec<usize> = present
                .iter()
                .copied()
                .filter(|_| rng.gen_bool(p_allowed))
                .collect();
            let mut ok = vec![false; MAX_CPUS];
            for &c in &idle {
                ok[c] = allowed.contains(&c);
            }
            let this = present[rng.gen_range(0..present.len())];
            let llc = rng.gen_range(0..nr_llcs);
            let feat = if rng.gen_bool(0.5) {
                bit::KICK_WRAP_NEXT
            } else {
                0
            };
            io(&mut skel).allowed = words(&allowed);
            let k = kick(&mut skel, feat, llc as i32, this as i32, &idle);
            let want = kick_full_walk(&t, feat, llc, this, &ok);
            assert_eq!(
                (k.cpu, k.probed),
                want,
                "{nr_llcs} LLCs, {nr_ids} ids, llc {llc} this {this} feat {feat:#x} idle {idle:?} allowed {allowed:?}"
            );
            cases += 1;
        }
    }
    assert_eq!(cases, 24 * 40);
}

/// The search's bit arithmetic at the word edges (cpumask_first_and() within a word,
/// for_each_cpu_wrap()'s order from this_cpu + 1): LLC 0 is CPUs 0-191 (three mask words),
/// LLC 1 CPUs 192-255. Each case is the CPU the walk in wrap order finds first, and the CPUs
/// it passes. Mutants: the start word's mask off by one, the wrap's end dropped, the wrap
/// back to the first word only, the lowest set bit not isolated (tools/mutants).
#[test]
fn decide_kick_search_word_edges() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let t = TopoDesc::synthetic(2, 128, 1, 1);
    let mut cpus = t.cpus.clone();
    for c in cpus.iter_mut() {
        c.llc = if c.id < 192 { 0 } else { 1 };
    }
    let t = TopoDesc { cpus }.build().expect("topology");
    {
        let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
        // SAFETY: both are `struct sis_topo` of intf.h
        unsafe { copy_same_c_type(&*t, &mut bss.topo) };
    }
    io(&mut skel).allowed = words(&(0..256).collect::<Vec<_>>());
    let w = bit::KICK_WRAP_NEXT;
    // (features, this_cpu, idle CPUs, the CPU found, CPUs passed)
    for (feat, this, idle, cpu, probed) in [
        // the start on a word's first bit (this_cpu 63: from 64): 64, not 63 behind it
        (w, 63, &[63, 64, 65][..], 64, 1),
        // the start on a word's last bit (from 63): 63 itself, not 62 nor 64
        (w, 62, &[62, 63, 64], 63, 1),
        // the first set bit of a word with several: 130, not 131
        (w, 127, &[131, 130], 130, 3),
        (0, 5, &[131, 130, 191], 130, 131),
        // past the LLC's last word: the wrap from its first word (0-191, this_cpu 150)
        (w, 150, &[70], 70, 41 + 71),
        (w, 150, &[149, 3], 3, 41 + 4),
        // the wrap's end: the start word's CPUs before the start (from 101: 100 is last)
        (w, 100, &[100], 100, 192),
        (w, 100, &[100, 99], 99, 191),
        // this_cpu the LLC's last CPU: from its first
        (w, 191, &[191, 5], 5, 6),
        // this_cpu in the other LLC: LLC 0 from its first CPU
        (w, 200, &[191, 64], 64, 65),
        // nothing idle in LLC 0: LLC 1, from its first CPU
        (w, 10, &[255, 193], 193, 2),
        (w, 10, &[], -1, 0),
    ] {
        let k = kick(&mut skel, feat, 0, this, idle);
        assert_eq!(
            (k.cpu, k.probed),
            (cpu, probed),
            "feat {feat:#x} this_cpu {this} idle {idle:?}"
        );
    }
}

/// The search over an LLC that spans every mask word (CPUs 0-511, words 0-7): the walk
/// from this_cpu + 1 passes the words after the start, then wraps to word 0 and goes on to
/// the word before the start (for_each_cpu_wrap(): every CPU once). With the span's word
/// count one too many (`nw = last - first + 2`, a generated mutant that survived, issue 35)
/// the wrap lands one word early, word 7 is tested twice and the word before the start
/// never.
#[test]
fn decide_kick_search_llc_of_every_word() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    set_topo(&mut skel, MAX_CPUS, |_| 0);
    io(&mut skel).allowed = words(&(0..MAX_CPUS).collect::<Vec<_>>());
    // from 201 (word 3): 201-511 passed (311), then 0-150 (151)
    let k = kick(&mut skel, bit::KICK_WRAP_NEXT, 0, 200, &[150]);
    assert_eq!((k.cpu, k.probed, k.first), (150, 311 + 151, 201));
    // from the LLC's first CPU: no wrap, 0-150
    let k = kick(&mut skel, 0, 0, 200, &[150]);
    assert_eq!((k.cpu, k.probed, k.first), (150, 151, 0));
}

/// The enqueue's kick: the kernel leaves a wakee with no idle CPU found on target (only
/// target is woken); the machine-wide search for an idle CPU to kick is the rescue the
/// kernel lacks, taken only with its feature on and never for a pinned task.
#[test]
fn decide_enqueue_rescue_only_with_its_feature() {
    let others = bit::ALL & !bit::WAKE_RESCUE;
    // ((features, pinned), searches?)
    let cases = [
        ((bit::WAKE_RESCUE, 0), 1),
        ((bit::WAKE_RESCUE | others, 0), 1),
        ((bit::WAKE_RESCUE, 1), 0), // pinned / migration-disabled: its own CPU only
        ((0, 0), 0),                // the kernel: target only
        ((others, 0), 0),
        ((others, 1), 0),
    ];
    let set = |skel: &mut Rig<'_>, (feat, pinned)| {
        (io(skel).feat, io(skel).flag) = (feat, pinned);
    };
    table("(features, pinned)", &cases, set, out!(test_enqueue_rescue));
}

/// nohz_balancer_kick()'s `rq->nr_running >= 2` on a busy CPU's tick: tasks waiting in
/// the LLC queue make the tick ask for an idle CPU; none waiting, no kick; with the rescue
/// on, the enqueue kicked already and the tick does not.
#[test]
fn decide_tick_kicks_when_work_waits() {
    let others = bit::ALL & !bit::WAKE_RESCUE;
    // ((features, tasks queued), kicks?)
    let cases = [
        ((0, 0), 0),
        ((0, 1), 1),
        ((0, 2), 1),
        ((others, 1), 1),
        ((others, 0), 0),
        ((bit::WAKE_RESCUE, 1), 0),
        ((bit::WAKE_RESCUE | others, 5), 0),
    ];
    let set = |skel: &mut Rig<'_>, (feat, queued)| {
        (io(skel).feat, io(skel).flag) = (feat, queued);
    };
    table("(features, queued)", &cases, set, out!(test_tick_kicks));
}

/// A machine of `nr_llcs` LLCs of one or two CPUs each, on two nodes (for the steal order).
fn llcs_topo(nr_llcs: usize, rng: &mut impl rand::Rng) -> Box<bi::sis_topo> {
    let mut cpus = Vec::new();
    for l in 0..nr_llcs {
        for _ in 0..rng.gen_range(1..=2) {
            let id = cpus.len();
            cpus.push(CpuDesc {
                id,
                llc: l,
                core: id,
                node: l % 2,
            });
        }
    }
    TopoDesc { cpus }.build().expect("topology")
}

struct Steal {
    llc: i32,
    tried: u32,
    walked: u32,
}

fn steal(skel: &mut Rig<'_>, llc: usize, dsq: &[u32], queued: &[u64], uncounted: bool) -> Steal {
    let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
    // shard 0 of LLC l is DSQ l; one shard per LLC (llc_shards_used 0), as before shards
    bss.synth_dsq_nr.fill(0);
    bss.synth_dsq_nr[..dsq.len()].copy_from_slice(dsq);
    bss.llc_shards_used = 0;
    for (l, c) in bss.llc_queued.iter_mut().enumerate() {
        c.n = queued.get(l).copied().unwrap_or(0);
    }
    bss.steal_uncounted = uncounted as u32;
    io(skel).llc = llc as i32;
    let (llc, tried, walked) = walk(skel, |s| run!(s, test_steal));
    Steal { llc, tried, walked }
}

/// The steal's summary (steal.bpf.h) picks the LLC the plain walk picks (every other LLC
/// in steal order, the first whose DSQ has a task), on random machines of 1 to 64 LLCs
/// with random queue lengths and a summary that bounds them from above (tasks in flight
/// counted, as between a consume and ops.running): the moves tried are the LLCs counted
/// non-empty up to the hit, and nothing queued anywhere (the summary all zero) walks no
/// LLC. A task queued uncounted makes every steal try every LLC.
#[test]
fn decide_steal_matches_full_walk() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let mut rng = StdRng::seed_from_u64(2626);
    let (mut cases, mut no_walk, mut uncounted_hits) = (0, 0, 0);
    for nr_llcs in (1..=64).step_by(3).chain([2, 63, 64]) {
        let t = llcs_topo(nr_llcs, &mut rng);
        let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
        // SAFETY: both are `struct sis_topo` of intf.h
        unsafe { copy_same_c_type(&*t, &mut bss.topo) };
        for _ in 0..40 {
            let p = [0.0, 0.02, 0.2, 0.9][rng.gen_range(0..4)];
            let dsq: Vec<u32> = (0..nr_llcs)
                .map(|_| {
                    if rng.gen_bool(p) {
                        rng.gen_range(1..4)
                    } else {
                        0
                    }
                })
                .collect();
            let uncounted = rng.gen_bool(0.1);
            // uncounted: tasks queued without their count (half the time: none counted)
            let none_counted = uncounted && rng.gen_bool(0.5);
            let queued: Vec<u64> = dsq
                .iter()
                .map(|&n| {
                    n as u64
                        + if rng.gen_bool(0.1) {
                            rng.gen_range(1..3)
                        } else {
                            0
                        }
                })
                .map(|q| if none_counted { 0 } else { q })
                .collect();
            let llc = rng.gen_range(0..nr_llcs);
            let order: Vec<usize> = (0..nr_llcs.saturating_sub(1))
                .map(|k| t.llc_steal[llc][k] as usize)
                .collect();
            let hit = order.iter().position(|&l| dsq[l] > 0);
            let any = uncounted || queued.iter().any(|&q| q > 0);
            let (want_llc, want_walked) = match hit {
                Some(i) => (order[i] as i32, i as u32 + 1),
                None => (-1, if any { order.len() as u32 } else { 0 }),
            };
            let looked = &order[..want_walked as usize];
            let want_tried = looked
                .iter()
                .filter(|&&l| uncounted || queued[l] > 0)
                .count() as u32;
            let s = steal(&mut skel, llc, &dsq, &queued, uncounted);
            assert_eq!(
                (s.llc, s.tried, s.walked),
                (want_llc, want_tried, want_walked),
                "{nr_llcs} LLCs, llc {llc}, dsq {dsq:?}, queued {queued:?}, uncounted {uncounted}"
            );
            if let Some(i) = hit {
                let left = skel.maps.bss_data.as_ref().unwrap().synth_dsq_nr[order[i]];
                assert_eq!(left, dsq[order[i]] - 1, "one task moved");
            }
            no_walk += (nr_llcs > 1 && !any) as u32;
            uncounted_hits += (uncounted && hit.is_some() && queued.iter().all(|&q| q == 0)) as u32;
            cases += 1;
        }
    }
    // the cases that matter were drawn
    assert!(no_walk > 50, "{no_walk} steals with nothing queued");
    assert_eq!(cases, 25 * 40);
    assert!(
        uncounted_hits > 0,
        "no task found only through the uncounted walk"
    );
    // nothing counted but a task queued uncounted: found only by walking every LLC
    let t = llcs_topo(4, &mut rng);
    let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
    // SAFETY: both are `struct sis_topo` of intf.h
    unsafe { copy_same_c_type(&*t, &mut bss.topo) };
    let s = steal(&mut skel, 0, &[0, 0, 0, 1], &[0; 4], true);
    assert_eq!((s.llc, s.tried), (3, 3));
    let s = steal(&mut skel, 0, &[0, 0, 0, 1], &[0; 4], false);
    assert_eq!((s.llc, s.tried, s.walked), (-1, 0, 0));
}

/// The summary's bookkeeping: ops.enqueue counts the task in its LLC once (a second
/// enqueue without a run or dequeue moves the count), ops.running / ops.quiescent uncount
/// it once (the second of them does nothing: no count goes below its tasks).
#[test]
fn decide_steal_queued_counts() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    let counts = |skel: &mut Rig<'_>| {
        let q: Vec<u64> = skel
            .maps
            .bss_data
            .as_ref()
            .unwrap()
            .llc_queued
            .iter()
            .map(|c| c.n)
            .collect();
        let rest: Vec<(usize, u64)> = q
            .iter()
            .copied()
            .enumerate()
            .filter(|&(l, n)| ![0, 1, 3].contains(&l) && n != 0)
            .collect();
        assert!(rest.is_empty(), "counts of other LLCs: {rest:?}");
        (q[0], q[1], q[3])
    };
    let op = |skel: &mut Rig<'_>, flag: u32, llc: i32, task_in: u32| -> u32 {
        let d = io(skel);
        d.flag = flag;
        d.llc = llc;
        d.desched = task_in;
        run!(skel, test_queued);
        io(skel).desched
    };
    for c in skel.maps.bss_data.as_mut().unwrap().llc_queued.iter_mut() {
        c.n = 0;
    }
    skel.maps.bss_data.as_mut().unwrap().steal_uncounted = 0;
    let a = op(&mut skel, 0, 1, 0);
    assert_eq!((a, counts(&mut skel)), (2, (0, 1, 0)));
    let b = op(&mut skel, 0, 1, 0);
    assert_eq!((b, counts(&mut skel)), (2, (0, 2, 0)));
    // task a enqueued again (to LLC 3) before it ran: counted there only
    let a = op(&mut skel, 0, 3, a);
    assert_eq!((a, counts(&mut skel)), (4, (0, 1, 1)));
    // running, then quiescent: one uncount
    let a = op(&mut skel, 1, 0, a);
    assert_eq!((a, counts(&mut skel)), (0, (0, 1, 0)));
    let a = op(&mut skel, 1, 0, a);
    assert_eq!((a, counts(&mut skel)), (0, (0, 1, 0)));
    let b = op(&mut skel, 1, 0, b);
    assert_eq!((b, counts(&mut skel)), (0, (0, 0, 0)));
    assert_eq!(skel.maps.bss_data.as_ref().unwrap().steal_uncounted, 0);
    // an LLC out of range cannot be counted: every later steal walks every LLC
    let c = op(&mut skel, 0, -1, 0);
    assert_eq!((c, counts(&mut skel)), (0, (0, 0, 0)));
    assert_eq!(skel.maps.bss_data.as_ref().unwrap().steal_uncounted, 1);
}

const MAX_LLC_SHARDS: usize = bi::sis_consts_MAX_LLC_SHARDS as usize;

struct Shard {
    own: i32,
    nr: u32,
    k: u32,
    /// the shards dispatch tried, in order (every live one when all are empty)
    order: Vec<u32>,
    ids: Vec<u64>,
    /// dispatch moved a task
    moved: bool,
    /// the tasks left in each shard after the dispatch
    left: Vec<u32>,
}

/// One run of test_shard with every shard of every LLC empty and all shards live.
fn shard(skel: &mut Rig<'_>, k: u32, feat: u64, cpu: usize, llc: usize) -> Shard {
    shard_with(skel, k, feat, cpu, llc, true, &[])
}

/// test_shard with `tasks` (shard, tasks) queued in LLC `llc`'s shards (the others empty)
/// and `used` as llc_shards_used: the DSQ ids come from a first run.
fn shard_with(
    skel: &mut Rig<'_>,
    k: u32,
    feat: u64,
    cpu: usize,
    llc: usize,
    used: bool,
    tasks: &[(usize, u32)],
) -> Shard {
    skel.maps
        .data_data
        .as_mut()
        .expect("data mmapped")
        .shard_cpus = k;
    let mut ids = vec![];
    for pass in 0..2 {
        let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
        bss.synth_dsq_nr.fill(0);
        if pass == 1 {
            for &(s, n) in tasks {
                bss.synth_dsq_nr[ids[s] as usize] = n;
            }
        }
        bss.llc_shards_used = used as u32;
        let d = io(skel);
        d.feat = feat;
        d.cpu = cpu as i32;
        d.llc = llc as i32;
        d.out_cpu = -99;
        d.flag = 99;
        run!(skel, test_shard);
        ids = skel.io.shard_ids[..skel.io.out as usize].to_vec();
    }
    let bss = skel.maps.bss_data.as_ref().expect("bss mmapped");
    let nr = skel.io.out;
    let tried = skel.io.probed as usize;
    assert!(tried <= MAX_LLCS, "{tried} moves tried");
    let order = bss.synth_dsq_tried[..tried]
        .iter()
        .map(|id| ids.iter().position(|i| i == id).expect("a shard's DSQ") as u32)
        .collect();
    Shard {
        own: skel.io.out_cpu,
        nr,
        k: skel.io.first,
        order,
        moved: skel.io.flag == 1,
        left: ids
            .iter()
            .map(|&id| bss.synth_dsq_nr[id as usize])
            .collect(),
        ids,
    }
}

/// LLC_SHARDS' geometry and enqueue shard (shards.bpf.h) on an LLC of 20
/// CPUs (0-19), one of 4 (20-23) and one of 40 (24-63): k = 8 gives the 20-CPU LLC shards
/// {0-7} {8-15} {16-19} and the 4-CPU LLC one shard (n <= k: today's queue); k = 1 on 40
/// CPUs is raised to ceil(40 / 16) = 3, 14 shards. Off, every CPU queues in shard 0.
/// Shard 0's DSQ is the LLC's (id = LLC index), the others' ids are distinct and above
/// every LLC's.
#[test]
fn decide_llc_shards_geometry() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    set_topo(&mut skel, 64, |id| {
        if id < 20 {
            0
        } else if id < 24 {
            1
        } else {
            2
        }
    });
    for cpu in 0..20 {
        let s = shard(&mut skel, 8, bit::LLC_SHARDS, cpu, 0);
        assert_eq!((s.own, s.nr, s.k), (cpu as i32 / 8, 3, 8), "cpu {cpu}");
        let off = shard(&mut skel, 8, 0, cpu, 0);
        assert_eq!(off.own, 0, "cpu {cpu} without the feature");
        // switched off, a CPU still serves its own shard first (tasks left there drain)
        assert_eq!(
            off.order[0],
            cpu as u32 / 8,
            "cpu {cpu}: dispatch without the feature"
        );
    }
    for cpu in 20..24 {
        let s = shard(&mut skel, 8, bit::LLC_SHARDS, cpu, 1);
        assert_eq!((s.own, s.nr), (0, 1), "cpu {cpu}");
    }
    let s = shard(&mut skel, 1, bit::LLC_SHARDS, 63, 2);
    assert_eq!((s.own, s.nr, s.k), (13, 14, 3));
    let mut seen = std::collections::HashSet::new();
    for (llc, cpu) in [(0, 0), (1, 20), (2, 24)] {
        let s = shard(&mut skel, 1, bit::LLC_SHARDS, cpu, llc);
        assert!(s.nr as usize <= MAX_LLC_SHARDS);
        assert_eq!(s.ids[0], llc as u64, "shard 0 is LLC {llc}'s DSQ");
        for &id in &s.ids[1..] {
            assert!(id >= MAX_LLCS as u64, "LLC {llc}: id {id}");
        }
        for &id in &s.ids {
            assert!(seen.insert(id), "DSQ id {id} twice");
        }
    }
}

/// The dispatch rotation (shards.bpf.h): a CPU serves its own shard first, then
/// own + 1, own + 2, ... mod S: every shard once within S tries.
#[test]
fn decide_llc_shards_rotation() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    set_topo(&mut skel, 40, |_| 0);
    for k in [4, 8, 13] {
        for cpu in 0..40 {
            let s = shard(&mut skel, k, bit::LLC_SHARDS, cpu, 0);
            let nr = 40u32.div_ceil(k);
            assert_eq!(s.nr, nr);
            let want: Vec<u32> = (0..nr).map(|j| (cpu as u32 / k + j) % nr).collect();
            assert_eq!(s.order, want, "k {k} cpu {cpu}");
        }
    }
}

/// The dispatch's move from its own LLC (shards.bpf.h dispatch_llc, llc_shards_move) over
/// synthetic shards, 5 shards of 8 CPUs, CPU 17 (own shard 2): the head of the first
/// non-empty shard from its own in rotation, one task, and no further try; with no shard
/// but 0 ever used (llc_shards_used 0), shard 0's DSQ alone, as before shards.
#[test]
fn decide_llc_shards_move() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    set_topo(&mut skel, 40, |_| 0);
    let run = |skel: &mut Rig<'_>, used, tasks: &[(usize, u32)]| {
        let s = shard_with(skel, 8, bit::LLC_SHARDS, 17, 0, used, tasks);
        assert_eq!((s.own, s.nr), (2, 5));
        (s.moved, s.order, s.left)
    };
    // own empty: 3, then 4 holds tasks; shard 0's stay
    let r = run(&mut skel, true, &[(0, 2), (4, 3)]);
    assert_eq!(r, (true, vec![2, 3, 4], vec![2, 0, 0, 0, 2]));
    // own first
    let r = run(&mut skel, true, &[(0, 1), (2, 1)]);
    assert_eq!(r, (true, vec![2], vec![1, 0, 0, 0, 0]));
    // the rotation wraps past the last shard to 0
    let r = run(&mut skel, true, &[(1, 1)]);
    assert_eq!(r, (true, vec![2, 3, 4, 0, 1], vec![0, 0, 0, 0, 0]));
    // nothing queued: every shard once
    let r = run(&mut skel, true, &[]);
    assert_eq!(r, (false, vec![2, 3, 4, 0, 1], vec![0; 5]));
    // shards never used: shard 0 alone, whatever the CPU's own
    let r = run(&mut skel, false, &[(0, 1), (4, 1)]);
    assert_eq!(r, (true, vec![0], vec![0, 0, 0, 0, 1]));
    let r = run(&mut skel, false, &[(4, 1)]);
    assert_eq!(r, (false, vec![0], vec![0, 0, 0, 0, 1]));
}

/// The steal's move (steal.bpf.h over llc_shards_move): the LLC stolen from gives the head
/// of its first non-empty shard from shard 0, whatever the stealing CPU; with shards
/// never used, its shard 0 alone. Two LLCs of 20 CPUs, 3 shards of 8.
#[test]
fn decide_steal_shards_from_zero() {
    let mut obj = MaybeUninit::uninit();
    let mut skel = machine(&mut obj);
    set_topo(&mut skel, 40, |id| id / 20);
    let ids = shard(&mut skel, 8, bit::LLC_SHARDS, 39, 1).ids;
    assert_eq!(ids.len(), 3);
    let run = |skel: &mut Rig<'_>, used: bool, tasks: [u32; 3]| {
        let bss = skel.maps.bss_data.as_mut().expect("bss mmapped");
        bss.synth_dsq_nr.fill(0);
        for (s, &n) in tasks.iter().enumerate() {
            bss.synth_dsq_nr[ids[s] as usize] = n;
        }
        for c in bss.llc_queued.iter_mut() {
            c.n = 0;
        }
        bss.llc_queued[1].n = tasks.iter().sum::<u32>() as u64;
        bss.steal_uncounted = 0;
        bss.llc_shards_used = used as u32;
        // a CPU of LLC 0 whose own shard (2) is not LLC 1's first
        io(skel).cpu = 19;
        io(skel).llc = 0;
        io(skel).out_cpu = -99;
        run!(skel, test_steal);
        let bss = skel.maps.bss_data.as_ref().expect("bss mmapped");
        let left: Vec<u32> = ids
            .iter()
            .map(|&id| bss.synth_dsq_nr[id as usize])
            .collect();
        (skel.io.out_cpu, bss.synth_dsq_nr_tried, left)
    };
    assert_eq!(run(&mut skel, true, [1, 0, 1]), (1, 1, vec![0, 0, 1]));
    assert_eq!(run(&mut skel, true, [0, 1, 1]), (1, 2, vec![0, 0, 1]));
    assert_eq!(run(&mut skel, true, [0, 0, 2]), (1, 3, vec![0, 0, 1]));
    assert_eq!(run(&mut skel, false, [0, 0, 2]), (-1, 1, vec![0, 0, 2]));
    assert_eq!(run(&mut skel, false, [1, 0, 2]), (1, 1, vec![0, 0, 2]));
}

/// The wait histogram's bucket (wait_hist.bpf.h's wait_bucket(), the scheduler's and the
/// latency tracer's) is the one the reports decode (src/sched/wait_hist.rs): for waits
/// from 0 ns to 2^63, each in [bucket_lo, bucket_hi) of its bucket. A generated mutant,
/// `(msb - 1) * 4` -> `(msb - 2) * 4` (every wait reported an octave short), survived every
/// host test before this one.
#[test]
fn decide_wait_bucket_is_the_reports_bucket() {
    use crate::sched::wait_hist::{bucket_hi, bucket_lo, bucket_of, NR_BUCKETS};
    let mut obj = MaybeUninit::uninit();
    let skel = machine(&mut obj);
    let mut ns: Vec<u64> = (0..8).collect();
    for s in [3, 4, 5, 9, 10, 17, 20, 30, 40, 62, 63] {
        ns.extend([(1u64 << s) - 1, 1 << s, (1 << s) + (1 << (s - 1)) + 1]);
    }
    ns.extend([999, 1_000_000, 123_456_789, 5_000_000_000, u64::MAX]);
    for chunk in ns.chunks(64) {
        let mut io = wait_bucket_io {
            ns: [0; 64],
            idx: [0; 64],
        };
        io.ns[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: test_intf.h's struct wait_bucket_io, plain integers
        let ret = unsafe { run_with_ctx(&skel.progs.test_wait_bucket, &mut io) }
            .expect("BPF_PROG_TEST_RUN test_wait_bucket");
        assert_eq!(ret, 0);
        let idx = io.idx;
        for (i, &v) in chunk.iter().enumerate() {
            let b = idx[i] as usize;
            assert_eq!(b, bucket_of(v), "{v} ns");
            // the last bucket, and the top one's end (2^64, saturated), are open
            let open = b == NR_BUCKETS - 1 || bucket_hi(b) == u64::MAX;
            assert!(
                bucket_lo(b) <= v && (v < bucket_hi(b) || open),
                "{v} ns in bucket {b}"
            );
        }
    }
}
