#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# rel-faults.sh [STOP_SECS]   (guest side of tests/reliability.rs faults_*, tools/soak)
# Loader faults, hostile inputs and privileges, in one boot:
#   1. `features` with no scheduler running: one-line error, exit 1.
#   2. SIGKILL of the loader: the kernel falls back to the fair class by itself (state
#      disabled within seconds), a hackbench completes; the killed instance leaves its
#      pinned feature map and its stats socket behind; `features` then refuses the stale
#      map (one line, exit 1); `monitor` waits (message) on the stale socket...
#   3. ...and connects once a new instance has started, which starts despite the stale
#      pin and socket; `features` lists and switches against the new instance.
#   4. As user nobody: listing or switching features and reading the stats fail with a
#      permission message and a non-zero status; nothing changed (checked as root).
#   5. SIGSTOP of the loader for STOP_SECS (default 10) seconds: the BPF side keeps working
#      on the last scan depths (still enabled, a hackbench completes, no watchdog exit),
#      then SIGCONT, statistics flow again, SIGTERM → exit 0.
. "$(dirname "$0")/lib.sh"

stop_secs=${1:-10}
PIN=/sys/fs/bpf/scx_sisutil/features
SOCK=/var/run/scx/root/stats
as_nobody() { su -s /bin/sh nobody -c "$1"; }

# run_capture CMD...: run, keep stdout+stderr in OUT and the status in RC (never fails)
run_capture() { RC=0; OUT=$("$@" 2>&1) || RC=$?; }

# expect_error WHAT PATTERN: the last run_capture failed with one line matching PATTERN
expect_error() {
  [ "$RC" -ne 0 ] || fail "$1: exit status 0, want non-zero (output: $OUT)"
  [ "$(printf '%s\n' "$OUT" | grep -c .)" -eq 1 ] || fail "$1: want one line, got: $OUT"
  grep -q -E "$2" <<<"$OUT" || fail "$1: '$OUT' does not match /$2/"
  ok "$1: exit $RC, '$OUT'"
}

# --- 1. no scheduler ---------------------------------------------------------------------
expect_eq "state at start" "$(scx_state)" disabled
run_capture scx_sisutil features
expect_error "features with no scheduler running" '^scx_sisutil: error: no running scx_sisutil'
run_capture scx_sisutil features NO_SIS_UTIL
expect_error "features NO_SIS_UTIL with no scheduler running" '^scx_sisutil: error: no running scx_sisutil'

# --- 2. SIGKILL ----------------------------------------------------------------------------
sched_start /tmp/rel-sched-a.log
kill -KILL "$SCHED_PID"
wait "$SCHED_PID" 2>/dev/null || true
SCHED_PID=
t=$(now)
wait_state disabled "$HANG_S"
figure sigkill_to_disabled_s "$(since "$t")"
timeout 300 hackbench -g 2 -l 20 > /dev/null || fail "hackbench after the SIGKILL failed"
ok "hackbench completes on the fair class after the SIGKILL"
[ -e "$PIN" ] || fail "the killed instance left no pinned map at $PIN (the stale case is not tested)"
[ -S "$SOCK" ] || fail "the killed instance left no stats socket at $SOCK (the stale case is not tested)"
ok "stale pin $PIN and stale socket $SOCK left behind"
run_capture scx_sisutil features
expect_error "features against the stale pin" 'no running scx_sisutil.*left over'
run_capture scx_sisutil features SIS_PROP
expect_error "features SIS_PROP against the stale pin" 'no running scx_sisutil.*left over'

# monitor on the stale socket: waits with a message, does not fail
timeout 300 scx_sisutil monitor --json --count 2 --interval 1 > /tmp/rel-mon.out 2> /tmp/rel-mon.err &
mon=$!
bg "$mon"
sleep 3
# its waiting line, not a fixed 3 s: a stalled guest may not have run the monitor yet
# (HANG_S guard, as in monitor.sh)
await_line "$mon" /tmp/rel-mon.err 'waiting for scx_sisutil' "the monitor's waiting message"
kill -0 "$mon" 2>/dev/null || fail "monitor exited on the stale socket: $(cat /tmp/rel-mon.err)"
ok "monitor waits on the stale socket: $(head -n 1 /tmp/rel-mon.err)"

# --- 3. a new instance over the leftovers ----------------------------------------------------
sched_start /tmp/rel-sched-b.log
wait "$mon" || fail "monitor exited $? after the new instance started: $(cat /tmp/rel-mon.err)"
expect_eq "JSON lines from the monitor that waited" "$(grep -c '^{' /tmp/rel-mon.out)" 2
run_capture scx_sisutil features
[ "$RC" -eq 0 ] || fail "features against the new instance: $OUT"
# one line per feature: as many as the words of the feature set the stats server reports
nfeat=$(timeout 120 scx_sisutil monitor --json --count 1 --interval 1 | jq -r .features | wc -w)
[ "$nfeat" -ge 9 ] || fail "the stats server reports $nfeat feature words"
expect_eq "features listed by the new instance" "$(printf '%s\n' "$OUT" | wc -l)" "$nfeat"
run_capture scx_sisutil features NO_SIS_UTIL SIS_PROP
[ "$RC" -eq 0 ] || fail "features NO_SIS_UTIL SIS_PROP: $OUT"
expect_eq "switch reported" "$(printf '%s\n' "$OUT" | tr '\n' ' ')" "SIS_UTIL -> off SIS_PROP -> on "
f=$(timeout 120 scx_sisutil monitor --json --count 1 --interval 1 | jq -r .features)
[[ $f == "NO_SIS_UTIL SIS_PROP "* ]] || fail "the new instance's stats report features '$f'"
ok "the new instance runs with the switched features: $f"

# --- 4. unprivileged ----------------------------------------------------------------------
before_feats=$(scx_sisutil features | md5sum)
expect_eq "id of the unprivileged user" "$(as_nobody 'id -u')" 65534
run_capture as_nobody 'scx_sisutil features'
expect_error "features as nobody" 'needs root'
run_capture as_nobody 'scx_sisutil features SIS_UTIL NO_SIS_CORE'
expect_error "features SIS_UTIL NO_SIS_CORE as nobody" 'needs root'
run_capture as_nobody 'timeout 60 scx_sisutil monitor --count 1 --interval 1'
expect_error "monitor as nobody" 'needs root'
expect_eq "features (md5 of the list) after the unprivileged attempts" "$(scx_sisutil features | md5sum)" "$before_feats"
sched_alive "after the unprivileged attempts"

# --- 5. SIGSTOP ----------------------------------------------------------------------------
kill -STOP "$SCHED_PID"
t=$(now)
timeout 300 hackbench -g 2 -l 20 > /dev/null &
hb=$!
while before "$(awk -v a="$t" -v s="$stop_secs" 'BEGIN { print a + s }')"; do
  [ "$(scx_state)" = enabled ] || fail "sched_ext state '$(scx_state)' $(since "$t") s into the SIGSTOP"
  sleep 1
done
wait "$hb" || fail "hackbench while the loader was stopped exited $?"
stopped=$(since "$t")
figure sigstop_s "$stopped"
ok "loader stopped ${stopped} s: still enabled, hackbench completed"
kill -CONT "$SCHED_PID"
sched_alive "after SIGCONT"
n=$(timeout 120 scx_sisutil monitor --json --count 1 --interval 1 | jq .search)
[ "$n" -ge 0 ] || fail "no statistics after SIGCONT"
ok "statistics flow again after SIGCONT (search=$n in 1 s)"

sched_stop_clean
check_scx_exits
pass
