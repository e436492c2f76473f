// SPDX-License-Identifier: GPL-2.0-only
//! A model of the fairness rules of src/bpf/vtime.bpf.h (same formulas, same integer
//! arithmetic) on a simulated LLC: n CPUs serving one queue ordered by the key, tasks that
//! run whole slices or short bursts and sleep. It checks the wait bound docs/DESIGN.md
//! states ("Fairness and waits") without TCG's distortions, and that the bound comes from
//! the wait guard: without it the same load makes a nice-0 task wait far longer.
//!
//! With shards (LLC_SHARDS, docs/DESIGN.md "Sharding"): the LLC's n CPUs form S = ceil(n/k)
//! shards of k; a task queues in the shard its placement names (the shard of its CPU, or
//! an adversary's choice), one LLC clock V keys every shard, and an idle CPU serves its own
//! shard first, then the others in the fixed rotation own+1, own+2, ... (mod S).

const VT_SCALE: u64 = 256;
const VT_NICE0: u64 = 100;
const VT_GUARD_NS: u64 = 200_000_000;
const VT_RATE_NS: u64 = 50_000_000;

#[derive(Clone)]
struct Task {
    w: u64,
    /// run this long, then sleep `sleep`; None: a CPU hog
    burst: Option<u64>,
    sleep: u64,
    v: u64,
    vlag: i64,
    key: u64,
    runnable_at: u64,
    left: u64,
    max_wait: u64,
    runs: u64,
    /// the CPU it last ran on (its shard under `Place::ByCpu`)
    cpu: usize,
    /// its shard under `Place::Fixed`
    home: usize,
}

/// Where a runnable task queues.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// the shard of the CPU it last ran on (the scheduler's rule: the shard of the task's CPU)
    ByCpu,
    /// the adversary's: the task's `home` shard, wherever it ran
    Fixed,
}

/// The LLC's queue: `k` CPUs per shard; `foreign`: an idle CPU whose shard is empty serves
/// the others in rotation (false: the mutant that never does).
#[derive(Clone, Copy)]
struct Shards {
    k: usize,
    place: Place,
    foreign: bool,
}

/// One shard: today's single LLC queue.
const ONE: Shards = Shards {
    k: usize::MAX,
    place: Place::ByCpu,
    foreign: true,
};

struct Llc {
    v: u64,
    load: i64,
    rate_t: u64,
    rate_v: u64,
    guard: u64,
    nr_cpus: u64,
    slice: u64,
    use_guard: bool,
}

fn before(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) < 0
}

fn vt_scale(ns: u64, w: u64) -> u64 {
    ns * VT_NICE0 * VT_SCALE / w
}

fn clamp(v: u64, c: u64, lo: i64, hi: i64) -> u64 {
    let d = v.wrapping_sub(c) as i64;
    if d < -lo {
        c.wrapping_sub(lo as u64)
    } else if d > hi {
        c.wrapping_add(hi as u64)
    } else {
        v
    }
}

impl Llc {
    fn lag_limit(&self, w: u64) -> i64 {
        vt_scale(2 * self.slice, w) as i64
    }

    /// vt_guard()
    fn guard(&self) -> u64 {
        let w = (self.load.max(VT_NICE0 as i64)) as u64;
        let est = VT_GUARD_NS / 1000 * self.nr_cpus * VT_NICE0 * VT_SCALE / w * 1000;
        est.min(self.guard)
    }

    /// vt_key()
    fn key(&self, t: &mut Task) -> u64 {
        let lim = self.lag_limit(t.w);
        t.v = clamp(t.v, self.v, lim, lim);
        let key = t.v.wrapping_add(vt_scale(self.slice, t.w));
        if !self.use_guard {
            return key;
        }
        let g = self.guard() as i64;
        clamp(key, self.v, g, g)
    }

