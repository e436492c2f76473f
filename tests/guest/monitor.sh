#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# monitor.sh EXPECTED_LLCS   (guest side of tests/vm.rs monitor_*)
# `scx_sisutil monitor`:
#  - with no scheduler running it waits, saying so on stderr (still running after 3 s; exits
#    0 on SIGTERM), and a waiting monitor picks the scheduler up once it starts;
#  - under hackbench, `monitor --json --count 6` prints 6 JSON lines, each with one llcs
#    entry per LLC of the guest (EXPECTED_LLCS, also checked against sysfs), per-LLC weights
#    adding up to the CPU count and success rates within 0..=100; at least 2 of them with
#    non-zero search and scanned counters, and fast > 0 over all 6;
#  - run as an unprivileged user it fails with a clear permission error.
. "$(dirname "$0")/lib.sh"

want_llcs=${1:?usage: monitor.sh EXPECTED_LLCS}
ncpu=$(nproc)
expect_eq "LLCs seen by the guest kernel" "$(guest_llcs)" "$want_llcs"

# --- no scheduler: it waits --------------------------------------------------------------
expect_eq "state before start" "$(scx_state)" disabled
# It must still be running after 3 s (it did not give up by itself); SIGTERM then ends it
# cleanly (exit 0: it handles SIGINT/SIGTERM). busybox timeout would hide the difference
# (it returns the child's status), so signal it by hand.
scx_sisutil monitor > /tmp/mon0.out 2> /tmp/mon0.err &
mon_pid=$!
bg "$mon_pid"
t=$(now)
sleep 3
# Its waiting message must be out before the SIGTERM (checked below): on a guest that
# stalled the monitor may not have started in 3 s, so wait for the line (a hang guard).
await_line "$mon_pid" /tmp/mon0.err 'waiting for scx_sisutil to start' "the waiting message of the monitor with no scheduler"
kill -0 "$mon_pid" 2>/dev/null || { wait "$mon_pid" || true; fail "monitor with no scheduler exited by itself within $(since "$t") s: $(cat /tmp/mon0.err)"; }
ok "monitor with no scheduler still waiting after 3 s ($(since "$t") s)"
kill -TERM "$mon_pid"
dl=$(deadline_in "$HANG_S")
while kill -0 "$mon_pid" 2>/dev/null; do
  before "$dl" || fail "monitor with no scheduler ignored SIGTERM for $HANG_S s"
  sleep 0.1
done
rc=0; wait "$mon_pid" || rc=$?
echo "# monitor with no scheduler: exit $rc after SIGTERM; stderr: $(cat /tmp/mon0.err)"
expect_eq "monitor with no scheduler, exit status after SIGTERM" "$rc" 0
grep -q 'waiting for scx_sisutil to start' /tmp/mon0.err ||
  fail "monitor with no scheduler did not print its waiting message"
ok "monitor with no scheduler printed: $(head -n1 /tmp/mon0.err)"
[ ! -s /tmp/mon0.out ] || fail "monitor with no scheduler printed a report: $(head -c 200 /tmp/mon0.out)"

# A monitor started before the scheduler reports once the scheduler is up.
timeout 120 scx_sisutil monitor --json --count 1 --interval 1 > /tmp/early.json 2> /tmp/early.err &
early_pid=$!
bg "$early_pid"
sleep 1
sched_start /tmp/sched.log
rc=0; wait "$early_pid" || rc=$?
expect_eq "monitor started before the scheduler, exit status" "$rc" 0
expect_eq "JSON lines from the monitor started before the scheduler" "$(grep -c '^{' /tmp/early.json || true)" 1

# --- under hackbench -----------------------------------------------------------------------
# search and scanned count every wake-up, but a 1 s report can see none: under TCG on a busy
# host the guest can stop for seconds, and the monitor, whose interval then ends while it
# is stopped, reads its report at once when it runs again. The monitor times each interval
# from its previous report, so a stall, however long, empties one report: of MON_N reports
# at least MON_BUSY must have search and scanned > 0 (a scheduler reporting 0 fails), and
# every report must be well formed.
readonly MON_N=6 MON_BUSY=2
hackbench_bg -g 2 -l 20
hackbench_bg_running
monitor_json /tmp/mon.json "$MON_N" 1
hackbench_bg_stop
echo "# monitor --json --count $MON_N under hackbench:"
sed 's/^/#   /' /tmp/mon.json

