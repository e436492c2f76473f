#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# rel-shapes.sh [SECS]   (guest side of tests/reliability.rs shapes_*, tools/soak)
# Unusual task shapes under scx_sisutil, each for SECS (default 10) seconds next to a
# hackbench, with the scheduler still attached after each:
#   pinned       several CPU hogs pinned to one CPU, a hackbench pinned to another
#   affinity     CPU hogs whose affinity is changed (taskset -p) while they run
#   nice         one CPU hog per nice level -20..19
#   policies     SCHED_BATCH and SCHED_IDLE hogs (chrt -b / chrt -i)
#   exits        fork/exec/clone storms: tasks that exit right around their wake-up
#   forkbomb     a fork tree bounded at 2^9-1 processes, all alive at once
# Migration-disabled kthreads exist by themselves (per-CPU kworkers, stoppers); the ops set
# SCX_OPS_ENQ_MIGRATION_DISABLED, so every shape also exercises that path.
# At the end: no abnormal sched_ext disable (no watchdog stall), SIGTERM → exit 0.
. "$(dirname "$0")/lib.sh"

secs=${1:-10}
ncpu=$(nproc)
last=$((ncpu - 1))

# pids_stop PIDS...: end background CPU hogs and reap them
pids_stop() { kill -TERM "$@" 2>/dev/null || true; wait "$@" 2>/dev/null || true; }

# with_hackbench WHAT: a hackbench next to the shape; it must complete
with_hackbench() {
  timeout 300 hackbench -g 2 -l 20 > /dev/null || fail "hackbench next to '$1' failed"
}

sched_start /tmp/rel-sched.log

# --- pinned ------------------------------------------------------------------------------
# Pinned tasks skip the LLC queue (dispatched to their CPU's local DSQ): three hogs share
# one CPU round robin, and a whole hackbench (40 tasks) is squeezed onto another.
pin_a=$((last > 0 ? 1 : 0)); pin_b=$((last > 1 ? 2 : 0))
taskset -c "$pin_a" stress-ng --cpu 3 --timeout "${secs}s" > /dev/null 2>&1 &
p=$!
timeout 300 taskset -c "$pin_b" hackbench -g 1 -l 20 > /dev/null || fail "hackbench pinned to cpu$pin_b failed"
with_hackbench pinned
wait "$p" || fail "stress-ng pinned to cpu$pin_a exited $?"
sched_alive "after pinned hogs (cpu$pin_a) and a pinned hackbench (cpu$pin_b)"

# --- affinity changed while runnable -------------------------------------------------------
# ncpu hogs (hogs_start, lib.sh: all up when it returns; the loop changes their affinity, so
# a loop that found none would fail "no affinity change took"). They were stress-ng --cpu
# until 2026-11-29: under TCG it took 8.3-38 s to fork 8 workers beside two busy guests.
hogs_start "$ncpu"
changes=0
end=$(deadline_in "$secs")
while before "$end"; do
  for w in $(pgrep -P "$HOGS_PID" || true); do
    case $((RANDOM % 3)) in
      0) mask=$((RANDOM % ncpu)) ;;                                  # one CPU
      1) mask=$((RANDOM % ncpu)),$(( (RANDOM % ncpu) )) ;;           # two (maybe the same)
      2) mask=0-$last ;;                                             # everything again
    esac
    taskset -p -c "$mask" "$w" > /dev/null 2>&1 && changes=$((changes + 1))
  done
done
with_hackbench affinity
hogs_stop
[ "$changes" -gt 0 ] || fail "no affinity change took"
figure affinity_changes "$changes"
sched_alive "after $changes affinity changes of running hogs"

# --- every nice level -----------------------------------------------------------------------
# This script runs at nice -20 for the phase (its hackbench inherits it): next to eight hogs
# at nice -20..-13 a nice-0 task gets about 1 % of a CPU (the fair-class weights, which the
# scheduler follows), and under TCG on a busy host the script's own checks and timeouts then
# took longer than the test's 20 minutes. The hogs renice themselves to their level.
renice -20 -p $$ > /dev/null || fail "cannot renice the test script to -20"
pids=()
# (busybox has no nice(1): each hog renices itself, then spins)
for n in $(awk 'BEGIN { for (i = -20; i <= 19; i++) print i }'); do
  sh -c "renice $n -p \$\$ > /dev/null && while :; do :; done" &
  pids+=($!)
