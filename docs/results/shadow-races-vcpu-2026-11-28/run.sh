#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# usage: run.sh BIN TAG LOAD(light|half) DURATION
set -m
BIN=$1; TAG=$2; LOAD=$3; DUR=${4:-20}
pids=()
if [ "$LOAD" = half ]; then
  ( while :; do nice -n 10 hackbench -g 4 -l 20000 >/dev/null 2>&1; done ) & pids+=($!)
  nice -n 19 stress-ng --cpu 1 -q & pids+=($!)
else
  ( while :; do nice -n 10 hackbench -g 1 -l 2000 >/dev/null 2>&1; sleep 0.2; done ) & pids+=($!)
fi
sleep 1
$BIN shadow --attach tracepoint --duration $DUR --json --dump --record /tmp/h36/$TAG.jsonl > /tmp/h36/$TAG.json 2> /tmp/h36/$TAG.dump
for p in "${pids[@]}"; do kill -- -$p 2>/dev/null; done
