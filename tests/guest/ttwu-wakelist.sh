#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# ttwu-wakelist.sh [SECS]   (guest side of tests/vm.rs ttwu_wakelist_7)
# Seed 001's load, netperf UDP_STREAM on loopback (64-byte sends, nproc/2 streams), under the
# scheduler loaded twice: as by default, then with --allow-queued-wakeup
# (SCX_OPS_ALLOW_QUEUED_WAKEUP, 6.15+).
# Per run, `monitor --json` over the load (REPORTS reports of SECS s) sums:
#   wake_on_cpu       the wakee still on its CPU (in schedule(), dequeued) at sched_waking
#   wake_spun         of those, activated by the waker after waiting for p->on_cpu to clear
#   wake_list         activated from a CPU's wake list (on another CPU than the waker's)
#   wake_list_on_cpu  of those, a wakee on its CPU queued there without ops.select_cpu
#   hit_ttwu_queue_desched  the placement shortcut (TTWU_QUEUE_DESCHED, on in both runs)
# Checks (counts, not speeds; try_to_wake_up() and ttwu_queue_cond(), kernel/sched/core.c):
#   default: sched_ext's ttwu_queue_cond() refuses its tasks, so no wake list at all
#            (wake_list = 0) and every on-CPU wake-up made its waker wait (wake_spun =
#            wake_on_cpu, but for the wake-ups the reports' edges split: sched_waking in one
#            report, the activation in the next; at the first edge that adds a wake_spun, at
#            the last it drops one).
#   --allow-queued-wakeup: the kernel's wake list takes on-CPU wakees (wake_list_on_cpu > 0)
#            and fewer wakers wait than wakees were on their CPU (wake_spun < wake_on_cpu).
. "$(dirname "$0")/lib.sh"

secs=${1:-3}
readonly REPORTS=3
# streams at once: one stream under TCG left 3-44 wakees on their CPU per run (the vCPUs
# run in turn, so a wakee is rarely still on its CPU when woken); half the CPUs' worth
# makes it common enough for the queued run's checks
STREAMS=$(( $(nproc) / 2 ))
# a wake-up's two halves may fall in two reports: at most one per CPU at each of the
# REPORTS + 1 edges
edge_slack=$(( $(nproc) * (REPORTS + 1) ))
netperf_setup

# run NAME ARGS...: the scheduler with ARGS under netperf; the sums into /tmp/NAME.sums
run() {
  local name=$1 i np=(); shift
  sched_start "/tmp/sched-$name.log" "$@"
  for i in $(seq "$STREAMS"); do
    netperf -t UDP_STREAM -H 127.0.0.1 -l $(( secs * (REPORTS + 2) )) -- -m 64 > "/tmp/np-$name-$i.out" 2>&1 &
    np+=($!); bg $!
  done
  sleep 1
  monitor_json "/tmp/$name.json" "$REPORTS" "$secs"
  for i in $(seq "$STREAMS"); do
    wait "${np[i - 1]}" || fail "$name: netperf UDP_STREAM $i failed: $(tail -n 3 "/tmp/np-$name-$i.out")"
  done
  jq -s -r '"\(map(.wake_on_cpu) | add) \(map(.wake_spun) | add) \(map(.wake_list) | add) \(map(.wake_list_on_cpu) | add) \(map(.hit_ttwu_queue_desched) | add) \(map(.search) | add) \(.[-1].allow_queued_wakeup)"' \
    "/tmp/$name.json" > "/tmp/$name.sums"
  read -r on spun list list_on hit search aqw < "/tmp/$name.sums"
  echo "# $name: wake_on_cpu $on wake_spun $spun wake_list $list (on_cpu $list_on) hit_ttwu_queue_desched $hit search $search allow_queued_wakeup $aqw"
  figure "${name}_wake_on_cpu" "$on"; figure "${name}_wake_spun" "$spun"
  figure "${name}_wake_list" "$list"; figure "${name}_wake_list_on_cpu" "$list_on"
  figure "${name}_hit_ttwu_queue_desched" "$hit"; figure "${name}_search" "$search"
  sched_alive "after $name"
  sched_stop_clean
}

run default
read -r on spun list _ _ _ aqw < /tmp/default.sums
expect_eq "default: allow_queued_wakeup" "$aqw" 0
# Not a check: under TCG the vCPUs run in turn, and a wakee still on its CPU when woken is
# rare (5 of 2,609 wake-ups in the first run here); the queued run's check needs some.
info "default: wake_on_cpu $on"
expect_eq "default: wake_list (ttwu_queue_cond refuses sched_ext tasks)" "$list" 0
awk_true "(o > s ? o - s : s - o) <= e" -v s="$spun" -v o="$on" -v e="$edge_slack" ||
  fail "default: wake_spun $spun, want wake_on_cpu $on (within $edge_slack, the reports' edges)"
ok "default: wake_spun $spun = wake_on_cpu $on (edges: <= $edge_slack)"

run queued --allow-queued-wakeup
read -r on spun list list_on _ _ aqw < /tmp/queued.sums
expect_eq "--allow-queued-wakeup: allow_queued_wakeup" "$aqw" 1
[ "$list_on" -gt 0 ] || fail "--allow-queued-wakeup: wake_list_on_cpu = 0 (wake_on_cpu $on, wake_list $list)"
ok "--allow-queued-wakeup: wake_list_on_cpu $list_on > 0 (wake_list $list)"
[ "$spun" -lt "$on" ] || fail "--allow-queued-wakeup: wake_spun $spun, not below wake_on_cpu $on"
ok "--allow-queued-wakeup: wake_spun $spun < wake_on_cpu $on"

check_dmesg_clean
pass
