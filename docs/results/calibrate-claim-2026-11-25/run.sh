#!/bin/sh
# guest script: the calibrate example's load (docs/results/calibrate-2026-11-23/run.sh),
# one SIS_UTIL calibration of 20 s: the utilization buckets the wake-ups fall in
scx_sisutil >/tmp/sched.log 2>&1 &
S=$!
scx-wait enabled 30 || { cat /tmp/sched.log; exit 1; }
sleep 2
load() {
  while :; do
    hackbench -g 1 -f 2 -l 300 >/dev/null 2>&1
    sleep 0.3
    hackbench -g 2 -f 10 -l 100 >/dev/null 2>&1
    sleep 0.3
    hackbench -g 4 -l 50 >/dev/null 2>&1
  done
}
load & L=$!
scx_sisutil features SIS_UTIL NO_SIS_FIT >/dev/null
echo "\$ scx_sisutil calibrate --interval 20"
scx_sisutil calibrate --interval 20
kill $L; sleep 1; killall hackbench 2>/dev/null; sleep 1
kill -INT $S; wait $S; echo "sched exit $?"
