# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# Helpers shared by every guest-side test script (tests/guest/*.sh, run by tests/vm.rs,
# tests/reliability.rs, tests/fairness.rs and tools/soak through tools/vm; in the guest they
# are in /opt/sisutil/tests, on PATH). Sourced by bash.
#
# Output conventions, which the Rust side (tests/common) relies on:
#   ok: <check>        one line per passed check; the test asserts that the expected ones
#                      appear, so a check that silently did not run fails the test too
#   FAIL: <why>        the first failed check; the script exits 1 right after it
#   FIGURE key=value   a measured figure (counts, durations) for the report
#   # ...              information (time series, counters, logs)
#   PASS <name>        the last line of a script whose checks all passed
# Every command failure that no check caught (set -e) also ends in a FAIL: line.

set -Eeuo pipefail

SCX=/sys/kernel/sched_ext
TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}
# The attach's hang guard (guest s at SPEED_REF, stretched for a slower guest like every
# guard_start wait): attaching is mostly BPF verification, emulated. It is a hang guard, not
# a measure: 60 s failed shapes_6_12 once at host load 87 ("not attached after start: state
# 'enabling' after 109.7 s"; the guest clock runs on while QEMU waits for the host), so it is
# 300 s, far above any attach seen; ATTACH_S and the "attached after" line report the time.
# tests/common passes it through tools/vm --env.
ATTACH_TIMEOUT=${VMTEST_ATTACH_TIMEOUT:-300}
# HANG_S: the guard on a step that must end (the scheduler exiting on a signal, sched_ext
# reaching a state): it tells a hang from a slow step, so it is generous - under TCG on a
# busy host the whole guest can stop for 5-10 s (CI saw monitor reports 2.4 s apart and
# guests idle for 5-10 s); the steps themselves took at most 3.4 s (exit after SIGTERM) and
# 0.8 s (disabled after exit) in the CI logs. A step that never ends still fails.
# HANG_S holds for a guest that runs at SPEED_REF loops/s or faster (guest_speed below); a
# slower guest gets proportionally more, HANG_MAX_S at most (guard_start/guard_over).
readonly HANG_S=120
SCHED_PID=
SCHED_LOG=
SCHED_RC=
BG_PIDS=()
# Kernel-initiated disable reasons a scenario accepts besides the clean one (hotplug adds
# "unregistered from the main kernel": the kernel ejects the scheduler to restart it).
SCX_OK_REASONS='unregistered from user space'

