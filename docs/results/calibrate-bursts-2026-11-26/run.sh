#!/bin/sh
# guest script: the calibrate example's SIS_UTIL calibration (20 s), first under the
# example's bursty load (hackbench runs with 0.3 s sleeps between them), then under the
# same hackbench groups run back to back without sleeps: does the share of wake-ups read
# at < 10 % utilization with no idle CPU depend on the bursts (the PELT-style filter
# lagging each burst's start)?
# shellcheck source=SCRIPTDIR/../calibrate-load.sh
. "$(dirname "$0")/../calibrate-load.sh"
sched_start
scx_sisutil features SIS_UTIL NO_SIS_FIT >/dev/null
nosleep() {
  while :; do
    hackbench -g 1 -f 2 -l 300 >/dev/null 2>&1
    hackbench -g 2 -f 10 -l 100 >/dev/null 2>&1
    hackbench -g 4 -l 50 >/dev/null 2>&1
  done
}
steady() {
  while :; do hackbench -g 4 -l 100000 >/dev/null 2>&1 || echo "hackbench failed $?"; done
}
for load in bursty nosleep steady; do
  $load & L=$!
  sleep 3
  echo "=== $load: scx_sisutil calibrate --interval 20 --json"
  scx_sisutil monitor --json --interval 20 --count 1 > /tmp/mon.json &
  M=$!
  scx_sisutil calibrate --interval 20 --json
  wait $M
  echo "--- monitor over the same 20 s"; cat /tmp/mon.json
  echo "--- loadavg $(cat /proc/loadavg)"
  kill $L; sleep 1; killall hackbench 2>/dev/null; sleep 2
done
sched_stop
