#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
# The depth block's table of this folder's sweeps (README.md).
#   python3 table.py live          the live reports (live-K.jsonl: the guests' LEVEL lines)
#   python3 table.py NAME          rep-NAME-K-P.json, from
#                                  scx_sisutil shadow --replay rec-K-P.jsonl.zst --json > rep-NAME-K-P.json
import json
import re
import sys

pre = sys.argv[1]


def live(k, p):
    for line in open(f"live-{k}.jsonl"):
        m = re.match(r"(?:\[.*?\] )?LEVEL (\d+) (\{.*)", line)
        if m and int(m.group(1)) == p:
            return json.loads(m.group(2))
    raise SystemExit(f"live-{k}.jsonl: no level {p}")


print("| kernel | spinning | wake-ups (depth) | same % | within 1 % | mean abs diff | p99 abs diff | kernel util % | loader util % | fresh % | same when fresh % | input % | input within 1 % | decision % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for k in ["7", "6.12"]:
    for p in [0, 25, 50, 75, 100]:
        d = live(k, p) if pre == "live" else json.load(open(f"rep-{pre}-{k}-{p}.json"))["total"]
        dep = d["depth"]
        i = dep["inputs"]
        f = lambda x: f"{x:.2f}"
        print(f"| {k} | {p} % | {dep['wakeups']} | {f(dep['agreement_pct'])} | {f(dep['within_one_pct'])} | {dep['mean_abs_diff']:.3f} | {dep['p99_abs_diff']} | {i['kernel_util_pct']:.1f} | {i['loader_util_pct']:.1f} | {f(i['fresh_agreement_pct'])} | {f(i['agreement_when_fresh_pct'])} | {f(i['input_agreement_pct'])} | {f(i['input_within_one_pct'])} | {f(dep['decision_agreement_pct'])} |")
