#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Guest side of docs/results/shadow-depth-input-2026-11-28 (issue 36 item 2): as
# ../shadow-depth-inputs-2026-11-28/sweep.sh (hackbench -p -g 1 -f 2 -l LOOPS in a loop plus
# N of the guest's CPUs spinning, N = 0, 25, 50, 75, 100 % of them), each level's shadow
# window also recorded (--record) and the recording printed on stdout gzipped, in base64,
# between "REC <pct> BEGIN" and "REC <pct> END", so that the host keeps the wake-ups and
# replays them (scx_sisutil shadow --replay) with any later loader step.
#   tools/vm --no-build --kernel K --timeout 4000 --file sweep-rec.sh:/opt/sweep-rec.sh -- 'sh /opt/sweep-rec.sh [SECS] [ATTACH] [LOOPS] [LEVELS]'
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
  rm -f /tmp/rec.jsonl
  if scx_sisutil shadow --attach "$attach" --duration "$secs" --json --record /tmp/rec.jsonl > /tmp/s.json 2> /tmp/s.err; then
    printf 'LEVEL %s ' "$pct"
    tr -d '\n' < /tmp/s.json
    echo
    echo "REC $pct BEGIN"
    gzip -c /tmp/rec.jsonl | base64
    echo "REC $pct END"
  else
    echo "LEVEL $pct failed: $(tail -3 /tmp/s.err)"
  fi
  [ -n "$sp" ] && kill "$sp" 2>/dev/null && wait "$sp" 2>/dev/null
  pkill -f stress-ng 2>/dev/null
done
kill "$hb" 2>/dev/null
pkill hackbench 2>/dev/null
exit 0
