#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# util-depth.sh [LOAD_SECS]   (guest side of tests/vm.rs util_depth_*)
# The loader's SIS_UTIL depth follows the load, as seen through `monitor --json`
# (llcs[*].nr_idle_scan, sampled every 0.5 s):
#   idle guest           every LLC at nr_idle_scan == weight within IDLE_LIMIT s of attach
#   N CPU hogs           every LLC at 0 within IN_LIMIT s of the N hogs starting to run
#                        (SIGCONT, see below), and 0 while they run (at least MIN_LOADED
#                        reports, at most a fifth of them not 0)
#   load SIGSTOPped / SIGKILLed: every LLC back at its weight within OUT_LIMIT s
# (each limit stretches to the second report at or after it when the monitor's reports come
# further apart: see limit_for; and no phase ends before the reports its check reads have
# arrived: see wait_reports. So a guest that stalls for seconds - TCG on a busy host -
# makes the series sparse, never a check wrong; the checks bound by reports, not by time.)
# The script does nothing but sleep while the series is recorded (polling with jq would be
# load of its own under TCG); it is analysed afterwards and printed whole. Times are guest
# seconds (emulated under TCG).
. "$(dirname "$0")/lib.sh"

load_secs=${1:-8}
readonly IDLE_SECS=5 IDLE_LIMIT=5 PAUSE_SECS=5 IN_LIMIT=2.5 OUT_LIMIT=3.5 AFTER_SECS=5
# MIN_LOADED: reports under load from the first all-zero one on (it and 2 more). Under
# saturation the loader (nice 0, beside N nice-0 workers, which is what is measured) answers
# the monitor late: a rehearsal on a host at load ~10 got 4 reports in 120 s after SIGCONT.
# A phase waits for its reports at most HANG_S (lib.sh) guest seconds: then the monitor hung.
readonly MIN_LOADED=3
ncpu=$(nproc)
SERIES=/tmp/series

sched_start /tmp/sched.log
t_attach=$(now)

# Timestamped monitor lines: "<guest uptime> <json>" (read builtin: no fork per line).
(
  trap - ERR EXIT; set +e
  # nice -10 for the monitor and the loop that stamps its lines (both inherit it): the
  # observer must not lag behind what it observes under saturation, and a stamper starved
  # by the load would stamp a burst of old lines late.
  renice -n -10 -p "$BASHPID" > /dev/null
  # --stats-timeout HANG_S: the loader starved by the load answers late, and a late answer
  # is a sparse series (which the checks handle), not a reason for the observer to quit.
  scx_sisutil monitor --json --interval 0.5 --stats-timeout "$HANG_S" 2> /tmp/series.err |
    while IFS= read -r l; do read -r up _ < /proc/uptime; printf '%s %s\n' "$up" "$l"; done > "$SERIES"
) &
bg $!

