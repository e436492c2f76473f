#!/bin/sh
# The shared part of the calibrate guest scripts (calibrate-2026-11-23,
# calibrate-claim-2026-11-25, calibrate-bursts-2026-11-26: each run.sh sources it). It holds
# the lines they ran alike, unchanged: in the guest it goes along as another --file,
#   --file docs/results/calibrate-load.sh:/opt/sisutil/calibrate-load.sh
# beside --file RUN.sh:/opt/sisutil/files/run.sh, so that "$(dirname "$0")/.." finds it in
# the guest as in the repository.

# sched_start: the scheduler in the background (its pid in S, its log /tmp/sched.log),
# attached, then 2 s to settle
sched_start() {
  scx_sisutil >/tmp/sched.log 2>&1 &
  S=$!
  scx-wait enabled 30 || { cat /tmp/sched.log; exit 1; }
  sleep 2
}

# bursty: the calibrate example's mixed hackbench load, three short runs with 0.3 s sleeps
# between them, looping until killed
bursty() {
  while :; do
    hackbench -g 1 -f 2 -l 300 >/dev/null 2>&1
    sleep 0.3
    hackbench -g 2 -f 10 -l 100 >/dev/null 2>&1
    sleep 0.3
    hackbench -g 4 -l 50 >/dev/null 2>&1
  done
}

# sched_stop: SIGINT to the scheduler, its exit status
sched_stop() {
  kill -INT "$S"; wait "$S"; echo "sched exit $?"
}
