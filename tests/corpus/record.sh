#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# tests/corpus/record.sh KERNEL LABEL SMP SECS ATTACH...
#   Record corpus files in a guest (tools/vm --kernel KERNEL --smp SMP; tests/guest/
#   shadow-record.sh: idle, mixed, overloaded, SECS seconds each, per ATTACH) and write them
#   here as KERNEL_RELEASE-LABEL-ATTACH-PHASE.jsonl.zst (zstd -19).
# tests/corpus/record.sh native LABEL - SECS ATTACH...
#   The same three phases on this host (root, no sched_ext attached; 2 CPUs here), with
#   target/release/scx_sisutil.
# Run one at a time, at nice 10 (TCG guests are slow and the build host is shared).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
[ $# -ge 4 ] || { echo "usage: $0 KERNEL|native LABEL SMP|- SECS ATTACH..." >&2; exit 2; }
kernel=$1 label=$2 smp=$3 secs=$4
shift 4
modes=("$@")
[ "${#modes[@]}" -gt 0 ] || modes=(fentry)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [ "$kernel" = native ]; then
  bin=$repo/target/release/scx_sisutil
  stop=$out/stop
  pids=()
  record() { # record MODE PHASE
    local f
    f=$here/$(uname -r)-$label-$1-$2.jsonl
    "$bin" shadow --duration "$secs" --json --attach "$1" --record "$f" > "$out/$1-$2.json" 2> "$out/$1-$2.err" ||
      { echo "shadow exited $?: $(grep -v '^libbpf' "$out/$1-$2.err" | tail -n 3)" >&2; exit 1; }
    echo "$1 $2: $(jq -c '{wakeups, compared, racy, dropped, agreed, agreement_pct, disagreements}' "$out/$1-$2.json")"
    zstd -q -19 -f --rm "$f"
  }
  for _ in 1 2; do
    (while [ ! -e "$stop" ]; do sleep 0.005; done) &
    pids+=($!)
  done
  for m in "${modes[@]}"; do record "$m" idle; done
  (while [ ! -e "$stop" ]; do hackbench -p -g 1 -f 2 -l 400 > /dev/null 2>&1 || true; done) &
  pids+=($!)
  stress-ng --cpu 1 --cpu-load 50 --timeout 600s > /dev/null 2>&1 &
  pids+=($!)
  sleep 1
  for m in "${modes[@]}"; do record "$m" mixed; done
  stress-ng --cpu "$(($(nproc) * 2))" --timeout 600s > /dev/null 2>&1 &
  pids+=($!)
  sleep 2
  for m in "${modes[@]}"; do record "$m" overloaded; done
  touch "$stop"
  kill "${pids[@]}" 2> /dev/null || true
  wait 2> /dev/null || true
  exit 0
fi

log=$out/vm.log
rc=0
nice -n 10 "$repo/tools/vm" --no-build --kernel "$kernel" --smp "$smp" --timeout 1500 -- \
  "shadow-record.sh $label $secs ${modes[*]}" > "$log" 2>&1 || rc=$?
grep -E '^(# |ok:|FIGURE|PASS|FAIL)' "$log" || true
tail -n 1 "$log"
[ "$rc" -eq 0 ] || { echo "tools/vm exited $rc (log: $log kept as $here/../../target/corpus-vm.log)" >&2; cp "$log" "$repo/target/corpus-vm.log"; exit 1; }
awk -v dir="$out" '
  { sub(/\r$/, "") }
  /^CORPUS-FILE / { name = $2; f = dir "/" name ".b64"; next }
  /^CORPUS-END/ { close(f); print name; f = ""; next }
  f != "" { print > f }
' "$log" | while read -r name; do
  base64 -d "$out/$name.b64" | gunzip > "$out/$name"
  zstd -q -19 -f "$out/$name" -o "$here/$name.zst"
  echo "wrote $here/$name.zst ($(($(wc -l < "$out/$name") - 1)) records)"
done