# rows: "t n0 w0 u0 n1 w1 u1 ..." per monitor line, LLCs in numeric order.
rows() {
  paste -d' ' <(cut -d' ' -f1 "$SERIES") \
    <(cut -d' ' -f2- "$SERIES" | jq -r '[.llcs | to_entries | sort_by(.key | tonumber)[] |
        "\(.value.nr_idle_scan) \(.value.weight) \(.value.util_pct)"] | join(" ")')
}
# print_series: the series so far into /tmp/rows, printed with times since attach (also
# before a failed wait's FAIL line).
print_series() {
  rows > /tmp/rows
  echo "# time series (s since attach; per LLC: nr_idle_scan/weight util%):"
  awk -v a="$t_attach" '{
    line = sprintf("#   %6.1f", $1 - a)
    for (i = 2; i + 2 <= NF; i += 3) line = line sprintf("  %s/%s %5.1f%%", $i, $(i + 1), $(i + 2))
    print line }' /tmp/rows
}
# first_row COND FROM: time of the first row at or after FROM where COND (full|zero) holds
# on every LLC; empty if none.
first_row() {
  awk -v c="$1" -v from="$2" '
    $1 >= from {
      all = 1
      for (i = 2; i + 1 <= NF; i += 3)
        if ((c == "full" && $i != $(i + 1)) || (c == "zero" && $i != 0)) all = 0
      if (all && !found) { print $1; found = 1 }
    }' /tmp/rows
}
# nth_row N FROM: time of the N-th report at or after FROM (empty if fewer).
nth_row() { awk -v n="$1" -v from="$2" '$1 >= from && ++k == n { print $1 }' /tmp/rows; }
# limit_for SECS FROM: the time bound for a change that starts at FROM: SECS, or - when the
# reports came further apart than the monitor's 0.5 s - until the second report at or after
# FROM + SECS. A report is stamped when its line arrives, so the first one after a moment can
# carry values sampled before it; the second is the first that shows the state at FROM + SECS.
# Under TCG the guest crawls while 8 stress-ng workers start (one host thread runs all 8
# vCPUs): CI saw reports 2.4 s apart right after SIGCONT (13.7 s, 16.1 s) and the depth 0 at
# the second, 3.9 s after SIGCONT, against a limit of 2.5 s. The bound is what the series can
# show, not a guess of how long the guest stalls. With reports 0.5 s apart it is SECS + at
# most 1 s; the loader's filter reaches 0 in well under a second of loaded guest time (PELT's
# 33.55 ms half-life), so a depth that does not follow the load still fails.
limit_for() {
  local second
  second=$(nth_row 2 "$(plus "$2" "$1")")
  awk -v s="$1" -v a="$2" -v b="${second:-$2}" 'BEGIN { d = b - a; printf "%.1f", (d > s ? d : s) }'
}
rel() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
plus() { awk -v a="$1" -v s="$2" 'BEGIN { printf "%.3f", a + s }'; }
# wait_reports N FROM WHAT: sleep until the series holds N reports stamped at or after FROM
# (the reports a check of this phase reads; awk on the time column only, every 0.5 s); fails
# after HANG_S guest seconds (a hang guard: the monitor stopped reporting). Prints how many
# reports came and how long the wait took beyond the phase's own sleep.
wait_reports() {
  local n=$1 from=$2 what=$3 t dl k
  t=$(now); dl=$(deadline_in "$HANG_S")
  while k=$(awk -v f="$from" '$1 >= f { k++ } END { print k + 0 }' "$SERIES"); [ "$k" -lt "$n" ]; do
    before "$dl" || { print_series; fail "monitor: $k of $n reports $what after $HANG_S s (series: $(wc -l < "$SERIES") lines; $(tail -c 200 /tmp/series.err))"; }
    sleep 0.5
  done
  info "$n reports $what: waited $(since "$t") s more"
}

sleep "$IDLE_SECS"
wait_reports 2 "$(plus "$t_attach" "$IDLE_LIMIT")" "from $IDLE_LIMIT s after attach"
# The load must start at a known moment, but forking N hogs under TCG takes time of its own
# (stress-ng, until 2026-11-29, took seconds, tens on a busy host, to start its workers). So:
# start them (hogs_start: a session of their own, all up when it returns), SIGSTOP the group,
# let the guest go idle again, then SIGCONT: N running hogs at once. SIGKILL of the group
# ends the load at once too.
t_launch=$(now)
hogs_start "$ncpu"
kill -STOP -- "-$HOGS_PID"
t_stop=$(now)
info "$ncpu hogs up $(rel "$t_launch" "$t_stop") s after launch; stopped"
sleep "$PAUSE_SECS"
wait_reports 2 "$(plus "$t_stop" "$OUT_LIMIT")" "from $OUT_LIMIT s after SIGSTOP"
kill -CONT -- "-$HOGS_PID"
t_load=$(now)
sleep "$load_secs"
# the zero is due by the second report from IN_LIMIT on; MIN_LOADED more must follow it
wait_reports $((MIN_LOADED + 1)) "$(plus "$t_load" "$IN_LIMIT")" "from $IN_LIMIT s after SIGCONT"
kill -KILL -- "-$HOGS_PID"
t_off=$(now)
hogs_stop
sleep "$AFTER_SECS"
wait_reports 2 "$(plus "$t_off" "$OUT_LIMIT")" "from $OUT_LIMIT s after the kill"

