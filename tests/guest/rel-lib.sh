# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# Helpers for the reliability scenarios (tests/guest/rel-*.sh, run by tests/reliability.rs
# and tools/soak through tools/vm; in the guest they are in /opt/sisutil/tests, on PATH).
# Sourced by bash.
#
# Output conventions, which tests/reliability.rs relies on:
#   ok: <check>        one line per passed check (the Rust side asserts the expected ones
#                      appear, so a check that silently did not run fails the test)
#   FAIL: <why>        the first failed check; the script exits 1 right after it
#   FIGURE key=value   a measured figure (counts, durations) for the report
#   # ...              information (logs, counters)
#   PASS <name>        the last line of a script whose checks all passed

set -Eeuo pipefail

SCX=/sys/kernel/sched_ext
REL_NAME=${REL_NAME:-$(basename "$0" .sh)}
SCHED_PID=
SCHED_LOG=
SCHED_RC=
BG_PIDS=()
# Kernel-initiated disable reasons a scenario accepts besides the clean one (hotplug adds
# "unregistered from the main kernel": the kernel ejects the scheduler to restart it).
SCX_OK_REASONS='unregistered from user space'

# Guest uptime in seconds. All durations below are guest times: under TCG they are emulated
# time, not a measure of speed.
now() { cut -d' ' -f1 /proc/uptime; }
T0=$(now)
since() { awk -v a="${1:-$T0}" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# later SECS: the uptime SECS seconds from now (for loop deadlines)
later() { awk -v a="$(now)" -v s="$1" 'BEGIN { printf "%.2f", a + s }'; }
# before T: true while the uptime is below T
before() { awk -v n="$(now)" -v e="$1" 'BEGIN { exit !(n < e) }'; }

info() { echo "# [$(since)s] $*"; }
ok() { echo "ok: $*"; }
figure() { echo "FIGURE $1=$2"; }

fail() {
  echo "FAIL: $*"
  dump_sched_log
  echo "# --- dmesg (sched_ext, hotplug) ---"
  dmesg | grep -E 'sched_ext|smpboot|CPU [0-9]+ is now offline' | tail -n 40 | sed 's/^/#   /' || true
  exit 1
}

# An unexpected command failure (set -e) must not look like a pass or a silent exit.
on_err() {
  local rc=$? line=$1 cmd=$2
  trap - ERR
  fail "command failed (exit $rc) at $REL_NAME line $line: $cmd"
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

# Stop what we started, whatever happened: a leftover stress-ng would keep the guest from
# powering off promptly.
cleanup() {
  local p
  touch /tmp/rel-stop
  for p in "${BG_PIDS[@]+"${BG_PIDS[@]}"}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  pkill -TERM stress-ng 2>/dev/null || true
  if [ -n "$SCHED_PID" ] && kill -0 "$SCHED_PID" 2>/dev/null; then
    kill -CONT "$SCHED_PID" 2>/dev/null || true
    kill -TERM "$SCHED_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

pass() { echo "PASS $REL_NAME"; }
bg() { BG_PIDS+=("$1"); }

expect_eq() {
  [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
  ok "$1 = $3"
}

# ---------------------------------------------------------------------------------------
# sched_ext state and the scheduler process

scx_state() { cat "$SCX/state"; }
scx_ops() { cat "$SCX/root/ops" 2>/dev/null || true; }
online_cpus() { cat /sys/devices/system/cpu/online; }
# Number of CPUs in a cpulist such as 0-2,4,6-7
cpulist_count() { awk -F, '{ n = 0; for (i = 1; i <= NF; i++) { split($i, r, "-"); n += (r[2] == "" ? 1 : r[2] - r[1] + 1) } print n }' <<<"$1"; }
# Expand a cpulist to one CPU per line
cpulist_expand() { awk -F, '{ for (i = 1; i <= NF; i++) { split($i, r, "-"); hi = (r[2] == "" ? r[1] : r[2]); for (c = r[1]; c <= hi; c++) print c } }' <<<"$1"; }

# Distinct last-level caches among the online CPUs, one cpulist per line.
llc_lists() {
  local c idx
  for c in $(cpulist_expand "$(online_cpus)"); do
    idx=$(ls -d /sys/devices/system/cpu/cpu"$c"/cache/index* | sort -V | tail -n1)
    cat "$idx/shared_cpu_list"
  done | sort -u
}

# sched_attached: the process runs and sched_ext is enabled with our ops.
sched_attached() {
  kill -0 "$SCHED_PID" 2>/dev/null && [ "$(scx_state)" = enabled ] && [[ $(scx_ops) == sisutil_* ]]
}

# sched_wait_attached WHY [LIMIT_S]: wait (default 60 s: TCG on a busy host) until attached.
sched_wait_attached() {
  local why=$1 limit=${2:-60} i=0 t
  t=$(now)
  until sched_attached; do
    kill -0 "$SCHED_PID" 2>/dev/null || fail "scx_sisutil exited $why (state '$(scx_state)')"
    [ $i -lt $((limit * 10)) ] || fail "scx_sisutil not attached ${limit} s $why (state '$(scx_state)', ops '$(scx_ops)')"
    sleep 0.1; i=$((i + 1))
  done
  ATTACH_S=$(since "$t")
}

# sched_start LOG [ARGS...]: start scx_sisutil ARGS in the background, wait for the attach.
sched_start() {
  SCHED_LOG=$1; shift
  scx_sisutil "$@" >> "$SCHED_LOG" 2>&1 &
  SCHED_PID=$!
  sched_wait_attached "after start"
  info "attached after ${ATTACH_S} s: ops $(scx_ops) (pid $SCHED_PID)"
}

# sched_alive WHEN: the scheduler process runs and sched_ext is still enabled.
sched_alive() {
  kill -0 "$SCHED_PID" 2>/dev/null || fail "scx_sisutil exited $1"
  [ "$(scx_state)" = enabled ] || fail "sched_ext state '$(scx_state)' $1, want enabled"
  [[ $(scx_ops) == sisutil_* ]] || fail "ops '$(scx_ops)' $1, want sisutil_*"
  ok "still enabled $1"
}

# sched_stop SIG [TIMEOUT_S]: signal the scheduler, wait for its exit (status in SCHED_RC).
sched_stop() {
  local sig=$1 limit=${2:-30} i=0 t
  t=$(now)
  kill -"$sig" "$SCHED_PID"
  while kill -0 "$SCHED_PID" 2>/dev/null; do
    [ $i -lt $((limit * 10)) ] || fail "scx_sisutil still running ${limit} s after SIG$sig"
    sleep 0.1; i=$((i + 1))
  done
  SCHED_RC=0
  wait "$SCHED_PID" || SCHED_RC=$?
  info "scx_sisutil exited $(since "$t") s after SIG$sig, status $SCHED_RC"
  SCHED_PID=
}

# sched_stop_clean: SIGTERM → exit status 0, sched_ext disabled, the log says why.
sched_stop_clean() {
  sched_stop TERM
  expect_eq "scx_sisutil exit status after SIGTERM" "$SCHED_RC" 0
  wait_state disabled 10
  tail -n 3 "$SCHED_LOG" | grep -q 'unregistered from user space' ||
    fail "the scheduler's last exit is not 'unregistered from user space'"
  ok "clean exit: unregistered from user space"
}

# wait_state STATE LIMIT_S
wait_state() {
  local want=$1 limit=$2 i=0 t
  t=$(now)
  while [ "$(scx_state)" != "$want" ]; do
    [ $i -lt $((limit * 10)) ] || fail "sched_ext state '$(scx_state)' after ${limit} s, want '$want'"
    sleep 0.1; i=$((i + 1))
  done
  ok "state $want within ${limit} s ($(since "$t") s)"
}

dump_sched_log() {
  [ -n "$SCHED_LOG" ] && [ -s "$SCHED_LOG" ] || return 0
  echo "# --- scx_sisutil log ($SCHED_LOG, last 60 lines) ---"
  tail -n 60 "$SCHED_LOG" | sed 's/^/#   sched| /'
}

# check_scx_exits: every 'sched_ext: BPF scheduler "..." disabled (REASON)' in the kernel
# log has a reason in SCX_OK_REASONS (|-separated); counts watchdog stalls separately.
check_scx_exits() {
  local all bad stalls
  all=$(dmesg | grep -E 'sched_ext: BPF scheduler ".*" disabled \(' || true)
  stalls=$(printf '%s\n' "$all" | grep -c 'runnable task stall' || true)
  figure watchdog_stalls "$stalls"
  bad=$(printf '%s\n' "$all" | grep -v -E "\(($SCX_OK_REASONS)\)" | grep . || true)
  [ -z "$bad" ] || fail "sched_ext disabled a scheduler abnormally: $bad"
  figure scx_disables "$(printf '%s\n' "$all" | grep -c . || true)"
  ok "dmesg: every sched_ext disable was '${SCX_OK_REASONS//|/' or '}'"
}

# print_events: the kernel's sched_ext event counters (7.x: root/events; 6.12 has none).
# Must run while the scheduler is attached (root/ goes away with it).
print_events() {
  if [ -r "$SCX/root/events" ]; then
    echo "# sched_ext events ($SCX/root/events):"
    sed 's/^/#   /' "$SCX/root/events"
    while read -r k v; do figure "event_$k" "$v"; done < "$SCX/root/events"
  else
    info "no $SCX/root/events on $(uname -r) (counters exist from 6.16 on)"
    figure events none
  fi
}

# Forks since boot (the 'processes' line of /proc/stat).
forks_total() { awk '/^processes/ { print $2 }' /proc/stat; }

# ---------------------------------------------------------------------------------------
# Background workloads. Each loop runs until /tmp/rel-stop exists, counts its runs and its
# failures in /tmp/rel-NAME.{runs,fail}; loads_stop checks them.

LOADS=()

# loop_bg NAME CMD: run CMD (a shell command line) back to back in the background.
loop_bg() {
  local name=$1 cmd=$2
  rm -f "/tmp/rel-$name.runs" "/tmp/rel-$name.fail"
  : > "/tmp/rel-$name.runs"
  (
    trap - ERR EXIT; set +e
    while [ ! -e /tmp/rel-stop ]; do
      out=$(timeout 300 sh -c "$cmd" 2>&1); rc=$?
      if [ $rc -eq 0 ]; then echo >> "/tmp/rel-$name.runs"
      else printf 'exit %s: %s\n' "$rc" "$(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')" >> "/tmp/rel-$name.fail"; fi
    done
  ) &
  bg $!
  LOADS+=("$name:$!")
}

loads_start() { rm -f /tmp/rel-stop; }

# loads_stop: stop every loop (the current runs finish), report runs, fail on failures.
loads_stop() {
  local l name pid runs
  touch /tmp/rel-stop
  for l in "${LOADS[@]+"${LOADS[@]}"}"; do
    name=${l%%:*}; pid=${l#*:}
    wait "$pid" 2>/dev/null || true
    runs=$(wc -l < "/tmp/rel-$name.runs")
    figure "runs_$name" "$runs"
    if [ -s "/tmp/rel-$name.fail" ]; then fail "$name failed: $(head -n 1 "/tmp/rel-$name.fail")"; fi
    [ "$runs" -gt 0 ] || fail "$name never completed a run"
  done
  LOADS=()
  ok "background loads completed runs, none failed"
}

# netperf_setup: netserver on loopback (TCP_RR needs it).
netperf_setup() {
  pgrep -x netserver > /dev/null || netserver > /dev/null 2>&1
  sleep 0.5
}

info "$REL_NAME on $(uname -r), $(nproc) CPUs online ($(online_cpus)), smp '${SISUTIL_SMP:-?}', $(llc_lists | wc -l) LLC(s)"