    /// vt_advance()
    fn advance(&mut self, delta: u64, w_running: u64, now: u64) {
        let w = self.load.max(w_running as i64).max(1) as u64;
        self.v = self.v.wrapping_add(delta * VT_NICE0 * VT_SCALE / w);
        let t0 = self.rate_t;
        if now - t0 >= VT_RATE_NS {
            if t0 != 0 && now - t0 < 64 * VT_RATE_NS {
                self.guard = self.v.wrapping_sub(self.rate_v) / ((now - t0) / 1000 + 1)
                    * (VT_GUARD_NS / 1000);
            }
            self.rate_t = now;
            self.rate_v = self.v;
        }
    }
}

/// vt_quiescent(): the lag captured, clamped to two of the task's slices (in `t.w`'s units).
fn quiescent(llc: &Llc, t: &mut Task) {
    let lim = llc.lag_limit(t.w);
    t.vlag = (llc.v.wrapping_sub(t.v) as i64).clamp(-lim, lim);
}

/// vt_runnable(): placed at V - vlag.
fn runnable(llc: &Llc, t: &mut Task) {
    t.v = llc.v.wrapping_sub(t.vlag as u64);
}

/// vt_set_weight() (reweight_entity()): the lag V - v is kept in real-time terms,
/// vlag' = vlag * w / w', for a runnable task (its lag now) and for a sleeping one (the
/// lag it will be placed with) alike; `asleep_too` false is the old rule, which returned
/// early for a sleeping task.
fn set_weight(llc: &Llc, t: &mut Task, is_runnable: bool, w: u64, asleep_too: bool) {
    if is_runnable {
        let lag = llc.v.wrapping_sub(t.v) as i64 * t.w as i64 / w as i64;
        t.v = llc.v.wrapping_sub(lag as u64);
    } else if asleep_too {
        t.vlag = t.vlag * t.w as i64 / w as i64;
    }
    t.w = w;
}

/// Run `tasks` on `nr_cpus` CPUs for `until` ns; returns the tasks with their longest waits.
fn simulate(
    tasks: Vec<Task>,
    nr_cpus: usize,
    slice: u64,
    until: u64,
    use_guard: bool,
) -> Vec<Task> {
    simulate_sharded(tasks, nr_cpus, slice, until, use_guard, ONE)
}

/// The lowest key of `q` (ties: the earlier queued), removed.
fn take_min(q: &mut Vec<usize>, tasks: &[Task]) -> usize {
    let (qi, _) = q
        .iter()
        .enumerate()
        .min_by(|a, b| {
            let (ka, kb) = (tasks[*a.1].key, tasks[*b.1].key);
            if before(ka, kb) {
                std::cmp::Ordering::Less
            } else if before(kb, ka) {
                std::cmp::Ordering::Greater
            } else {
                a.0.cmp(&b.0)
            }
        })
        .unwrap();
    q.remove(qi)
}

