#!/bin/bash
# #33 item 4 on 5bdf93d (the judge at nice -20), on the instruction clock: 10 rounds; each round: fair_hogs20_7 + fair_hogs20_shards_7
# (one cargo test, 2 threads) beside shapes_6_12 (another cargo test): every guest beside two
# others, all at nice 19, plus a nice-19 host spinner (load >= 4). Waits while $pause exists.
cd /work/wt/proof || exit 1
export BPF_CLANG=clang-19
out=/work/notes/proof/p12
pause=/work/notes/proof/pause
mkdir -p $out
for i in $(seq ${1:-1} 10); do
  while [ -e $pause ]; do sleep 5; done
  echo "round $i start $(date +%T)" > $out/round
  nice -n 19 sh -c "while :; do :; done" & hog=$!
  s=$(date +%s); l0=$(cut -d' ' -f1 /proc/loadavg)
  nice -n 19 cargo test --release --locked --test fairness -- --exact fair_hogs20_7 fair_hogs20_shards_7 --test-threads=2 --nocapture > $out/fair-$i.log 2>&1 & a=$!
  nice -n 19 cargo test --release --locked --test reliability -- --exact shapes_6_12 --nocapture > $out/shapes-$i.log 2>&1 & b=$!
  ( while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do cut -d' ' -f1 /proc/loadavg; sleep 10; done ) > $out/load-$i.txt &
  wait $a; ra=$?; wait $b; rb=$?; kill $hog
  [ $ra = 0 ] || cp -a /work/wt/proof/target/vm-logs $out/vm-logs-$i 2>/dev/null
  l=$(sort -n $out/load-$i.txt | awk '{a[NR]=$1} END{print "min " a[1] " median " a[int((NR+1)/2)] " max " a[NR]}')
  w=$(grep -o "worst wait net of stalls: .*" $out/fair-$i.log | sed 's/.*net \([0-9]*\) us/\1/' | paste -sd/)
  echo "$i fair_rc=$ra shapes_rc=$rb $(( $(date +%s)-s ))s load_start=$l0 load: $l worst_net_us: $w" >> $out/summary
  echo "round $i done $(date +%T)" > $out/round
done