done
# each hog renices itself once it runs: wait for all 40 (HANG_S guard), then check them.
# The reads fork nothing (bash's read of /proc/PID/stat: field 19 is the nice, 14 and 15
# the CPU time; a comm of "sh" has no space): next to 40 hogs, 8 of them at nice -20..-13,
# an awk per hog took tens of seconds under TCG.
hogs_at_their_nice() {
  local p f; NICES=
  for p in "${pids[@]}"; do read -r -a f < "/proc/$p/stat"; NICES+="${f[18]} "; done
  [ "$NICES" = "$want_nices" ]
}
want_nices=$(awk 'BEGIN { for (i = -20; i <= 19; i++) printf "%d ", i }')
AWAIT_SEEN='echo nices: $NICES' await "the 40 hogs at their nice levels" hogs_at_their_nice
expect_eq "nice levels of the 40 hogs" "$NICES" "$want_nices"
sleep "$secs"
with_hackbench nice
# every hog got CPU time, even at nice 19 next to nice -20 (no starvation)
starved=0
for p in "${pids[@]}"; do
  read -r -a f < "/proc/$p/stat"; t=$((f[13] + f[14]))
  [ "$t" -gt 0 ] || starved=$((starved + 1))
done
pids_stop "${pids[@]}"
renice 0 -p $$ > /dev/null || fail "cannot renice the test script back to 0"
figure nice_hogs_without_cpu_time "$starved"
sched_alive "after 40 hogs at nice -20..19"

# --- SCHED_BATCH and SCHED_IDLE -------------------------------------------------------------
command -v chrt > /dev/null || fail "chrt missing in the guest"
# --timeout is a hang guard only (they run beside a hackbench, then pids_stop ends them): with
# --timeout $secs they could end, on a slow guest, between the wait below and the check of
# their policy, whose `chrt -p` then failed (proof round at host load 13: "policy of the
# idle hogs: got 'FAIL: command failed'")
chrt -b 0 stress-ng --cpu "$ncpu" --timeout 900s > /dev/null 2>&1 &
pb=$!
chrt -i 0 stress-ng --cpu "$ncpu" --timeout 900s > /dev/null 2>&1 &
pi=$!
# chrt sets the policy before it execs stress-ng: wait for both (HANG_S guard); the
# policies checked are the ones the wait read
policy_of() { chrt -p "$1" | sed -n 's/.*policy: //p'; }
policies() { pol_b=$(policy_of "$pb"); pol_i=$(policy_of "$pi"); }
AWAIT_SEEN='echo "policies: $(policy_of "$pb") $(policy_of "$pi")"' await "chrt set SCHED_BATCH and SCHED_IDLE" eval 'policies && [ "$pol_b" = SCHED_BATCH ] && [ "$pol_i" = SCHED_IDLE ]'
expect_eq "policy of the batch hogs" "$pol_b" SCHED_BATCH
expect_eq "policy of the idle hogs" "$pol_i" SCHED_IDLE
with_hackbench policies
kill -0 "$pb" 2>/dev/null || fail "the SCHED_BATCH stress-ng ended before its stop"
kill -0 "$pi" 2>/dev/null || fail "the SCHED_IDLE stress-ng ended before its stop"
pids_stop "$pb" "$pi"
sched_alive "after SCHED_BATCH and SCHED_IDLE hogs"

# --- tasks exiting around their wake-up ------------------------------------------------------
f0=$(forks_total)
stress-ng --fork 2 --vfork 1 --exec 2 --clone 2 --clone-max 64 --timeout "${secs}s" > /dev/null 2>&1 &
p=$!
with_hackbench exits
wait "$p" || fail "fork/exec/clone storm exited $?"
figure storm_forks $(( $(forks_total) - f0 ))
sched_alive "after fork/exec/clone storms"

# --- a bounded fork bomb -------------------------------------------------------------------
# bomb D: two children that each run bomb D-1 and wait, down to the leaves, which sleep a
# moment so that the whole tree is alive at once: 2^(D+1)-1 processes.
bomb() {
  if [ "$1" -gt 0 ]; then bomb $(( $1 - 1 )) & bomb $(( $1 - 1 )) & wait; else sleep 2; fi
}
f0=$(forks_total)
( trap - ERR EXIT; bomb 8 )
figure forkbomb_forks $(( $(forks_total) - f0 ))
[ $(( $(forks_total) - f0 )) -ge 510 ] || fail "the fork tree forked only $(( $(forks_total) - f0 )) times"
sched_alive "after a fork tree of 511 processes"

print_events
sched_stop_clean
check_scx_exits
pass