# fast is > 0 over all the reports: at saturation a whole interval can pass with every
# target, prev and recent CPU busy (seen on 6.12: 2558 searches, 0 fast), as in the kernel.
n=0; busy=0; fast_sum=0
want=$(seq -s, 0 $((want_llcs - 1)))
while IFS= read -r line; do
  n=$((n + 1))
  # one jq per report (a jq per field took seconds of the emulated guest)
  read -r search scanned fast keys w bad rates < <(jq -r '[.search, .scanned, .fast,
      (.llcs | keys | map(tonumber) | sort | map(tostring) | join(",")),
      ([.llcs[].weight] | add),
      ([.success_rate, .llcs[].success_rate] | map(select(. < 0 or . > 100)) | length),
      ([.success_rate, [.llcs[].success_rate]] | tojson)] | map(tostring) | join(" ")' <<<"$line")
  if [ "$search" -gt 0 ] && [ "$scanned" -gt 0 ]; then busy=$((busy + 1)); fi
  fast_sum=$((fast_sum + fast))
  [ "$keys" = "$want" ] || fail "report $n: llcs keys '$keys', want '$want'"
  [ "$w" -eq "$ncpu" ] || fail "report $n: LLC weights add up to $w, want $ncpu CPUs"
  [ "$bad" -eq 0 ] || fail "report $n: a success_rate is outside 0..=100"
  ok "report $n: llcs {$keys}, weights sum $w, success rates in 0..=100 ($rates); search $search, scanned $scanned"
done < /tmp/mon.json
expect_eq "monitor --count $MON_N reports" "$n" "$MON_N"
[ "$busy" -ge "$MON_BUSY" ] ||
  fail "$busy of $n reports under hackbench with search and scanned > 0, want >= $MON_BUSY"
ok "reports under hackbench with search and scanned > 0: $busy of $n (>= $MON_BUSY)"
[ "$fast_sum" -gt 0 ] || fail "fast = 0 in all $n reports under hackbench, want > 0"
ok "fast over the $n reports: $fast_sum > 0"
# The loader's own CPU share (loader_cpu_pct: its process's CPU time per interval) over
# the reports under hackbench: at most LOADER_MAX_PCT % of one CPU. Measured under TCG
# (8 CPUs, host load 7-17): 8-13 % per 1 s report with a monitor and hackbench, 5.7-9.6 %
# without a monitor, 72-89 % with the crossbeam recv_timeout wait it replaced (its spin and
# sched_yield calls, 50 times a second). At nice 19 beside 2-3 other guests (host load 7-10,
# 2026-11-28) it read 16.7, 26.0, 26.7, 31.2, 39.8 and 48.4 %: under TCG a vCPU's guest time
# runs on while QEMU does not emulate it, and the loader's CPU time with it. The bound (60)
# is 1.24x above the highest seen and 1.2x below the spinning wait's lowest: a guard against
# that regression, with a thin margin on both sides (a measure that does not grow with the
# host's load, such as the loader's wake-ups per interval, would be the better test).
readonly LOADER_MAX_PCT=60
lpct=$(jq -s '100 * (map(.loader_cpu_ns) | add) / (map(.elapsed_ns) | add)' /tmp/mon.json)
awk_true "$lpct <= $LOADER_MAX_PCT" ||
  fail "the loader's CPU share under hackbench is $lpct % of one CPU, want <= $LOADER_MAX_PCT"
ok "loader CPU under hackbench: $lpct % of one CPU (<= $LOADER_MAX_PCT)"
figure loader_cpu_pct "$lpct"
printf '# per-feature hits over the %s reports (hackbench -g 2, default features):' "$n"
hits=$(hit_counters)
[ -n "$hits" ] || fail "--help-stats --json lists no hit_* counter"
# shellcheck disable=SC2086 # one name per word
json_sums /tmp/mon.json $hits
echo

# --- low load: the idle-core search and TTWU_QUEUE_DESCHED --------------------------------
# hackbench -g 1 -f 2 in short bursts with pauses (a few % of the CPUs): with SMT most LLCs
# have a whole idle core, so has_idle_cores is set (by __update_idle_core()'s rule on the
# scheduler's own idleness: on 6.12 too, where update_idle runs before the idle masks
# change) and select_idle_core runs. TTWU_QUEUE_DESCHED fires only for wakees still on their
# CPU when woken: never on more wake-ups than reach select_idle_sibling. The bursts go on
# until the reports are in (not a fixed number of them, which a slow guest could finish
# first); the counters are summed over LOW_N reports of LOW_S s: a guest stall empties one
# report, not the sum (a scheduler that never sets has_idle_cores still shows 0).
readonly LOW_N=3 LOW_S=3
rm -f /tmp/low.stop /tmp/low.runs
setsid bash -c 'while [ ! -e /tmp/low.stop ]; do
  hackbench -g 1 -f 2 -l 30 > /dev/null 2>&1 && echo >> /tmp/low.runs; sleep 0.5; done' &
low_pid=$!
bg "$low_pid"
await "the first low-load burst" test -s /tmp/low.runs
monitor_json /tmp/low.json "$LOW_N" "$LOW_S"
touch /tmp/low.stop
kill -TERM -- "-$low_pid" 2>/dev/null || true
wait "$low_pid" 2>/dev/null || true
low() { json_sum /tmp/low.json "$1"; }
echo "# low load (hackbench -g 1 -f 2 -l 30 bursts), $LOW_N reports of $LOW_S s, per report (search core_search):" \
  "$(jq -r '"\(.search)/\(.core_search)"' /tmp/low.json | tr '\n' ' ')"
echo "# low load, summed:$(for f in search fast \
  domain_search core_search core_failed smt hit_sis_core hit_ttwu_queue_desched kick \
  kick_atomic kick_scanned; do printf ' %s=%s' "$f" "$(low "$f")"; done)"
[ "$(low search)" -gt 0 ] || fail "low load: search = 0 over $LOW_N reports"
if [ "$(cat /sys/devices/system/cpu/smt/active 2>/dev/null || echo 0)" = 1 ]; then
  [ "$(low core_search)" -gt 0 ] || fail "low load with SMT: core_search = 0 over $LOW_N reports (has_idle_cores never set)"
  ok "low load with SMT: core_search $(low core_search) > 0"
fi
[ "$(low hit_ttwu_queue_desched)" -le "$(low search)" ] ||
  fail "low load: hit_ttwu_queue_desched $(low hit_ttwu_queue_desched) > search $(low search)"
ok "low load: hit_ttwu_queue_desched $(low hit_ttwu_queue_desched) <= search $(low search)"

# --- unprivileged --------------------------------------------------------------------------
# busybox su drops to nobody without a password when run by root.
rc=0
out=$(timeout 30 su -s /bin/sh nobody -c 'scx_sisutil monitor --count 1' 2>&1) || rc=$?
echo "# monitor as nobody: exit $rc: $out"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "monitor as nobody: exit status $rc, want a prompt failure"
expect_eq "lines printed by monitor as nobody" "$(printf '%s\n' "$out" | awk 'NF' | wc -l)" 1
grep -q -i -E 'root|permission' <<<"$out" || fail "monitor as nobody: no permission error: $out"
ok "monitor as nobody fails with: $out"

# --- --prog-stats ----------------------------------------------------------------------------
# A scheduler of its own (the loader's CPU share above is measured without it: the kernel's
# statistics add two clock reads to every BPF program run, which under TCG is no speed).
sched_alive "before the --prog-stats run"
sched_stop INT
expect_eq "exit status after SIGINT (before --prog-stats)" "$SCHED_RC" 0
sched_start /tmp/sched.log --prog-stats
readonly PROG_N=4
hackbench_bg -g 2 -l 20
hackbench_bg_running
monitor_json /tmp/prog.json "$PROG_N" 1
hackbench_bg_stop
# --prog-stats (the kernel's run_cnt / run_time_ns per struct_ops program, per interval):
# every callback the load drives is reported with its calls and run time, and select_cpu's
# calls are the wake-ups the scheduler counted: `search` (every TTWU wake-up) plus the
# fork and exec balancing, which select_cpu answers without a search (wake.bpf.h), at most
# 2 per fork (init_task: the fork, then its exec). Summed over the contiguous reports; the
# program counters and the per-CPU counters are read apart, so the sums may differ by the
# wake-ups in between (seen: +-2 per report at 8 vCPUs): PROG_SLACK_PCT % of search, + 10.
readonly PROG_SLACK_PCT=10
read -r p_sel p_sel_ns p_enq p_init p_search p_enqc < <(jq -s -r '
  def c(k): map(.progs[k].calls // 0) | add;
  "\(c("select_cpu")) \(map(.progs.select_cpu.run_ns // 0) | add) \(c("enqueue")) \(c("init_task")) \(map(.search) | add) \(map(.enqueue) | add)"' /tmp/prog.json)
echo "# --prog-stats over the $PROG_N reports: select_cpu $p_sel calls ($p_sel_ns ns), enqueue $p_enq, init_task $p_init; counters: search $p_search, enqueue $p_enqc"
for cb in select_cpu enqueue dispatch running stopping; do
  jq -e -s --arg cb "$cb" 'map(.progs[$cb].calls // 0) | add > 0' /tmp/prog.json > /dev/null ||
    fail "--prog-stats: no calls of $cb in $PROG_N reports under hackbench: $(head -c 300 /tmp/prog.json)"
done
[ "$p_sel_ns" -gt 0 ] || fail "--prog-stats: select_cpu ran $p_sel times in 0 ns"
awk_true "s * (100 - k) / 100 - 10 <= c && c <= (s + 2 * f) * (100 + k) / 100 + 10" \
  -v c="$p_sel" -v s="$p_search" -v f="$p_init" -v k="$PROG_SLACK_PCT" ||
  fail "--prog-stats: select_cpu called $p_sel times, want search $p_search .. search + 2 x forks $p_init (+-$PROG_SLACK_PCT % + 10)"
awk_true "e * (100 - k) / 100 - 10 <= c && c <= e * (100 + k) / 100 + 10" -v c="$p_enq" -v e="$p_enqc" -v k="$PROG_SLACK_PCT" ||
  fail "--prog-stats: enqueue called $p_enq times, the scheduler counted $p_enqc (+-$PROG_SLACK_PCT % + 10)"
ok "--prog-stats: select_cpu calls $p_sel = search $p_search + fork/exec balancing (forks $p_init), enqueue calls $p_enq ~ counter $p_enqc"

sched_alive "at the end"
sched_stop INT
expect_eq "exit status after SIGINT" "$SCHED_RC" 0
check_dmesg_clean
pass
