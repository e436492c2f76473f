#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# guest.sh   (guest side of this record; run by run.sh through tools/vm --bin)
# scx_sisutil --prog-stats under the loads tools/bench uses: a light hackbench loop (2
# groups, process-pipe) and overload at 100 % and 200 % of the CPUs in stress-ng int64
# hogs with schbench-lite's wake-ups on top (bench-sweep's wl_overload: -m 2 -t ncpu/4,
# 2000 us sleep, 1000 us CPU). Each phase: `scx_sisutil monitor --json --interval 5
# --count 3`, one JSON line per 5 s interval. Also: kernel.bpf_stats_enabled before, while
# and after (the fd restores it), and that the figures are empty without --prog-stats.
set -u
ncpu=$(nproc); t=$((ncpu / 4))
say() { echo "== $*"; }
sysctl_bpf() { cat /proc/sys/kernel/bpf_stats_enabled; }
mon() { scx_sisutil monitor --json --interval 5 --count 3 | sed "s/^/MON $1 /"; }

say "kernel $(uname -r), $ncpu CPUs; bpf_stats_enabled before: $(sysctl_bpf)"

# without --prog-stats: progs empty
scx_sisutil > /tmp/sched0.log 2>&1 &
sp=$!
scx-wait enabled 60 || { cat /tmp/sched0.log; exit 1; }
say "without --prog-stats: bpf_stats_enabled $(sysctl_bpf); progs: $(scx_sisutil monitor --json --interval 1 --count 1 | jq -c .progs)"
kill -INT $sp; wait $sp; scx-wait disabled 60

scx_sisutil --prog-stats > /tmp/sched.log 2>&1 &
sp=$!
scx-wait enabled 60 || { cat /tmp/sched.log; exit 1; }
say "with --prog-stats: bpf_stats_enabled $(sysctl_bpf)"

say "idle"
mon idle

say "hackbench -g 2 -l 200 (process-pipe) in a loop"
( while :; do hackbench -g 2 -l 200 > /dev/null 2>&1; done ) &
hb=$!
sleep 2
mon hackbench
kill $hb; wait $hb 2>/dev/null; pkill -x hackbench; sleep 1

for load in 100 200; do
  n=$((ncpu * load / 100))
  say "overload $load: stress-ng --cpu $n --cpu-method int64 + schbench-lite -m 2 -t $t -s 2000 -c 1000"
  renice -20 -p $$ > /dev/null 2>&1
  stress-ng --cpu "$n" --cpu-method int64 --quiet > /dev/null 2>&1 &
  hog=$!
  for i in $(seq 300); do
    read -r _ _ _ r _ < /proc/loadavg
    [ "${r%/*}" -gt "$n" ] && break
    sleep 0.2
  done
  say "hogs running: $(cut -d' ' -f4 /proc/loadavg)"
  schbench-lite -m 2 -t "$t" -r 30 -s 2000 -c 1000 > /tmp/schb.$load 2>&1 &
  sb=$!
  sleep 2
  renice -20 -p $BASHPID > /dev/null 2>&1
  mon "overload$load"
  kill $sb 2>/dev/null; wait $sb 2>/dev/null
  kill $hog; wait $hog 2>/dev/null; pkill -x stress-ng; sleep 2
done

kill -INT $sp; wait $sp; rc=$?
scx-wait disabled 60
say "scheduler exit $rc; bpf_stats_enabled after: $(sysctl_bpf)"
grep -i "error\|prog" /tmp/sched.log | head -5
