#!/bin/sh
# guest script: the calibrate example's load (docs/results/calibrate-2026-11-23/run.sh),
# one SIS_UTIL calibration of 20 s: the utilization buckets the wake-ups fall in
# shellcheck source=SCRIPTDIR/../calibrate-load.sh
. "$(dirname "$0")/../calibrate-load.sh"
sched_start
bursty & L=$!
scx_sisutil features SIS_UTIL NO_SIS_FIT >/dev/null
echo "\$ scx_sisutil calibrate --interval 20"
scx_sisutil calibrate --interval 20
kill $L; sleep 1; killall hackbench 2>/dev/null; sleep 1
sched_stop