print_series
echo "#   hogs launched at $(rel "$t_attach" "$t_launch") s, SIGSTOP at $(rel "$t_attach" "$t_stop") s, SIGCONT (load on) at $(rel "$t_attach" "$t_load") s, SIGKILL at $(rel "$t_attach" "$t_off") s"
n_rows=$(wc -l < /tmp/rows)
[ "$n_rows" -ge 10 ] || fail "only $n_rows monitor reports in $((IDLE_SECS + load_secs + AFTER_SECS)) s"

# reached CHECK KIND FROM LIMIT AFTER [UNTIL]: the first report at or after FROM with the
# KIND depth (full, zero) on every LLC - before UNTIL, when given - came at most LIMIT s
# after FROM (AFTER names that moment). Its time goes to REACHED_T, the delay to REACHED_S.
reached() {
  local check=$1 kind=$2 from=$3 limit=$4 after=$5 until=${6:-} what
  if [ "$kind" = full ]; then what="nr_idle_scan == weight"; else what="nr_idle_scan 0"; fi
  REACHED_T=$(first_row "$kind" "$from")
  [ -n "$REACHED_T" ] || fail "$check: $what never on every LLC after $after"
  if [ -n "$until" ]; then
    awk_true 't < u' -v t="$REACHED_T" -v u="$until" ||
      fail "$check: $what on every LLC only after the next phase began"
  fi
  REACHED_S=$(rel "$from" "$REACHED_T")
  awk_true 'd <= l' -v d="$REACHED_S" -v l="$limit" ||
    fail "$check: $what on every LLC only $REACHED_S s after $after (limit $limit)"
  ok "$check: $what on every LLC $REACHED_S s after $after (limit $limit)"
}

reached idle full "$t_attach" "$(limit_for "$IDLE_LIMIT" "$t_attach")" attach "$t_launch"
d_idle=$REACHED_S
reached saturated zero "$t_load" "$(limit_for "$IN_LIMIT" "$t_load")" SIGCONT
d_in=$REACHED_S t_zero=$REACHED_T
# While loaded, the depth stays at 0: count the reports between t_zero and the kill that are
# not 0 everywhere (printed, and one of them, or at most a fifth when there are more than 5,
# may differ: one report lands while the hogs start or die).
read -r n_load n_bad < <(awk -v a="$t_zero" -v b="$t_off" '
  $1 >= a && $1 < b { n++; for (i = 2; i + 1 <= NF; i += 3) if ($i != 0) { bad++; break } }
  END { print n + 0, bad + 0 }' /tmp/rows)
info "loaded reports after the first all-zero one: $n_load, not all zero: $n_bad"
[ "$n_load" -ge "$MIN_LOADED" ] ||
  fail "saturated: only $n_load reports under load after the first all-zero one (want >= $MIN_LOADED)"
awk_true 'b <= 1 || b * 5 <= n' -v b="$n_bad" -v n="$n_load" ||
  fail "saturated: $n_bad of $n_load reports under load had a non-zero depth"
ok "saturated: depth stayed 0 ($n_bad of $n_load reports differ, limit max(1, $n_load / 5))"

reached "load stopped" full "$t_stop" "$(limit_for "$OUT_LIMIT" "$t_stop")" SIGSTOP "$t_load"
d_stop=$REACHED_S
reached "load gone" full "$t_off" "$(limit_for "$OUT_LIMIT" "$t_off")" "the kill"
d_out=$REACHED_S
echo "# depth summary: full ${d_idle}s after attach; full ${d_stop}s after SIGSTOP; 0 ${d_in}s after SIGCONT; full ${d_out}s after SIGKILL"

sched_alive "at the end"
sched_stop TERM
expect_eq "exit status after SIGTERM" "$SCHED_RC" 0
check_dmesg_clean
pass
