# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# Helpers shared by the guest-side VM test scripts (tests/guest/*.sh, run by tests/vm.rs
# through tools/vm; in the guest they are in /opt/sisutil/tests, on PATH). Sourced by bash.
#
# Output conventions, which tests/vm.rs relies on:
#   ok: <check>      one line per passed check; vm.rs asserts that the expected ones appear,
#                    so a check that silently did not run fails the test too
#   FAIL: <why>      the first failed check; the script exits 1 right after it
#   # ...            information (time series, counters, logs)
#   PASS <name>      the last line of a script whose checks all passed
# Every command failure that no check caught (set -e) also ends in a FAIL: line.

set -Eeuo pipefail

SCX=/sys/kernel/sched_ext
TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}
# How long scx_sisutil may take to attach (BPF verification under TCG is slow, slower still
# on a busy host); tests/vm.rs passes it through tools/vm --env.
ATTACH_TIMEOUT=${VMTEST_ATTACH_TIMEOUT:-60}
SCHED_PID=
SCHED_LOG=
SCHED_RC=
BG_PIDS=()

# Guest uptime in seconds (centiseconds resolution): all times below are guest times, which
# under TCG are emulated, not host seconds.
now() { cut -d' ' -f1 /proc/uptime; }
T0=$(now)
# Seconds since $1 (default: the start of the script), one decimal.
since() { awk -v a="${1:-$T0}" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# before DEADLINE: true while the guest clock is before DEADLINE (from deadline_in SECS).
# Loops are bounded by time, not by iteration counts: under TCG on a busy host a
# `sleep 0.1` plus a fork can take a second.
deadline_in() { awk -v a="$(now)" -v s="$1" 'BEGIN { printf "%.2f", a + s }'; }
before() { awk -v n="$(now)" -v d="$1" 'BEGIN { exit !(n < d) }'; }

info() { echo "# [$(since)s] $*"; }
ok() { echo "ok: $*"; }

fail() {
  echo "FAIL: $*"
  dump_sched_log
  exit 1
}

# An unexpected command failure (set -e) must not look like a pass or a silent exit.
on_err() {
  local rc=$? line=$1 cmd=$2
  trap - ERR
  fail "command failed (exit $rc) at $TEST_NAME line $line: $cmd"
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

# Kill what we started in the background, whatever happened (a leftover stress-ng would keep
# the guest from powering off promptly and distort the next step).
cleanup() {
  local p
  for p in "${BG_PIDS[@]+"${BG_PIDS[@]}"}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  if [ -n "$SCHED_PID" ] && kill -0 "$SCHED_PID" 2>/dev/null; then
    kill -TERM "$SCHED_PID" 2>/dev/null || true
  fi
  rm -f /tmp/vmtest-stop
}
trap cleanup EXIT

pass() { echo "PASS $TEST_NAME"; }

# ---------------------------------------------------------------------------------------
# Assertions

# expect_eq WHAT GOT WANT
expect_eq() {
  [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
  ok "$1 = $3"
}

# expect_rc WHAT GOT_RC: the exit status must be non-zero.
expect_nonzero() {
  [ "$2" -ne 0 ] || fail "$1: exit status 0, want non-zero"
}

# awk_true 'EXPR' VAR=VAL...: exit 0 iff the awk expression over the variables is true
# (floating point comparisons that sh cannot do).
awk_true() {
  local expr=$1; shift
  awk "$@" "BEGIN { exit !($expr) }"
}

# ---------------------------------------------------------------------------------------
# sched_ext and the scheduler

scx_state() { cat "$SCX/state"; }
# root/ops on 7.x and 6.12; scx_ops_open! appends _VERSION_TARGET to the ops name.
scx_ops() { cat "$SCX/root/ops" 2>/dev/null || true; }

# sched_start LOG [ARGS...]: start scx_sisutil ARGS in the background (output to LOG) and wait
# up to 20 s until sched_ext is enabled with our ops (name starting with sisutil_).
sched_start() {
  SCHED_LOG=$1; shift
  local t st ops dl
  t=$(now); dl=$(deadline_in "$ATTACH_TIMEOUT")
  scx_sisutil "$@" > "$SCHED_LOG" 2>&1 &
  SCHED_PID=$!
  while :; do
    st=$(scx_state); ops=$(scx_ops)
    if [ "$st" = enabled ] && [[ $ops == sisutil_* ]]; then
      break
    fi
    kill -0 "$SCHED_PID" 2>/dev/null ||
      fail "scx_sisutil $* exited before attaching (state '$st')"
    before "$dl" ||
      fail "scx_sisutil $* not attached after $ATTACH_TIMEOUT s (state '$st', ops '$ops')"
    sleep 0.1
  done
  info "attached after $(since "$t") s: ops $ops (pid $SCHED_PID)"
}

# sched_alive WHEN: the scheduler process runs and sched_ext is still enabled.
sched_alive() {
  kill -0 "$SCHED_PID" 2>/dev/null || fail "scx_sisutil exited $1"
  [ "$(scx_state)" = enabled ] || fail "sched_ext state '$(scx_state)' $1, want enabled"
  ok "still enabled $1"
}

# sched_stop SIG [TIMEOUT_S]: signal the scheduler and wait (default 30 s) for it to exit;
# its exit status goes to SCHED_RC. Fails if it does not exit in time.
sched_stop() {
  local sig=$1 limit=${2:-30} t dl
  t=$(now); dl=$(deadline_in "$limit")
  kill -"$sig" "$SCHED_PID"
  while kill -0 "$SCHED_PID" 2>/dev/null; do
    before "$dl" || fail "scx_sisutil still running ${limit} s after SIG$sig"
    sleep 0.1
  done
  SCHED_RC=0
  wait "$SCHED_PID" || SCHED_RC=$?
  info "scx_sisutil exited $(since "$t") s after SIG$sig, status $SCHED_RC"
  SCHED_PID=
}

# wait_state STATE LIMIT_S: sched_ext reaches STATE within LIMIT_S seconds; prints how long.
wait_state() {
  local want=$1 limit=$2 t dl
  t=$(now); dl=$(deadline_in "$limit")
  while [ "$(scx_state)" != "$want" ]; do
    before "$dl" || fail "sched_ext state '$(scx_state)' after ${limit} s, want '$want'"
    sleep 0.1
  done
  ok "state $want within ${limit} s ($(since "$t") s)"
}

dump_sched_log() {
  [ -n "$SCHED_LOG" ] && [ -s "$SCHED_LOG" ] || return 0
  echo "# --- scx_sisutil log ($SCHED_LOG) ---"
  sed 's/^/#   sched| /' "$SCHED_LOG"
}

# The kernel must not have disabled a BPF scheduler for any reason other than a clean
# unregistration (a stall, a BPF error, an invalid dispatch, ... all read
# 'sched_ext: BPF scheduler "..." disabled (REASON)').
check_dmesg_clean() {
  local all bad
  all=$(dmesg | grep 'sched_ext' || true)
  echo "# dmesg sched_ext lines:"
  printf '%s\n' "$all" | sed 's/^/#   /'
  bad=$(printf '%s\n' "$all" | grep -E 'sched_ext:.*disabled' |
          grep -v '(unregistered from user space)' || true)
  [ -z "$bad" ] || fail "sched_ext disabled a scheduler abnormally: $bad"
  ok "dmesg: no abnormal sched_ext disable"
}

# ---------------------------------------------------------------------------------------
# Workloads

# bg PID: remember a background job for cleanup.
bg() { BG_PIDS+=("$1"); }

# hackbench_for SECS ARGS...: run `hackbench ARGS` back to back until SECS seconds have
# passed (the last run may end later); fails on the first failed run.
hackbench_for() {
  local secs=$1 end n=0 t; shift
  t=$(now); end=$(deadline_in "$secs")
  while before "$end"; do
    timeout 300 hackbench "$@" > /dev/null || fail "hackbench $* failed (exit $?)"
    n=$((n + 1))
  done
  info "hackbench $*: $n runs in $(since "$t") s"
  [ "$n" -gt 0 ] || fail "hackbench did not run"
}

# hackbench_bg ARGS...: `hackbench ARGS` back to back in the background until
# hackbench_bg_stop. The loop runs in its own process group (setsid) so that it can be
# ended at once; runs and failures are counted in files.
hackbench_bg() {
  rm -f /tmp/vmtest-stop /tmp/vmtest-hb.runs /tmp/vmtest-hb.fail
  : > /tmp/vmtest-hb.runs
  setsid bash -c '
    while [ ! -e /tmp/vmtest-stop ]; do
      if timeout 300 hackbench "$@" > /dev/null 2>&1; then echo >> /tmp/vmtest-hb.runs
      else echo "hackbench $* exit $?" >> /tmp/vmtest-hb.fail; fi
    done' hackbench-loop "$@" &
  HB_PID=$!
  bg "$HB_PID"
}

# hackbench_bg_stop: let the current run finish (up to 60 s, then kill the group), check
# that at least one run completed and none failed.
hackbench_bg_stop() {
  local runs dl
  touch /tmp/vmtest-stop
  dl=$(deadline_in 60)
  while kill -0 "$HB_PID" 2>/dev/null && before "$dl"; do sleep 0.5; done
  if kill -0 "$HB_PID" 2>/dev/null; then
    info "background hackbench still running 60 s after the stop request: killed"
    kill -KILL -- "-$HB_PID" 2>/dev/null || true
  fi
  wait "$HB_PID" 2>/dev/null || true
  runs=$(wc -l < /tmp/vmtest-hb.runs)
  info "background hackbench: $runs runs"
  if [ -s /tmp/vmtest-hb.fail ]; then fail "background hackbench failed: $(head -n1 /tmp/vmtest-hb.fail)"; fi
  [ "$runs" -gt 0 ] || fail "background hackbench never completed a run"
  rm -f /tmp/vmtest-stop
}

# nice10 CMD...: run CMD at nice -10 (busybox has renice, not nice).
nice10() {
  sh -c 'renice -n -10 -p $$ > /dev/null || exit 127; exec "$@"' nice10 "$@"
}

# ---------------------------------------------------------------------------------------
# Monitor output (one JSON object per line)

# monitor_json FILE COUNT INTERVAL: `scx_sisutil monitor --json` into FILE (no jq here: it
# is heavy under TCG, parse after the load); fails unless COUNT lines arrive (the first report needs COUNT * INTERVAL seconds plus start-up; allow 120 s
# under TCG with the guest overloaded).
monitor_json() {
  local f=$1 count=$2 intv=$3 rc=0 lines
  # nice -10: under overload the observer must not be what is late (the loader is not
  # reniced: how fast it updates the depth is part of what is measured).
  nice10 timeout 120 scx_sisutil monitor --json --count "$count" --interval "$intv" > "$f" 2> "$f.err" || rc=$?
  [ "$rc" -eq 0 ] || fail "monitor --json --count $count exited $rc: $(head -c 300 "$f.err")"
  lines=$(grep -c '^{' "$f" || true)
  [ "$lines" -eq "$count" ] || fail "monitor --json --count $count printed $lines JSON lines"
}

# json_sum FILE FIELD: the sum of a top-level counter over every line of FILE.
json_sum() { jq -s "map(.$2) | add" "$1"; }

# Number of distinct last-level caches the guest kernel sees (L3, or the highest level).
guest_llcs() {
  local idx
  idx=$(ls -d /sys/devices/system/cpu/cpu0/cache/index* | sort -V | tail -n1)
  idx=$(basename "$idx")
  cat /sys/devices/system/cpu/cpu[0-9]*/cache/"$idx"/shared_cpu_list | sort -u | wc -l
}

info "$TEST_NAME on $(uname -r), $(nproc) CPUs, smp '${SISUTIL_SMP:-?}', $(guest_llcs) LLC(s)"
