#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# guest-text.sh   (guest side; run by run-text.sh through tools/vm --bin)
# The people's side: `scx_sisutil --prog-stats --stats 2` under a hackbench loop (the
# scheduler's own report thread prints the table, progs lines included), then a plain
# `monitor --count 1 --interval 2`; and `--prog-stats` refused in one line when the
# scheduler's thread lacks CAP_SYS_ADMIN is tested on the host (loader.rs), not here.
set -u
( while :; do hackbench -g 2 -l 200 > /dev/null 2>&1; done ) &
hb=$!
scx_sisutil --prog-stats --stats 2 > /tmp/sched.out 2>&1 &
sp=$!
scx-wait enabled 60 || { cat /tmp/sched.out; exit 1; }
sleep 7
echo "== scx_sisutil monitor --interval 2 --count 1"
scx_sisutil monitor --interval 2 --count 1
kill -INT $sp; wait $sp; rc=$?
kill $hb; wait $hb 2>/dev/null; pkill -x hackbench
echo "== scx_sisutil --prog-stats --stats 2 (exit $rc)"
cat /tmp/sched.out
