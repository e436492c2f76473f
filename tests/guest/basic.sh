#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# basic.sh [LOAD_SECS]   (guest side of tests/vm.rs basic_*)
# scx_sisutil attaches, survives >= LOAD_SECS (default 30) of stress-ng (cpu, fork, affinity
# stressors) plus back-to-back hackbench, as sched-ext/scx CI does; SIGTERM detaches it with
# exit status 0; the kernel logged no abnormal disable. Then a SIGKILLed instance still
# leaves the system on the fair class (state disabled within HANG_S, hackbench completes), and
# a third start after the SIGKILL (stale pinned map and stats socket left behind) attaches
# and stops cleanly on SIGINT.
. "$(dirname "$0")/lib.sh"

load_secs=${1:-30}
ncpu=$(nproc)

expect_eq "state before start" "$(scx_state)" disabled

# --- 1. attach, load, SIGTERM -------------------------------------------------------------
sched_start /tmp/sched1.log
ok "attached (ops $(scx_ops))"

info "load: stress-ng --cpu $ncpu --fork 2 --affinity 2 --timeout ${load_secs}s + hackbench -g 2 -l 20 loop"
stress-ng --cpu "$ncpu" --fork 2 --affinity 2 --timeout "${load_secs}s" --metrics-brief \
  > /tmp/stress.log 2>&1 &
stress_pid=$!
bg "$stress_pid"
hackbench_for "$load_secs" -g 2 -l 20
src=0; wait "$stress_pid" || src=$?
sed 's/^/#   stress-ng| /' /tmp/stress.log | tail -n 12
[ "$src" -eq 0 ] || fail "stress-ng exited $src"
ok "load ran (stress-ng status 0, hackbench all passed)"
sched_alive "after ${load_secs} s of load"

sched_stop TERM
expect_eq "exit status after SIGTERM" "$SCHED_RC" 0
wait_state disabled "$HANG_S"
dump_sched_log
grep -q 'unregistered from user space' /tmp/sched1.log ||
  fail "scheduler log lacks the clean exit reason 'unregistered from user space'"
ok "scheduler reported a clean unregistration"

# --- 2. SIGKILL: the kernel must fall back to the fair class by itself --------------------
sched_start /tmp/sched2.log
kill -KILL "$SCHED_PID"
wait "$SCHED_PID" 2>/dev/null || true
SCHED_PID=
wait_state disabled "$HANG_S"
rc=0; timeout 120 hackbench -g 1 -l 10 > /dev/null || rc=$?
expect_eq "hackbench -g 1 -l 10 after SIGKILL, exit status" "$rc" 0

# --- 3. restart after the SIGKILL (leftover pin and socket), stop with SIGINT ------------
info "leftovers: $(ls /sys/fs/bpf/scx_sisutil 2>&1 | tr '\n' ' ') / $(ls /var/run/scx/root 2>&1 | tr '\n' ' ')"
sched_start /tmp/sched3.log
ok "re-attached after a SIGKILLed run"
rc=0; timeout 120 hackbench -g 1 -l 10 > /dev/null || rc=$?
expect_eq "hackbench under the restarted scheduler, exit status" "$rc" 0
sched_alive "after hackbench"
sched_stop INT
expect_eq "exit status after SIGINT" "$SCHED_RC" 0
wait_state disabled "$HANG_S"

check_dmesg_clean
pass