# Guest uptime in seconds (centiseconds resolution): all times below are guest times, which
# under TCG are emulated, not host seconds.
now() { cut -d' ' -f1 /proc/uptime; }
T0=$(now)
# Seconds since $1 (default: the start of the script), one decimal.
since() { awk -v a="${1:-$T0}" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# guest_speed: how fast the guest runs now, in iterations of an empty bash loop per guest
# second, in the RT class (chrt -f 50: no scheduler under test delays it, whatever it does to
# its tasks): it measures the CPU the host gives the guest's vCPUs, so a slow guest (a busy
# host, TCG) shows a low speed and a starved task does not. SPEED_LOOPS iterations: 0.5-0.7 s
# at SPEED_REF.
readonly SPEED_LOOPS=4000
guest_speed() {
  chrt -f 50 bash -c 'read -r a _ < /proc/uptime; for ((i = 0; i < $0; i++)); do :; done
    read -r b _ < /proc/uptime; a=${a/./}; b=${b/./}; d=$((10#$b - 10#$a))
    echo $(( $0 * 100 / (d > 0 ? d : 1) ))' "$SPEED_LOOPS" 2>/dev/null || echo 0
}
# The speed of the guests whose slowest waits HANG_S guards with its margin: 6.12 guests
# (8 vCPUs, TCG) beside two busy TCG guests and kernel builds, host load 11-21 on 2 cores,
# ran the loop at 5,900-10,400 iterations/s (1,700 once) and started stress-ng's 8 workers
# in 8.3-38 s. A guest slower than SPEED_REF gets HANG_S x SPEED_REF / its speed.
readonly SPEED_REF=6000 HANG_MAX_S=900
SPEED_BOOT=$(guest_speed)

# guard_start BASE: a wait starts now; its hang guard is BASE guest s at SPEED_REF or
# faster. guard_over: true once the guard has passed. Once BASE has passed it measures the
# guest's speed, and again every 30 guest s: the guard is BASE x SPEED_REF / the mean of the
# speeds measured (BASE at least, HANG_MAX_S at most), so a guest slow for a while gets more
# time and one that recovers does not keep it. guard_what: elapsed, guard, speeds (for the
# message: a starved task shows a normal speed, a slow guest a low one).
guard_start() { GUARD_T0=$(now) GUARD_BASE=$1 GUARD_S=$1 GUARD_SPEED='' GUARD_SUM=0 GUARD_N=0 GUARD_NEXT=$1; }
guard_over() {
  local e
  e=$(since "$GUARD_T0")
  awk_true "e >= g" -v e="$e" -v g="$GUARD_NEXT" || return 1
  GUARD_SPEED=$(guest_speed)
  GUARD_SUM=$((GUARD_SUM + GUARD_SPEED)) GUARD_N=$((GUARD_N + 1))
  GUARD_S=$(awk -v b="$GUARD_BASE" -v r="$SPEED_REF" -v s="$((GUARD_SUM / GUARD_N))" -v m="$HANG_MAX_S" \
    'BEGIN { g = (s > 0 && s < r) ? b * r / s : b; if (g > m) g = m; if (g < b) g = b; printf "%d", g }')
  e=$(since "$GUARD_T0")
  awk_true "e >= g" -v e="$e" -v g="$GUARD_S" && return 0
  GUARD_NEXT=$(awk -v e="$e" -v g="$GUARD_S" 'BEGIN { n = e + 30; if (n > g) n = g; printf "%.1f", n }')
  info "guest speed $GUARD_SPEED loops/s (mean of $GUARD_N: $((GUARD_SUM / GUARD_N)); < $SPEED_REF): hang guard now $GUARD_S s"
  return 1
}
guard_what() {
  echo "after $(since "$GUARD_T0") s (hang guard $GUARD_S s: $GUARD_BASE s at >= $SPEED_REF loops/s, stretched for a slower guest), guest speed ${GUARD_SPEED:-?} loops/s now (mean of $GUARD_N measured: $((GUARD_N ? GUARD_SUM / GUARD_N : 0))), $SPEED_BOOT at boot"
}

# nap SECS: wait SECS without starting a process (bash's read -t on a pipe that nobody
# writes). The waits of the scripts that judge a scheduler use it: a `sleep` is a new task
# that the scheduler under test must run, and one that starves it (tools/mutants --planted
# 2 queues every `sleep` process out of reach) would stop the judge with the judged.
exec {NAP_FD}<> <(:)
nap() { read -rt "$1" -u "$NAP_FD" _ || true; }

# before DEADLINE: true while the guest clock is before DEADLINE (from deadline_in SECS).
# Loops are bounded by time, not by iteration counts: under TCG on a busy host a
# `sleep 0.1` plus a fork can take a second.
deadline_in() { awk -v a="$(now)" -v s="$1" 'BEGIN { printf "%.2f", a + s }'; }
before() { awk -v n="$(now)" -v d="$1" 'BEGIN { exit !(n < d) }'; }

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
  fail "command failed (exit $rc) at $TEST_NAME line $line: $cmd"
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

# Stop what we started in the background, whatever happened (a leftover stress-ng would keep
# the guest from powering off promptly and distort the next step).
cleanup() {
  local p
  touch /tmp/rel-stop
  for p in "${BG_PIDS[@]+"${BG_PIDS[@]}"}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  pkill -TERM stress-ng 2>/dev/null || true
  [ -z "${HOGS_PID:-}" ] || kill -KILL -- "-$HOGS_PID" 2>/dev/null || true
  if [ -n "$SCHED_PID" ] && kill -0 "$SCHED_PID" 2>/dev/null; then
    kill -CONT "$SCHED_PID" 2>/dev/null || true
    kill -TERM "$SCHED_PID" 2>/dev/null || true
  fi
  rm -f /tmp/vmtest-stop
}
trap cleanup EXIT

pass() { echo "PASS $TEST_NAME"; }

# bg PID: remember a background job for cleanup.
bg() { BG_PIDS+=("$1"); }

# ---------------------------------------------------------------------------------------
# Assertions

# expect_eq WHAT GOT WANT
expect_eq() {
  [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
  ok "$1 = $3"
}

# expect_nonzero WHAT GOT_RC: the exit status must be non-zero.
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
# CPUs and caches

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

# Number of distinct last-level caches among the online CPUs.
guest_llcs() { llc_lists | wc -l; }

# ---------------------------------------------------------------------------------------
# sched_ext and the scheduler

scx_state() { cat "$SCX/state"; }
# root/ops on 7.x and 6.12; scx_ops_open! appends _VERSION_TARGET to the ops name.
scx_ops() { cat "$SCX/root/ops" 2>/dev/null || true; }

# sched_attached: the process runs and sched_ext is enabled with our ops (sisutil_*).
sched_attached() {
  kill -0 "$SCHED_PID" 2>/dev/null && [ "$(scx_state)" = enabled ] && [[ $(scx_ops) == sisutil_* ]]
}

# sched_wait_attached WHY [LIMIT_S]: wait (default ATTACH_TIMEOUT) until attached; the time
# it took goes to ATTACH_S.
sched_wait_attached() {
  local why=$1 limit=${2:-$ATTACH_TIMEOUT} t
  t=$(now); guard_start "$limit"
  until sched_attached; do
    kill -0 "$SCHED_PID" 2>/dev/null || fail "scx_sisutil exited $why (state '$(scx_state)')"
    ! guard_over ||
      fail "scx_sisutil not attached $why: state '$(scx_state)', ops '$(scx_ops)' $(guard_what)"
    nap 0.1
  done
  ATTACH_S=$(since "$t")
}

# sched_start LOG [ARGS...]: start scx_sisutil ARGS in the background (output appended to
# LOG) and wait until sched_ext is enabled with our ops.
sched_start() {
  SCHED_LOG=$1; shift
  scx_sisutil "$@" >> "$SCHED_LOG" 2>&1 &
  sched_started
}
# sched_start_nice10 LOG ARGS...: sched_start with the loader at nice -10, for the scripts
# that read its statistics under overload (features.sh, shards.sh): at nice 0 beside 16 hogs
# and 40 hackbench tasks its stats server answered the monitor after 5-13 s on 6.12 (the
# phases took 10-22 guest s for 4 s of reports). What they measure is the BPF side's
# decisions for the load's wake-ups; the loader only sums the per-CPU counters when asked.
sched_start_nice10() {
  SCHED_LOG=$1; shift
  # not the nice10 function: `FUNCTION &` runs in a forked bash, whose pid $! would be (its
  # child sh execs the scheduler), and SIGTERM would end that bash, not the scheduler
  sh -c "$NICE10_SH" nice10 scx_sisutil "$@" >> "$SCHED_LOG" 2>&1 &
  sched_started
}
# sched_started: the background job just started is the scheduler; wait until it attached.
sched_started() {
  SCHED_PID=$!
  sched_wait_attached "after start"
  info "attached after ${ATTACH_S} s: ops $(scx_ops) (pid $SCHED_PID)"
}

# sched_alive WHEN: the scheduler process runs and sched_ext is still enabled with our ops.
sched_alive() {
  kill -0 "$SCHED_PID" 2>/dev/null || fail "scx_sisutil exited $1"
  [ "$(scx_state)" = enabled ] || fail "sched_ext state '$(scx_state)' $1, want enabled"
  [[ $(scx_ops) == sisutil_* ]] || fail "ops '$(scx_ops)' $1, want sisutil_*"
  ok "still enabled $1"
}

# sched_stop SIG [TIMEOUT_S]: signal the scheduler and wait (default HANG_S) for it to exit;
# its exit status goes to SCHED_RC. Fails if it does not exit in time.
sched_stop() {
  local sig=$1 limit=${2:-$HANG_S} t
  t=$(now); guard_start "$limit"
  kill -"$sig" "$SCHED_PID"
  while kill -0 "$SCHED_PID" 2>/dev/null; do
    ! guard_over || fail "scx_sisutil still running after SIG$sig: $(guard_what)"
    nap 0.1
  done
  SCHED_RC=0
  wait "$SCHED_PID" || SCHED_RC=$?
  info "scx_sisutil exited $(since "$t") s after SIG$sig (limit $limit s), status $SCHED_RC"
  SCHED_PID=
}

# sched_stop_clean: SIGTERM -> exit status 0, sched_ext disabled, the log says why.
sched_stop_clean() {
  sched_stop TERM
  expect_eq "scx_sisutil exit status after SIGTERM" "$SCHED_RC" 0
  wait_state disabled "$HANG_S"
  tail -n 3 "$SCHED_LOG" | grep -q 'unregistered from user space' ||
    fail "the scheduler's last exit is not 'unregistered from user space'"
  ok "clean exit: unregistered from user space"
}

# wait_state STATE LIMIT_S: sched_ext reaches STATE within LIMIT_S seconds; prints how long.
wait_state() {
  local want=$1 limit=$2 t
  t=$(now); guard_start "$limit"
  while [ "$(scx_state)" != "$want" ]; do
    ! guard_over || fail "sched_ext state '$(scx_state)', want '$want': $(guard_what)"
    nap 0.1
  done
  ok "state $want within ${GUARD_S} s ($(since "$t") s)"
}

dump_sched_log() {
  [ -n "$SCHED_LOG" ] && [ -s "$SCHED_LOG" ] || return 0
  echo "# --- scx_sisutil log ($SCHED_LOG, last 100 lines) ---"
  tail -n 100 "$SCHED_LOG" | sed 's/^/#   sched| /'
}

# check_scx_exits: every 'sched_ext: BPF scheduler "..." disabled (REASON)' in the kernel
# log has a reason in SCX_OK_REASONS (|-separated: a stall, a BPF error, an invalid
# dispatch, ... are not); counts watchdog stalls separately.
check_scx_exits() {
  local all bad stalls
  all=$(dmesg | grep -E 'sched_ext: BPF scheduler ".*" disabled \(' || true)
  echo "# dmesg sched_ext disables:"
  printf '%s\n' "$all" | sed 's/^/#   /'
  stalls=$(printf '%s\n' "$all" | grep -c 'runnable task stall' || true)
  figure watchdog_stalls "$stalls"
  bad=$(printf '%s\n' "$all" | grep -v -E "\(($SCX_OK_REASONS)\)" | grep . || true)
  [ -z "$bad" ] || fail "sched_ext disabled a scheduler abnormally: $bad"
  figure scx_disables "$(printf '%s\n' "$all" | grep -c . || true)"
  ok "dmesg: every sched_ext disable was '${SCX_OK_REASONS//|/' or '}'"
}

# check_dmesg_clean: check_scx_exits with the clean unregistration as the only reason.
check_dmesg_clean() {
  SCX_OK_REASONS='unregistered from user space' check_scx_exits
  ok "dmesg: no abnormal sched_ext disable"
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
# Workloads

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

# await WHAT CMD...: wait until CMD succeeds (a fact a check reads, not a fixed sleep: a
# guest stalled under TCG may not have run the step yet), the hang guard HANG_S (stretched
# for a slow guest: guard_over) at most, then fail with "WHAT: not after E s (guard, guest
# speed)" and, if AWAIT_SEEN names a command, what it prints (what was seen); prints how
# long it took.
await() {
  local what=$1 t; shift
  t=$(now); guard_start "$HANG_S"
  until "$@"; do
    ! guard_over || fail "$what: not $(guard_what)${AWAIT_SEEN:+; seen: $($AWAIT_SEEN)}"
    nap 0.2
  done
  info "$what: after $(since "$t") s"
}

# await_line PID FILE REGEX WHAT: wait until FILE (the stderr of process PID) has a line
# matching REGEX, or PID has exited (the caller tells which with kill -0), HANG_S at most,
# then fail with "WHAT: not in HANG_S s" and the file's start.
await_line() {
  local pid=$1 file=$2 re=$3 what=$4
  guard_start "$HANG_S"
  until grep -q -- "$re" "$file"; do
    kill -0 "$pid" 2>/dev/null || return 0
    ! guard_over || fail "$what: not $(guard_what): $(head -c 300 "$file")"
    nap 0.2
  done
}

# stress_workers_up N [PID]: wait until N stress-ng CPU workers exist (under TCG stress-ng
# takes seconds, tens on a busy host, to start them: 8.3-38 s for 8 beside two busy guests),
# the hang guard at most (await); prints how long it took. Seen: the count each time it
# changed (COUNT@guest s). PID: stress-ng's, which must not exit first (its --timeout ran out
# before it had forked them all: then they never all exist, and the wait says so at once).
stress_workers_at_least() {
  local n
  n=$({ pgrep stress-ng-cpu || true; } | wc -l)
  [ "$n" = "$STRESS_LAST" ] || { STRESS_SEEN+=" $n@$(since "$STRESS_T0")"; STRESS_LAST=$n; }
  [ -z "$STRESS_PID" ] || kill -0 "$STRESS_PID" 2>/dev/null ||
    fail "stress-ng (pid $STRESS_PID) exited with $n of $1 workers up, $(since "$STRESS_T0") s after the wait began; workers seen (count@s):$STRESS_SEEN"
  [ "$n" -ge "$1" ]
}
stress_workers_seen() { echo "$STRESS_LAST of $1 workers; count@s:$STRESS_SEEN"; }
stress_workers_up() {
  STRESS_T0=$(now) STRESS_SEEN='' STRESS_LAST='' STRESS_PID=${2:-}
  AWAIT_SEEN="stress_workers_seen $1" await "stress-ng: $1 workers up" stress_workers_at_least "$1"
  info "stress-ng workers seen (count@s):$STRESS_SEEN"
}

# hogs_start N: N CPU hogs, each a fork of a small shell running an empty loop (always
# runnable, never sleeping: what stress-ng --cpu was to the scheduler here), in a process
# group of their own led by HOGS_PID; returns once all N exist: the leader writes
# /tmp/hogs.up after its last fork, and a fork that fails ends its shell ("can't fork",
# exit 2), which fails the wait at once. stress-ng under TCG took 8-72 s to fork 8-16
# workers (the first 8 s after launch; 72 s for 16 in features_live_6_12 at nice 19 beside
# two guests, 2026-11-29), with the wait's pgrep every 0.2 s competing with them (one pgrep
# beside 8 hogs took 5 s); 16 hogs take ~3 s. hogs_stop: SIGKILL of the group (cleanup
# does it too).
hogs_up() {
  [ ! -e /tmp/hogs.up ] || return 0
  kill -0 "$HOGS_PID" 2>/dev/null || fail "hogs: the shell forking them exited before its last fork"
  return 1
}
hogs_start() {
  rm -f /tmp/hogs.up
  # shellcheck disable=SC2016 # expanded by the hogs' shell
  setsid sh -c 'i=0; while [ "$i" -lt "$1" ]; do (while :; do :; done) & i=$((i + 1)); done
    : > /tmp/hogs.up; wait' hogs "$1" > /dev/null 2>&1 &
  HOGS_PID=$!
  await "hogs: $1 forked" hogs_up
}
hogs_stop() {
  [ -n "${HOGS_PID:-}" ] || return 0
  kill -KILL -- "-$HOGS_PID" 2>/dev/null || true
  wait "$HOGS_PID" 2>/dev/null || true
  HOGS_PID=
}

# overload_start: the overload of features.sh and shards.sh: one hackbench group (40 tasks)
# in a loop (hackbench_bg), then 2*nproc CPU hogs (hogs_start); returns once hackbench has
# completed a run and every hog exists. hackbench goes first: its first run's 40 forks took
# 20-25 s under TCG beside the hogs, on a guest not yet loaded they are quick.
# hogs_stop ends the hogs (the hackbench loop runs on: hackbench_bg_stop).
overload_start() {
  local n=$((2 * $(nproc)))
  info "overload: hackbench -g 1 -l 20 loop + $n CPU hogs"
  hackbench_bg -g 1 -l 20
  hackbench_bg_running
  hogs_start "$n"
}

# hackbench_bg_running: wait until the background loop has completed a run (its tasks are
# up and waking each other: under TCG the first run's 40 forks can take seconds), HANG_S
# at most.
hackbench_bg_running() {
  local t
  t=$(now); guard_start "$HANG_S"
  until [ -s /tmp/vmtest-hb.runs ]; do
    [ ! -s /tmp/vmtest-hb.fail ] || fail "background hackbench failed: $(head -n1 /tmp/vmtest-hb.fail)"
    ! guard_over || fail "background hackbench completed no run: $({ pgrep hackbench || true; } | wc -l) hackbench processes, $(guard_what)"
    nap 0.2
  done
  info "background hackbench: first run done after $(since "$t") s"
}

# hackbench_bg_stop: let the current run finish (up to 60 s, then kill the group), check
# that at least one run completed and none failed.
hackbench_bg_stop() {
  local runs dl
  touch /tmp/vmtest-stop
  dl=$(deadline_in 60)
  while kill -0 "$HB_PID" 2>/dev/null && before "$dl"; do nap 0.5; done
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

# nice10 CMD...: run CMD at nice -10 (busybox has renice, not nice): NICE10_SH, an sh
# script that renices itself and execs its arguments (sched_start_nice10 runs it too).
# shellcheck disable=SC2016 # expanded by sh
readonly NICE10_SH='renice -n -10 -p $$ > /dev/null || exit 127; exec "$@"'
nice10() {
  sh -c "$NICE10_SH" nice10 "$@"
}

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

# netperf_setup: netserver on loopback (TCP_RR needs it), listening before it returns:
# netserver puts itself in the background before it listens, and a netperf that finds no
# listener fails its run (a fixed 0.5 s was no wait for a fact under TCG; HANG_S guard;
# tcp-listening is a tools/guest helper on PATH).
netperf_setup() {
  pgrep -x netserver > /dev/null || netserver > /dev/null 2>&1
  await "netserver listening on port 12865" tcp-listening 12865
}

# ---------------------------------------------------------------------------------------
# Monitor output (one JSON object per line)

# monitor_json FILE COUNT INTERVAL: `scx_sisutil monitor --json` into FILE (no jq here: it
# is heavy under TCG, parse after the load); fails unless COUNT lines arrive. Under overload
# the loader (not reniced: how fast it updates the depth is part of what is measured)
# answers late - util-depth's rehearsal at host load ~10 got 4 reports in 120 s - and a late
# answer is no failure: each request may take HANG_S (--stats-timeout; the default 30 s and
# a fixed 120 s for the whole series were margins on the loader's pace under load), and the
# outer timeout only guards a monitor that hangs: the COUNT + 1 requests plus the intervals.
monitor_json() {
  local f=$1 count=$2 intv=$3 rc=0 lines guard
  guard=$(awk -v c="$count" -v i="$intv" -v h="$HANG_S" 'BEGIN { printf "%d", (c + 1) * h + c * i + 1 }')
  # nice -10: under overload the observer must not be what is late.
  nice10 timeout "$guard" scx_sisutil monitor --json --count "$count" --interval "$intv" \
    --stats-timeout "$HANG_S" > "$f" 2> "$f.err" || rc=$?
  [ "$rc" -eq 0 ] || fail "monitor --json --count $count exited $rc (hang guard $guard s): $(head -c 300 "$f.err")"
  lines=$(grep -c '^{' "$f" || true)
  [ "$lines" -eq "$count" ] || fail "monitor --json --count $count printed $lines JSON lines"
  [ ! -s "$f.err" ] || info "monitor --json --count $count said: $(head -c 300 "$f.err" | tr '\n' ' ')"
}

# json_sum FILE FIELD: the sum of a top-level counter over every line of FILE.
json_sum() { jq -s "map(.$2) | add" "$1"; }
# json_sums FILE KEY...: " KEY=SUM" for each KEY over FILE's JSON lines, in one jq (a jq per
# key took seconds of an emulated guest).
json_sums() {
  local f=$1; shift
  jq -n -j --slurpfile r "$f" '$ARGS.positional[] as $k | " \($k)=\([$r[][$k]] | add)"' --args "$@"
}

# hit_counters: the features' hit counters (hit_*), as the binary defines them.
hit_counters() { scx_sisutil --help-stats --json | jq -r '.counters[].name | select(startswith("hit_"))'; }

info "$TEST_NAME on $(uname -r), $(nproc) CPUs online ($(online_cpus)), smp '${SISUTIL_SMP:-?}', $(guest_llcs) LLC(s), guest speed $SPEED_BOOT loops/s (HANG_S $HANG_S s holds at >= $SPEED_REF)"
figure guest_speed_boot "$SPEED_BOOT"
