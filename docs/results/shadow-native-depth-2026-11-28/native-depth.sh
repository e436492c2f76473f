#!/bin/bash
# native-depth.sh OUT: shadow natively on the host (6.18, tracepoint) under hackbench + N spinners (N = 0, 1, 2 of 2 CPUs)
out=$1; mkdir -p "$out"; bin=/work/main/target/release/scx_sisutil
for n in 0 1 2; do
  hackbench -g 1 -l 100000000 > /dev/null 2>&1 & hb=$!
  [ "$n" -gt 0 ] && { stress-ng --cpu "$n" --timeout 60s > /dev/null 2>&1 & sp=$!; }
  sleep 3
  "$bin" shadow --duration 30 --json --dump --record "$out/native-$n.jsonl" > "$out/native-$n.json" 2> "$out/native-$n.err"
  echo "n=$n rc=$?"
  kill $hb ${sp:-} 2>/dev/null; pkill -KILL hackbench; pkill stress-ng; sp=; sleep 2
done
