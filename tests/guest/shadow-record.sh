#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# shadow-record.sh LABEL SECS ATTACH...   (guest side of the corpus recording: tests/corpus/README.md)
# `scx_sisutil shadow --record` under the kernel's own fair class, for each ATTACH, in three
# phases of SECS seconds each, the load added phase by phase:
#   idle        two shell loops that sleep 5 ms (fork, exec, wait: a few wake-ups a tick)
#   mixed       + hackbench over pipes (1 group of 2+2 tasks) and stress-ng --cpu at 50 % on a
#               quarter of the CPUs (shadow.sh's load)
#   overloaded  + stress-ng --cpu on 1.5x the CPUs at 100 % (2x starved shadow's own load
#               under TCG: 250 s for a 5 s recording)
# Each recording is printed to stdout gzip'ed and base64'ed between the lines
# `CORPUS-FILE NAME BYTES` and `CORPUS-END` (NAME: KERNEL-LABEL-ATTACH-PHASE.jsonl), for the
# host to cut out (tests/corpus/README.md). FIGUREs: records per recording.
. "$(dirname "$0")/lib.sh"

label=${1:?label}
secs=${2:-5}
shift 2 || true
modes=("$@")
[ "${#modes[@]}" -gt 0 ] || modes=(fentry)
ncpu=$(nproc)
kernel=$(uname -r)

[ "$(scx_state)" = disabled ] || fail "a sched_ext scheduler is attached: $(scx_ops)"

emit() { # emit FILE NAME
  echo "CORPUS-FILE $2 $(wc -c < "$1")"
  gzip -c "$1" | base64
  echo "CORPUS-END"
}

record() { # record MODE PHASE
  local name="$kernel-$label-$1-$2.jsonl" f
  f=/tmp/$name
  scx_sisutil shadow --duration "$secs" --json --attach "$1" --record "$f" \
    > "/tmp/rec-$1-$2.json" 2> "/tmp/rec-$1-$2.err" ||
    fail "shadow --attach $1 ($2) exited $?: $(grep -v '^libbpf' "/tmp/rec-$1-$2.err" | tail -n 3 | tr '\n' ' ')"
  info "$1 $2: $(jq -c '{wakeups, compared, racy, dropped, agreed, agreement_pct, disagreements}' "/tmp/rec-$1-$2.json")"
  figure "${1}_${2}_records" "$(($(wc -l < "$f") - 1))"
  emit "$f" "$name"
  rm -f "$f"
}

rm -f /tmp/rec-stop
for _ in 1 2; do
  (while [ ! -e /tmp/rec-stop ]; do usleep 5000; done) &
  bg $!
done
phase=idle
for mode in "${modes[@]}"; do record "$mode" "$phase"; done

hackbench_bg -p -g 1 -f 2 -l 400
stress-ng --cpu $(((ncpu + 3) / 4)) --cpu-load 50 --timeout 600s > /dev/null 2>&1 &
bg $!
sleep 1
phase=mixed
for mode in "${modes[@]}"; do record "$mode" "$phase"; done

stress-ng --cpu $((ncpu * 3 / 2)) --timeout 600s > /dev/null 2>&1 &
bg $!
stress_workers_up $((ncpu * 3 / 2))
phase=overloaded
for mode in "${modes[@]}"; do record "$mode" "$phase"; done

touch /tmp/rec-stop
hackbench_bg_stop
pass