/// `simulate` with the LLC's queue in shards.
fn simulate_sharded(
    mut tasks: Vec<Task>,
    nr_cpus: usize,
    slice: u64,
    until: u64,
    use_guard: bool,
    sh: Shards,
) -> Vec<Task> {
    let k = sh.k.clamp(1, nr_cpus);
    let nr_shards = nr_cpus.div_ceil(k);
    let shard_of = |t: &Task| match sh.place {
        Place::ByCpu => t.cpu / k,
        Place::Fixed => t.home % nr_shards,
    };
    let mut llc = Llc {
        v: 1 << 50,
        load: 0,
        rate_t: 0,
        rate_v: 0,
        guard: 0,
        nr_cpus: nr_cpus as u64,
        slice,
        use_guard,
    };
    // (task, start, end) per CPU
    let mut cpus: Vec<Option<(usize, u64, u64)>> = vec![None; nr_cpus];
    let mut queue: Vec<Vec<usize>> = vec![vec![]; nr_shards];
    // wake-up times of sleeping tasks
    let mut wake: Vec<Option<u64>> = vec![None; tasks.len()];
    let mut now = 1;
    for (i, t) in tasks.iter_mut().enumerate() {
        // enable + runnable: v = V, weight joins W, queued (staggered sleepers)
        llc.load += t.w as i64;
        t.v = llc.v;
        t.runnable_at = now;
        t.left = t.burst.unwrap_or(u64::MAX);
        t.key = llc.key(t);
        t.cpu = i % nr_cpus;
        queue[shard_of(t)].push(i);
    }
    while now < until {
        // dispatch: an idle CPU takes the lowest key of its shard, else of the next
        // non-empty shard in the rotation
        for (cpu, c) in cpus.iter_mut().enumerate() {
            if c.is_some() {
                continue;
            }
            let own = cpu / k;
            let Some(s) = (0..nr_shards)
                .take(if sh.foreign { nr_shards } else { 1 })
                .map(|j| (own + j) % nr_shards)
                .find(|&s| !queue[s].is_empty())
            else {
                continue;
            };
            let i = take_min(&mut queue[s], &tasks);
            let t = &mut tasks[i];
            t.max_wait = t.max_wait.max(now - t.runnable_at);
            t.runs += 1;
            t.cpu = cpu;
            *c = Some((i, now, now + slice.min(t.left)));
        }
        // next event
        let next_stop = cpus.iter().flatten().map(|&(_, _, e)| e).min();
        let next_wake = wake.iter().flatten().copied().min();
        now = match (next_stop, next_wake) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => break,
        };
        for c in cpus.iter_mut() {
            let Some((i, start, end)) = *c else { continue };
            if end != now {
                continue;
            }
            *c = None;
            let delta = end - start;
            let t = &mut tasks[i];
            t.v = t.v.wrapping_add(vt_scale(delta, t.w));
            llc.advance(delta, t.w, now);
            if t.burst.is_some() {
                t.left -= delta;
            }
            if t.left == 0 {
                // quiescent: lag capture, weight leaves W
                let lim = llc.lag_limit(t.w);
                t.vlag = (llc.v.wrapping_sub(t.v) as i64).clamp(-lim, lim);
                llc.load -= t.w as i64;
                wake[i] = Some(now + t.sleep);
            } else {
                t.runnable_at = now;
                t.key = llc.key(t);
                queue[shard_of(t)].push(i);
            }
        }
        for i in 0..tasks.len() {
            if wake[i] == Some(now) {
                wake[i] = None;
                let t = &mut tasks[i];
                // runnable: placement, weight joins W
                llc.load += t.w as i64;
                t.v = llc.v.wrapping_sub(t.vlag as u64);
                t.left = t.burst.unwrap_or(u64::MAX);
                t.runnable_at = now;
                t.key = llc.key(t);
                queue[shard_of(t)].push(i);
            }
        }
    }
    tasks
}

