#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
# table.py < guest.out > table.md: per phase, the sums over its intervals of each callback's
# calls and run time (calls / mean us per call), and select_cpu against `search` per interval.
import json
import sys
from collections import OrderedDict

ph = OrderedDict()
for l in sys.stdin:
    if not l.startswith('MON '):
        continue
    _, phase, js = l.split(' ', 2)
    ph.setdefault(phase, []).append(json.loads(js))
cbs = ['select_cpu', 'enqueue', 'dispatch', 'tick', 'runnable', 'running', 'stopping',
       'quiescent', 'update_idle', 'init_task', 'enable', 'disable', 'set_weight']
print('| phase | s | search | ' + ' | '.join(cbs) + ' |')
print('|' + '---|' * (3 + len(cbs)))
for p, ms in ph.items():
    s = sum(m['elapsed_ns'] for m in ms) / 1e9
    row = [p, '%.1f' % s, str(sum(m['search'] for m in ms))]
    for c in cbs:
        n = sum(m['progs'][c]['calls'] for m in ms)
        ns = sum(m['progs'][c]['run_ns'] for m in ms)
        row.append('%d / %s' % (n, ('%.1f' % (ns / n / 1000)) if n else '-'))
    print('| ' + ' | '.join(row) + ' |')
print()
print("Per interval, select_cpu calls against the scheduler's own `search` counter and the forks (`init_task` calls):")
print()
print('| phase | select_cpu calls | search | init_task | select_cpu - search |')
print('|---|---|---|---|---|')
for p, ms in ph.items():
    for m in ms:
        sc = m['progs']['select_cpu']['calls']
        print('| %s | %d | %d | %d | %d |' % (p, sc, m['search'], m['progs']['init_task']['calls'], sc - m['search']))
