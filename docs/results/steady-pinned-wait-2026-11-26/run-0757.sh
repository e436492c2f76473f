#!/bin/sh
# guest script: does the scheduler's own loader get the CPU under a steady hackbench of
# 160 nice-0 tasks on 8 CPUs? scx_sisutil's waits (latency tracer, per pid of the
# longest) and the stats server's answers, then the same load under EEVDF.
steady() { while :; do hackbench -g 4 -l 100000 >/dev/null 2>&1; done; }
for sched in sisutil; do
  if [ $sched = sisutil ]; then
    scx_sisutil >/tmp/sched.log 2>&1 &
    S=$!
    scx-wait enabled 30 || { cat /tmp/sched.log; exit 1; }
    echo "loader pid $S; threads: $(ls /proc/$S/task | tr '\n' ' ')"
  fi
  sleep 1
  steady & L=$!
  sleep 3
  [ $sched = sisutil ] && { scx_sisutil monitor --interval 5 --count 4 > /tmp/mon.txt 2>&1 & M=$!; }
  echo "=== $sched: scx_sisutil latency --duration 25 --json"
  scx_sisutil latency --duration 25 --json > /tmp/lat.json 2>/tmp/lat.err
  python3 -c "
import json; d=json.load(open('/tmp/lat.json'))
for l in d['levels']+[d['all']]: print(l['nice'], l['count'], 'p99', round(l['p99_us']/1000,1), 'max', round(l['max_us']/1000,1), 'ms pid', l['max_pid'], 'pending', l['pending'], round(l['pending_max_us']/1000,1))
" 2>/dev/null || { cat /tmp/lat.json; cat /tmp/lat.err; }
  [ $sched = sisutil ] && { wait $M; echo "--- monitor (4 x 5 s)"; cat /tmp/mon.txt; }
  echo "--- loadavg $(cat /proc/loadavg)"
  for pid in $(grep -o '"max_pid":[0-9]*' /tmp/lat.json | sort -u | cut -d: -f2); do
    echo "--- pid $pid: $(cat /proc/$pid/comm 2>/dev/null) policy/prio: $(awk '{print "nice",$19,"policy",$41}' /proc/$pid/stat 2>/dev/null) $(taskset -p $pid 2>&1) flags $(awk '{print $9}' /proc/$pid/stat 2>/dev/null)"
  done
  kill $L; sleep 1; killall hackbench 2>/dev/null; sleep 2
  [ $sched = sisutil ] && { kill -INT $S; wait $S; echo "sched exit $?"; tail -5 /tmp/sched.log; }
done