/// Longest wait per (weight, hog or not), printed for --nocapture.
fn report(name: &str, tasks: &[Task]) {
    let mut seen: Vec<(u64, bool)> = vec![];
    for t in tasks {
        let k = (t.w, t.burst.is_none());
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    for (w, hog) in seen {
        let m = tasks
            .iter()
            .filter(|t| t.w == w && t.burst.is_none() == hog)
            .map(|t| t.max_wait)
            .max()
            .unwrap_or(0);
        println!(
            "{name}: weight {w} {}: max wait {:.1} ms",
            if hog { "hogs" } else { "sleepers" },
            m as f64 / MS as f64
        );
    }
}

fn task(w: u64, burst: Option<u64>, sleep: u64) -> Task {
    Task {
        w,
        burst,
        sleep,
        v: 0,
        vlag: 0,
        key: 0,
        runnable_at: 0,
        left: 0,
        max_wait: 0,
        runs: 0,
        cpu: 0,
        home: 0,
    }
}

const NICE_M20: u64 = 88761 * 100 / 1024;
/// sched_weight_to_cgroup(15): DIV_ROUND_CLOSEST(15 * 100, 1024) = 1
const NICE_19: u64 = 1;
const MS: u64 = 1_000_000;

/// The nice-starvation load on 16 CPUs: 32 nice -20 hogs, 160 nice -20 hackbench-like tasks
/// (50 us bursts, 400 us sleeps), 4 nice-0 hogs and a nice-0 task waking every 20 ms.
fn hogs20() -> Vec<Task> {
    let mut t = vec![];
    t.extend((0..32).map(|_| task(NICE_M20, None, 0)));
    t.extend((0..160).map(|_| task(NICE_M20, Some(50_000), 400_000)));
    t.extend((0..4).map(|_| task(VT_NICE0, None, 0)));
    t.push(task(VT_NICE0, Some(100_000), 20 * MS));
    t
}

/// The bound docs/DESIGN.md states: 2 x VT_GUARD_NS of clock progress plus the queue
/// ahead, N / n slices, plus one slice (the CPUs are busy with slices started before).
fn bound(nr_tasks: u64, nr_cpus: u64, slice: u64) -> u64 {
    2 * VT_GUARD_NS + nr_tasks.div_ceil(nr_cpus) * slice + slice
}

/// The longest wait of the tasks `keep` selects (at least one).
fn worst_wait(tasks: &[Task], keep: impl Fn(&Task) -> bool) -> u64 {
    tasks
        .iter()
        .filter(|t| keep(t))
        .map(|t| t.max_wait)
        .max()
        .unwrap()
}

/// Every task ran, and none waited longer than `b`.
fn assert_bounded(tasks: &[Task], b: u64) {
    for (i, t) in tasks.iter().enumerate() {
        assert!(t.runs > 0, "task {i} (w {}) never ran", t.w);
        assert!(
            t.max_wait <= b,
            "task {i} (w {}): max wait {} ms > bound {} ms",
            t.w,
            t.max_wait / MS,
            b / MS
        );
    }
}

#[test]
fn waits_bounded_under_nice_minus_20_hogs() {
    let tasks = simulate(hogs20(), 16, 5 * MS, 20_000 * MS, true);
    report("guard", &tasks);
    assert_bounded(&tasks, bound(tasks.len() as u64, 16, 5 * MS));
    // weights still order: the nice -20 hogs wait less than the nice-0 hogs
    let worst = |w: u64, hog: bool| worst_wait(&tasks, |t| t.w == w && t.burst.is_none() == hog);
    assert!(worst(NICE_M20, true) < worst(VT_NICE0, true));
}

#[test]
fn without_the_guard_nice0_waits_much_longer() {
    let tasks = simulate(hogs20(), 16, 5 * MS, 20_000 * MS, false);
    report("no guard", &tasks);
    let b = bound(tasks.len() as u64, 16, 5 * MS);
    let nice0 = worst_wait(&tasks, |t| t.w == VT_NICE0);
    assert!(
        nice0 > 2 * b,
        "nice-0 max wait {} ms without the guard, bound {} ms",
        nice0 / MS,
        b / MS
    );
}

#[test]
fn waits_bounded_nice19_background() {
    // 32 nice-19 hogs vs 80 nice-0 hackbench-like tasks and a 20 ms sleeper
    let mut t = vec![];
    t.extend((0..32).map(|_| task(NICE_19, None, 0)));
    t.extend((0..80).map(|_| task(VT_NICE0, Some(50_000), 400_000)));
    t.push(task(VT_NICE0, Some(100_000), 20 * MS));
    let tasks = simulate(t, 16, 5 * MS, 20_000 * MS, true);
    report("nice 19 background", &tasks);
    assert_bounded(&tasks, bound(tasks.len() as u64, 16, 5 * MS));
    // the nice-0 sleeper is served well ahead of the nice-19 hogs
    let sleeper = tasks.last().unwrap().max_wait;
    let hog19 = worst_wait(&tasks, |t| t.w == NICE_19);
    assert!(
        sleeper < hog19,
        "sleeper {sleeper} ns, nice-19 hogs {hog19} ns"
    );
}

/// `tasks` with their `home` shards: task i in `homes(i)`.
fn homed(mut tasks: Vec<Task>, homes: impl Fn(usize) -> usize) -> Vec<Task> {
    for (i, t) in tasks.iter_mut().enumerate() {
        t.home = homes(i);
    }
    tasks
}

/// The per-shard bound docs/DESIGN.md states for LLC_SHARDS: a task waits 2 x VT_GUARD_NS
/// of clock progress plus the queue ahead of it in its shard, which at least its shard's k
/// CPUs serve (own shard first): ceil(N_s / k) slices, plus one slice.
fn shard_bound(nr_in_shard: u64, k: u64, slice: u64) -> u64 {
    2 * VT_GUARD_NS + nr_in_shard.div_ceil(k) * slice + slice
}

/// Mixed bursts on 16 CPUs: nice 0 and nice 5 tasks of 20 us to 3 ms bursts, four nice-0 hogs.
fn mixed_bursts() -> Vec<Task> {
    const NICE_5: u64 = 3121 * 100 / 1024;
    let mut t = vec![];
    t.extend((0..48).map(|i| {
        task(
            VT_NICE0,
            Some(20_000 + (i % 6) * 500_000),
            300_000 + i * 10_000,
        )
    }));
    t.extend((0..24).map(|i| task(NICE_5, Some(100_000 + i * 100_000), 2 * MS)));
    t.extend((0..4).map(|_| task(VT_NICE0, None, 0)));
    t
}

const SHARD4: Shards = Shards {
    k: 4,
    place: Place::ByCpu,
    foreign: true,
};

#[test]
fn one_shard_when_the_llc_is_no_larger_than_k() {
    // an LLC of <= k CPUs is one shard: the same schedule as the unsharded queue
    let flat = simulate(hogs20(), 16, 5 * MS, 5_000 * MS, true);
    for k in [16, 64] {
        let sh = Shards { k, ..SHARD4 };
        let sharded = simulate_sharded(hogs20(), 16, 5 * MS, 5_000 * MS, true, sh);
        let waits = |v: &[Task]| v.iter().map(|t| (t.max_wait, t.runs)).collect::<Vec<_>>();
        assert!(waits(&flat) == waits(&sharded), "k {k}: schedules differ");
    }
}

#[test]
fn sharded_waits_bounded_under_the_loads() {
    // 4 shards of 4 CPUs, each task queued in the shard of its CPU: the LLC's bound holds
    for (name, load) in [
        ("hogs -20", hogs20()),
        ("mixed bursts", mixed_bursts()),
        ("nice 19 background", {
            let mut t = vec![];
            t.extend((0..32).map(|_| task(NICE_19, None, 0)));
            t.extend((0..80).map(|_| task(VT_NICE0, Some(50_000), 400_000)));
            t.push(task(VT_NICE0, Some(100_000), 20 * MS));
            t
        }),
    ] {
        let tasks = simulate_sharded(load, 16, 5 * MS, 20_000 * MS, true, SHARD4);
        report(&format!("4x4 shards, {name}"), &tasks);
        assert_bounded(&tasks, bound(tasks.len() as u64, 16, 5 * MS));
    }
}

/// The adversary: every task of `load` queues in shard 0 of k = 2 CPUs, wherever it ran.
fn all_in_shard0(load: Vec<Task>, foreign: bool) -> Vec<Task> {
    let sh = Shards {
        k: 2,
        place: Place::Fixed,
        foreign,
    };
    simulate_sharded(homed(load, |_| 0), 16, 5 * MS, 20_000 * MS, true, sh)
}

/// 256 nice-0 hogs and a nice-0 task waking every 20 ms.
fn hogs0() -> Vec<Task> {
    let mut t: Vec<Task> = (0..256).map(|_| task(VT_NICE0, None, 0)).collect();
    t.push(task(VT_NICE0, Some(100_000), 20 * MS));
    t
}

#[test]
fn sharded_waits_bounded_when_every_task_queues_in_one_shard() {
    // the other shards' CPUs, their own queues empty, serve shard 0 in the rotation
    for (name, load) in [("hogs -20", hogs20()), ("256 hogs", hogs0())] {
        let tasks = all_in_shard0(load, true);
        report(&format!("all in shard 0, {name}"), &tasks);
        assert_bounded(&tasks, bound(tasks.len() as u64, 16, 5 * MS));
    }
}

#[test]
fn without_serving_foreign_shards_one_shard_starves() {
    // the mutation check of the test above: a dispatch that never serves another shard
    // leaves shard 0 to its 2 CPUs and the LLC's bound fails: 257 tasks on 2 CPUs wait
    // ~128 slices (640 ms), the bound is 400 + 17 x 5 + 5 = 490 ms
    let tasks = all_in_shard0(hogs0(), false);
    report("all in shard 0, 256 hogs, no rotation", &tasks);
    let b = bound(tasks.len() as u64, 16, 5 * MS);
    let worst = worst_wait(&tasks, |_| true);
    assert!(
        worst > b,
        "worst wait {} ms, bound {} ms",
        worst / MS,
        b / MS
    );
}

#[test]
fn skewed_shards_keep_the_per_shard_bound() {
    // the adversary with every shard busy: 3 of 4 tasks in shard 0, the rest spread over
    // shards 1-3 (each kept busy by its hogs, so none serves shard 0): a task's wait is
    // bounded by its shard's tasks and k CPUs, not by the LLC's n
    let homes = |i: usize| if i % 4 == 3 { 1 + i / 4 % 3 } else { 0 };
    let load = homed(hogs20(), homes);
    let n = load.len();
    let sh = Shards {
        place: Place::Fixed,
        ..SHARD4
    };
    let tasks = simulate_sharded(load, 16, 5 * MS, 20_000 * MS, true, sh);
    report("skewed 3:1", &tasks);
    for s in 0..4 {
        let in_s: Vec<Task> = (0..n)
            .filter(|&i| homes(i) == s)
            .map(|i| tasks[i].clone())
            .collect();
        assert_bounded(&in_s, shard_bound(in_s.len() as u64, 4, 5 * MS));
    }
}

/// A task reniced while asleep is placed with the same real-time lag (lag x weight) as one
/// reniced while runnable, as fair.c's reweight_entity() rescales se->vlag whether or not
/// the entity is queued. The old rule (vt_set_weight() returned early for a sleeping task:
/// its lag stayed in the old weight's units) places it 10x too far back after nice 0 -> a
/// weight of 1000, and fails.
#[test]
fn reniced_asleep_keeps_its_real_time_lag() {
    let llc = Llc {
        v: 1 << 40,
        load: 0,
        rate_t: 0,
        rate_v: 0,
        guard: u64::MAX,
        nr_cpus: 4,
        slice: 3_000_000,
        use_guard: false,
    };
    for (lag_ns, w_new) in [(1_000_000i64, 1000u64), (-2_000_000, 1000), (1_500_000, 15)] {
        // a nice-0 task lag_ns of real time behind the clock: V - v = vt_scale(lag_ns, 100)
        let mut t = task(100, Some(1_000_000), 1_000_000);
        let lag_v = lag_ns * (VT_NICE0 * VT_SCALE) as i64 / 100;
        t.v = llc.v.wrapping_sub(lag_v as u64);
        // reniced while runnable, then asleep and woken
        let mut a = t.clone();
        set_weight(&llc, &mut a, true, w_new, true);
        quiescent(&llc, &mut a);
        runnable(&llc, &mut a);
        // asleep, reniced while asleep, woken
        for asleep_too in [true, false] {
            let mut b = t.clone();
            quiescent(&llc, &mut b);
            set_weight(&llc, &mut b, false, w_new, asleep_too);
            runnable(&llc, &mut b);
            // real-time lag x VT_SCALE x 100: (V - v) * w (the lags stay inside the clamp)
            let real = (llc.v.wrapping_sub(b.v) as i64) * w_new as i64;
            if asleep_too {
                assert_eq!(b.v, a.v, "lag {lag_ns} ns -> weight {w_new}");
                assert!(
                    (real - lag_v * 100).abs() < w_new as i64,
                    "{real} {}",
                    lag_v * 100
                );
            } else {
                // the old rule: the lag kept in nice 0's units is w_new/100 times off
                assert_ne!(b.v, a.v, "lag {lag_ns} ns -> weight {w_new}: old rule");
            }
        }
    }
}
