#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Guest side of this folder's measurement (issue 36 item 2): `scx_sisutil shadow`'s depth
# block and its inputs under hackbench (pipes, 1 group of 2+2 tasks, in a loop) plus N of
# the guest's CPUs spinning (stress-ng --cpu N, 100 %), N = 0, 25, 50, 75, 100 % of them.
# LOOPS: hackbench's -l per run (default 2000: a new run, 4 new tasks, every few hundred ms
# here; 10000000: one run for the whole sweep, no forks). LEVELS: the spinning levels.
# One JSON line per level on stdout, prefixed "LEVEL <pct> ". Run from the host:
#   tools/vm --no-build --kernel K --timeout 3000 --file sweep.sh:/opt/sweep.sh -- 'sh /opt/sweep.sh [SECS] [ATTACH] [LOOPS] [LEVELS]'
secs=${1:-8}
attach=${2:-tracepoint}
loops=${3:-2000}
levels=${4:-0 25 50 75 100}
ncpu=$(nproc)
( while :; do hackbench -p -g 1 -f 2 -l "$loops" > /dev/null 2>&1; done ) &
hb=$!
for pct in $levels; do
  n=$((ncpu * pct / 100))
  sp=""
  if [ "$n" -gt 0 ]; then
    stress-ng --cpu "$n" --timeout 3000s > /dev/null 2>&1 &
    sp=$!
  fi
  sleep 3
  if scx_sisutil shadow --attach "$attach" --duration "$secs" --json > /tmp/s.json 2> /tmp/s.err; then
    printf 'LEVEL %s ' "$pct"
    tr -d '\n' < /tmp/s.json
    echo
  else
    echo "LEVEL $pct failed: $(tail -3 /tmp/s.err)"
  fi
  [ -n "$sp" ] && kill "$sp" 2>/dev/null && wait "$sp" 2>/dev/null
  pkill -f stress-ng 2>/dev/null
done
kill "$hb" 2>/dev/null
pkill hackbench 2>/dev/null
exit 0
