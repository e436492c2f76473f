#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Guest script: the longest runnable -> running waits under a steady hackbench of 160
# nice-0 tasks (scx_sisutil, then EEVDF), by two instruments: `scx_sisutil latency`
# (tracepoints) and the kernel's own per-task run_delay (/proc/PID/schedstat, sched_info,
# kept by the core scheduler for every class). A wait the tracer reports for a task
# must show in that task's run_delay over the same window.
steady() { while :; do hackbench -g 4 -l 100000 >/dev/null 2>&1; done; }
snap() { # pid run_delay_ns timeslices comm, every task
  for d in /proc/[0-9]*/task/[0-9]*; do
    read a b c < $d/schedstat 2>/dev/null && read n < $d/comm 2>/dev/null && echo "${d##*/} $b $c $n"
  done > $1
}
for sched in sisutil eevdf; do
  if [ $sched = sisutil ]; then
    scx_sisutil >/tmp/sched.log 2>&1 &
    S=$!
    scx-wait enabled 30 || { cat /tmp/sched.log; exit 1; }
  fi
  sleep 1
  steady & L=$!
  sleep 3
  echo "=== $sched: scx_sisutil latency --duration 25 --json"
  snap /tmp/ss0
  scx_sisutil latency --duration 25 --json > /tmp/lat.json 2>/tmp/lat.err
  snap /tmp/ss1
  cat /tmp/lat.json; echo
  pid=$(grep -o '"max_pid":[0-9]*' /tmp/lat.json | tail -1 | cut -d: -f2)
  # per task: run_delay growth (ms) and timeslices over the tracer's whole window
  awk 'NR == FNR { d[$1] = $2; n[$1] = $3; next }
       ($1 in d) { printf "%.1f %d %s %s\n", ($2 - d[$1]) / 1e6, $3 - n[$1], $1, $4 }' \
    /tmp/ss0 /tmp/ss1 | sort -rn > /tmp/growth
  echo "schedstat, the tracer's longest ($pid): run_delay +ms, timeslices, pid, comm:"
  awk -v p=$pid '$3 == p' /tmp/growth
  echo "schedstat, largest run_delay growth over the window:"; head -3 /tmp/growth
  echo "schedstat, per-CPU kworkers, largest:"; grep ' kworker/[0-9]*:' /tmp/growth | head -3
  echo "--- loadavg $(cat /proc/loadavg)"
  kill $L; sleep 1; killall hackbench 2>/dev/null; sleep 2
  [ $sched = sisutil ] && { kill -INT $S; wait $S; echo "sched exit $?"; grep -v INFO /tmp/sched.log | tail -3; }
done
:
