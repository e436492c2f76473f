#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# errors.sh   (guest side of tests/vm.rs errors_vm)
# The failures a user meets first each get one clear line and a non-zero exit, and none
# of them attaches anything:
#  - not root (run as nobody): the scheduler and `features NAME`;
#  - invalid flags: --slice-us 0, --imbalance-pct 99, --interval-ms 0, --preset foo,
#    --features BOGUS;
#  - --allow-queued-wakeup on a kernel without SCX_OPS_ALLOW_QUEUED_WAKEUP (6.12);
#  - a second instance while one runs: "another sched_ext scheduler is already running",
#    and the first one keeps running.
. "$(dirname "$0")/lib.sh"

# error_line WHAT RC OUT PATTERN: a non-zero exit, and exactly one line that reads as an
# error and matches PATTERN (clap adds a blank line, "For more information, try
# '--help'." and for enums the possible values: hints, not errors).
error_line() {
  local what=$1 rc=$2 out=$3 pat=$4 errs
  echo "# $what -> exit $rc:"
  printf '%s\n' "$out" | sed 's/^/#   | /'
  [ "$rc" -ne 0 ] || fail "$what: exit status 0"
  errs=$(printf '%s\n' "$out" | grep -E '^(scx_sisutil: )?error:' || true)
  [ "$(printf '%s\n' "$errs" | awk 'NF' | wc -l)" -eq 1 ] ||
    fail "$what: want exactly one error line, got: $errs"
  grep -q -E -- "$pat" <<<"$errs" || fail "$what: the error line does not match /$pat/: $errs"
  [ "$(printf '%s\n' "$out" | awk 'NF' | wc -l)" -le 3 ] || fail "$what: more than 3 lines of output"
  ! grep -q -i 'panicked' <<<"$out" || fail "$what: panicked"
  [ "$(scx_state)" = disabled ] || fail "$what: sched_ext state '$(scx_state)' afterwards"
  ok "$what: exit $rc, one line: $errs"
}

# run_as_nobody CMD: output and status of CMD as user nobody (busybox su, no password as root).
run_as_nobody() { timeout 60 su -s /bin/sh nobody -c "$1" 2>&1; }

expect_eq "state before start" "$(scx_state)" disabled

rc=0; out=$(run_as_nobody 'scx_sisutil') || rc=$?
error_line "scx_sisutil as nobody" "$rc" "$out" 'must run as root'
# `features` only lists without root; switching needs root (checked while one runs, below).

for args in "--slice-us 0:slice-us" "--imbalance-pct 99:imbalance-pct" \
            "--interval-ms 0:interval-ms" "--preset foo:preset" "--features BOGUS:BOGUS"; do
  flags=${args%:*} pat=${args##*:}
  rc=0
  # shellcheck disable=SC2086 # the flag and its value are two words
  out=$(timeout 60 scx_sisutil $flags 2>&1) || rc=$?
  error_line "scx_sisutil $flags" "$rc" "$out" "$pat"
done

# --- pins that are not ours ----------------------------------------------------------------
# A feature map from another build (4-byte value) must give one line, not a panic.
mkdir -p /sys/fs/bpf/scx_sisutil && chmod 700 /sys/fs/bpf/scx_sisutil
bpftool map create /sys/fs/bpf/scx_sisutil/features type array key 4 value 4 entries 1 name sis_features ||
  fail "bpftool map create"
rc=0; out=$(timeout 60 scx_sisutil features 2>&1) || rc=$?
error_line "features with a foreign pinned map" "$rc" "$out" "not this build's feature map"
rm -rf /sys/fs/bpf/scx_sisutil
# A symlinked pin directory is refused at start, and nothing stays attached.
mkdir -p /tmp/elsewhere && ln -s /tmp/elsewhere /sys/fs/bpf/scx_sisutil
rc=0; timeout 60 scx_sisutil >/tmp/symlink.log 2>&1 || rc=$?
out=$(grep -E '^(scx_sisutil: )?error:' /tmp/symlink.log || true)
error_line "scx_sisutil with a symlinked pin directory" "$rc" "$out" "is a symlink"
[ ! -e /tmp/elsewhere/features ] || fail "a map was pinned through the symlink"
rm -f /sys/fs/bpf/scx_sisutil
# --allow-queued-wakeup on 6.12, which has no SCX_OPS_ALLOW_QUEUED_WAKEUP (6.15+): refused
# in one line, nothing attached.
rc=0; timeout 60 scx_sisutil --allow-queued-wakeup >/tmp/aqw.log 2>&1 || rc=$?
out=$(grep -E '^(scx_sisutil: )?error:' /tmp/aqw.log || true)
error_line "scx_sisutil --allow-queued-wakeup" "$rc" "$out" "SCX_OPS_ALLOW_QUEUED_WAKEUP"
out=$(scx_sisutil -V)
grep -qE '^scx_sisutil [0-9]+\.[0-9]+\.[0-9]+(-g[0-9a-f]+)? ' <<<"$out" || fail "-V: $out"
ok "-V prints the version with its build id: $out"

# --- a second instance ---------------------------------------------------------------------
sched_start /tmp/sched.log
ops=$(scx_ops)
rc=0; out=$(timeout 60 scx_sisutil 2>&1) || rc=$?
echo "# second instance -> exit $rc:"; printf '%s\n' "$out" | sed 's/^/#   | /'
[ "$rc" -ne 0 ] || fail "second instance: exit status 0"
[ "$(printf '%s\n' "$out" | awk 'NF' | wc -l)" -eq 1 ] || fail "second instance: want one line"
grep -q 'another sched_ext scheduler is already running' <<<"$out" ||
  fail "second instance: not the 'already running' error: $out"
ok "second instance refused: $out"
expect_eq "ops after the second instance" "$(scx_ops)" "$ops"
sched_alive "after the second instance"

rc=0; out=$(run_as_nobody 'scx_sisutil features NO_SIS_UTIL') || rc=$?
echo "# features NO_SIS_UTIL as nobody -> exit $rc: $out"
[ "$rc" -ne 0 ] || fail "features NO_SIS_UTIL as nobody: exit status 0"
[ "$(printf '%s\n' "$out" | awk 'NF' | wc -l)" -eq 1 ] || fail "features as nobody: want one line"
expect_eq "SIS_UTIL after the unprivileged switch attempt" \
  "$(scx_sisutil features | awk '$1 == "SIS_UTIL" { print $2 }')" on
ok "features NO_SIS_UTIL as nobody refused: $out"

sched_stop TERM
expect_eq "exit status after SIGTERM" "$SCHED_RC" 0
check_dmesg_clean
pass
