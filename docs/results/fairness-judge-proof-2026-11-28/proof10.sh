#!/bin/bash
# #33 item 4 on the final tree (rel-shapes fix 090b6f8 and later): rounds of fair_hogs20_7 +
# fair_hogs20_shards_7 (one cargo test, 2 threads) beside two shapes_6_12 (two cargo tests),
# all at nice 19, plus a nice-19 host spinner: every guest beside >= 3 others. Waits while
# $pause exists.
cd /work/wt/proof || exit 1
export BPF_CLANG=clang-19
out=/work/notes/proof/p13
pause=/work/notes/proof/pause
mkdir -p $out
for i in $(seq ${1:-1} 10); do
  while [ -e $pause ]; do sleep 5; done
  echo "round $i start $(date +%T) $(git -C /work/wt/proof log --oneline -1 | cut -c1-7)" > $out/round
  nice -n 19 sh -c "while :; do :; done" & hog=$!
  s=$(date +%s); l0=$(cut -d' ' -f1 /proc/loadavg)
  nice -n 19 cargo test --release --locked --test fairness -- --exact fair_hogs20_7 fair_hogs20_shards_7 --test-threads=2 --nocapture > $out/fair-$i.log 2>&1 & a=$!
  nice -n 19 cargo test --release --locked --test reliability -- --exact shapes_6_12 --nocapture > $out/shapes-$i.log 2>&1 & b=$!
  sleep 20
  nice -n 19 cargo test --release --locked --test reliability -- --exact shapes_6_12 --nocapture > $out/shapes2-$i.log 2>&1 & c=$!
  ( while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null || kill -0 $c 2>/dev/null; do cut -d' ' -f1 /proc/loadavg; sleep 10; done ) > $out/load-$i.txt &
  wait $a; ra=$?; wait $b; rb=$?; wait $c; rc=$?; kill $hog
  [ $ra = 0 ] && [ $rb = 0 ] && [ $rc = 0 ] || cp -a /work/wt/proof/target/vm-logs $out/vm-logs-$i 2>/dev/null
  l=$(sort -n $out/load-$i.txt | awk '{a[NR]=$1} END{print "min " a[1] " median " a[int((NR+1)/2)] " max " a[NR]}')
  w=$(grep -o "nice 0: [0-9]* wake-ups, p99 [0-9.]* us, max [0-9.]* us" $out/fair-$i.log | sed 's/.*max \([0-9.]*\) us/\1/' | paste -sd/)
  echo "$i $(git -C /work/wt/proof log --oneline -1 | cut -c1-7) fair_rc=$ra shapes_rc=$rb shapes2_rc=$rc $(( $(date +%s)-s ))s load_start=$l0 load: $l nice0_max_us: $w" >> $out/summary
  echo "round $i done $(date +%T)" > $out/round
done
