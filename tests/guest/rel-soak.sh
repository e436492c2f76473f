#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# rel-soak.sh [SECS] [SWITCH_EVERY_S]   (guest side of tests/reliability.rs soak_*, tools/soak)
# SECS (default 60) of mixed load under scx_sisutil: stress-ng (cpu hogs, fork churn,
# affinity churn, scheduling-policy churn, affinity races), back-to-back hackbench and
# netperf TCP_RR over loopback, while a random feature (X or NO_X) is switched live every
# SWITCH_EVERY_S (default 2) seconds plus the time the switch itself takes. Passes when:
# the scheduler stayed attached throughout, every switch reported what it changed, the
# final feature word matches the script's model and the stats of the BPF side, no load
# failed, the kernel logged no abnormal disable (0 watchdog stalls), and SIGTERM ends it
# with exit status 0. Reports duration, forks, switches and the kernel's event counters.
. "$(dirname "$0")/lib.sh"

secs=${1:-60}
every=${2:-2}
ncpu=$(nproc)

# feature_state NAME: on|off as the running scheduler reports it
feature_state() { scx_sisutil features | awk -v n="$1" '$1 == n { print $2 }'; }

sched_start /tmp/rel-sched.log
# every feature the running scheduler has, in its order (the binary defines them)
mapfile -t FEATS < <(scx_sisutil features | awk '{ print $1 }')
[ "${#FEATS[@]}" -ge 9 ] || fail "scx_sisutil features listed ${#FEATS[@]} features"
forks0=$(forks_total)
t_start=$(now)

netperf_setup
loads_start
info "load: stress-ng --cpu $ncpu --fork 2 --affinity 2 --schedpolicy 1 --race-sched 1 --timeout ${secs}s; hackbench -g 2 -l 50 loop; netperf TCP_RR 3 s loop"
stress-ng --cpu "$ncpu" --fork 2 --affinity 2 --schedpolicy 1 --race-sched 1 \
  --timeout "${secs}s" --metrics-brief > /tmp/rel-stress.log 2>&1 &
stress_pid=$!
bg "$stress_pid"
loop_bg hackbench "hackbench -g 2 -l 50"
loop_bg netperf "netperf -H 127.0.0.1 -t TCP_RR -l 3 -P 0 -- -r 1,1"

# Live switches: one random name, on or off, every few seconds. The script keeps its own
# model of the feature word and compares it with the scheduler's at the end (one extra
# process per switch costs seconds of guest time under this load: TCG).
declare -A model
while read -r n st _; do model[$n]=$st; done < <(scx_sisutil features)
switches=0 changed=0
end=$(deadline_in "$secs")
while before "$end"; do
  sleep "$every"
  name=${FEATS[RANDOM % ${#FEATS[@]}]}
  want=on arg=$name
  if [ $((RANDOM % 2)) -eq 0 ]; then want=off arg=NO_$name; fi
  sched_attached || fail "scheduler detached during the soak, after $switches switches ($(since "$t_start") s)"
  out=$(scx_sisutil features "$arg" 2>&1) || fail "scx_sisutil features $arg: $out"
  if [ "${model[$name]}" = "$want" ]; then
    [ "$out" = "no change" ] || fail "'features $arg' with $name already $want said: $out"
  else
    [ "$out" = "$name -> $want" ] || fail "'features $arg' with $name ${model[$name]} said: $out"
    changed=$((changed + 1))
  fi
  model[$name]=$want
  switches=$((switches + 1))
done
word=
for n in "${FEATS[@]}"; do
  if [ "${model[$n]}" = on ]; then word+="$n "; else word+="NO_$n "; fi
done
word=${word% }
got=$(scx_sisutil features | awk '{ printf "%s%s ", ($2 == "on" ? "" : "NO_"), $1 }' | sed 's/ $//')
expect_eq "feature word after $switches live switches ($changed changed a bit)" "$got" "$word"

src=0; wait "$stress_pid" || src=$?
tail -n 12 /tmp/rel-stress.log | sed 's/^/#   stress-ng| /'
[ "$src" -eq 0 ] || fail "stress-ng exited $src"
ok "stress-ng completed (status 0)"
loads_stop
sched_alive "after ${secs} s of mixed load and $switches switches"

# The BPF side runs with the word the last switch wrote: the monitor reports it.
mon=$(timeout 120 scx_sisutil monitor --json --count 1 --interval 1 | jq -r .features)
expect_eq "features reported by the stats of the running scheduler" "$mon" "$word"

print_events
forks1=$(forks_total)
figure duration_s "$(since "$t_start")"
figure tasks_spawned $((forks1 - forks0))
figure switches "$switches"
figure switches_changed "$changed"

sched_stop_clean
check_scx_exits
pass
