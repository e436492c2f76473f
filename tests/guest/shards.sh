#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# shards.sh   (guest side of tests/vm.rs shards_live_*)
# LLC_SHARDS switched live under overload (2*nproc CPU hogs + a hackbench loop), on
# a scheduler started with --shard-cpus 2 (each LLC's queue in shards of 2 CPUs):
#  - on: the LLC queues still serve (dispatch_llc grows), the scheduler stays attached;
#  - off for 40 s, longer than sched_ext's watchdog (30 s): the tasks the feature left in
#    the shards other than 0 are still served (a stranded task would eject the scheduler);
#  - ten switches 0.3 s apart, then a clean exit and a clean dmesg.
. "$(dirname "$0")/lib.sh"

feature_state() { scx_sisutil features | awk -v n="$1" '$1 == n { print $2 }'; }

sched_start_nice10 /tmp/sched.log --shard-cpus 2
expect_eq "LLC_SHARDS at start (off in every preset)" "$(feature_state LLC_SHARDS)" off

# The overload is the precondition of the dispatch_llc check (tasks queue in the LLC's DSQ
# only when no CPU is idle): wait for hackbench's first run and all 2N hogs, not a fixed
# 2 s (HANG_S guard): overload_start waits for both.
overload_start

scx_sisutil features LLC_SHARDS > /dev/null
expect_eq "LLC_SHARDS after LLC_SHARDS" "$(feature_state LLC_SHARDS)" on
# 3 reports of 2 s: a guest stall empties one report (the monitor then reads at once), not
# the sum; a scheduler that never dispatches from the LLC queues still shows 0.
monitor_json /tmp/m_on.json 3 2
sched_alive "with LLC_SHARDS on under overload"

scx_sisutil features NO_LLC_SHARDS > /dev/null
expect_eq "LLC_SHARDS after NO_LLC_SHARDS" "$(feature_state LLC_SHARDS)" off
# A task left in a shard's queue is never dispatched, and sched_ext's watchdog ejects the
# scheduler once a runnable task has waited its timeout_ms (5 s, main.bpf.c): 15 s is three
# of them (40 s until 2026-11-29, CI's time).
sleep 15
sched_alive "15 s after NO_LLC_SHARDS under overload"

for _ in 1 2 3 4 5; do
  scx_sisutil features LLC_SHARDS > /dev/null
  sleep 0.3
  scx_sisutil features NO_LLC_SHARDS > /dev/null
  sleep 0.3
done
sched_alive "after ten switches"

hogs_stop
hackbench_bg_stop
on=$(json_sum /tmp/m_on.json dispatch_llc)
awk_true "$on > 0" || fail "LLC_SHARDS on: dispatch_llc = $on"
ok "LLC_SHARDS on: dispatch_llc = $on over 3 x 2 s"

sched_stop TERM
expect_eq "exit status after SIGTERM" "$SCHED_RC" 0
check_dmesg_clean
pass
