#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# rel-topo.sh [SECS] [OFFLINE_CPUS] [ONLINE_LATER]   (guest side of tests/reliability.rs topo_*)
# scx_sisutil on the guest's topology (tools/vm --smp/--numa/--append decide it): attach,
# the loader's topology line and the stats' LLCs agree with sysfs, SECS (default 10) of
# stress-ng + hackbench, still enabled, clean SIGTERM exit. OFFLINE_CPUS (comma separated)
# go offline before the start, so that the CPU ids have holes; ONLINE_LATER (a CPU id, or
# 'auto': the first present CPU that maxcpus= kept offline at boot; which ids the kernel
# brings up under maxcpus= follows the APIC order, not the id order) comes online while the
# scheduler runs: the loader restarts with it.
. "$(dirname "$0")/lib.sh"

secs=${1:-10}
offline=${2:-}
later_cpu=${3:-}
LOG=/tmp/rel-sched.log
# shellcheck disable=SC2034 # read by lib.sh's dmesg check
if [ -n "$later_cpu" ]; then SCX_OK_REASONS='unregistered from user space|unregistered from the main kernel'; fi

for c in ${offline//,/ }; do
  echo 0 > "/sys/devices/system/cpu/cpu$c/online" || fail "cannot offline cpu$c"
done
[ -z "$offline" ] || info "offlined cpu $offline before the start: online $(online_cpus)"
if [ "$later_cpu" = auto ]; then
  later_cpu=
  for d in /sys/devices/system/cpu/cpu[0-9]*; do
    c=${d##*cpu}
    [[ ,$offline, == *",$c,"* ]] && continue
    [ -f "$d/online" ] && [ "$(cat "$d/online")" = 0 ] && { later_cpu=$c; break; }
  done
  [ -n "$later_cpu" ] || fail "no present CPU left offline at boot to online later (maxcpus= missing?)"
fi
[ -z "$later_cpu" ] || [ "$(cat "/sys/devices/system/cpu/cpu$later_cpu/online")" = 0 ] ||
  fail "cpu$later_cpu is already online: it cannot come online under the scheduler"
[ -z "$later_cpu" ] || info "cpu$later_cpu will come online under the scheduler"
info "present $(cat /sys/devices/system/cpu/present), online $(online_cpus), NUMA nodes: $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)"

# check_topology WHEN: the loader's last topology line and the running scheduler's stats
# match what sysfs says now.
check_topology() {
  local ncpu nllc line mon
  ncpu=$(cpulist_count "$(online_cpus)")
  nllc=$(llc_lists | wc -l)
  line=$(grep 'topology:' "$LOG" | tail -n 1 | sed 's/.*topology: //')
  [[ $line == "$ncpu CPUs, $nllc LLCs "* ]] ||
    fail "loader topology '$line' $1, sysfs: $ncpu CPUs online ($(online_cpus)), $nllc LLCs ($(llc_lists | tr '\n' ' '))"
  mon=$(timeout 120 scx_sisutil monitor --json --count 1 --interval 1)
  expect_eq "LLCs in the stats $1" "$(jq '.llcs | length' <<<"$mon")" "$nllc"
  ok "topology $1: $line"
  figure "topology" "'$line'"
}

sched_start "$LOG"
check_topology "after attach"

ncpu=$(nproc)
stress-ng --cpu "$ncpu" --fork 1 --affinity 1 --timeout "${secs}s" > /tmp/rel-stress.log 2>&1 &
p=$!
timeout 300 hackbench -g 2 -l 20 > /dev/null || fail "hackbench failed"
wait "$p" || fail "stress-ng exited $?"
ok "stress-ng ($secs s) and hackbench completed"
sched_alive "after the load"

if [ -n "$later_cpu" ]; then
  r0=$(grep -c 'restarting (CPU hotplug)' "$LOG" || true)
  echo 1 > "/sys/devices/system/cpu/cpu$later_cpu/online" || fail "cannot online cpu$later_cpu"
  i=0
  while [ "$(grep -c 'restarting (CPU hotplug)' "$LOG" || true)" -le "$r0" ]; do
    [ $i -lt 600 ] || fail "no restart 60 s after onlining cpu$later_cpu"
    sleep 0.1; i=$((i + 1))
  done
  sched_wait_attached "after onlining cpu$later_cpu"
  sleep 2
  sched_wait_attached "2 s after onlining cpu$later_cpu"
  check_topology "after onlining cpu$later_cpu"
  timeout 300 hackbench -g 2 -l 10 > /dev/null || fail "hackbench after onlining cpu$later_cpu failed"
  sched_alive "after onlining cpu$later_cpu"
fi

print_events
sched_stop_clean
check_scx_exits
pass
