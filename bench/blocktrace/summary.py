#!/usr/bin/env python3
# usage: perf script -i perf.data -F comm,tid,time,event,trace > script.txt
#        python3 bench/blocktrace/summary.py script.txt
# Summarises a block-layer trace taken under load (bench/blocktrace/record.sh): latency by request
# type (D discard, FF flush, WS sync write, WSM sync metadata write, W writeback), and, per
# half-second window, the slowest flush (FF) or data write (WS) next to the discards issued
# and the unlinks seen, to tell whether slow groups follow deletions. Requests are paired
# issue-to-completion by kind and sector, in order; metadata writes (WSM) of several nodes hit
# the same few sectors at once, so their pairs can be crossed: they are listed by kind but left
# out of the windows.
import collections
import re
import sys

LINE = re.compile(r'^\s*(.*?)\s+(\d+)\s+(\d+\.\d+):\s+(\S+):\s+(.*)$')
SPAN = re.compile(r'\(\) (\d+) \+ (\d+)')
MISMATCH_S = 2.0  # a pairing this slow is a lost event, not a request (dropped)
WINDOW_S = 0.5
BIG_DISCARD_MIB = 64

issued, reqs, unlinks = {}, [], []
for line in open(sys.argv[1]):
    m = LINE.match(line)
    if not m:
        continue
    _comm, _tid, t, event, rest = m.groups()
    t = float(t)
    if event.startswith('block:block_rq_'):
        rwbs = rest.split()[1]
        span = SPAN.search(rest)
        sector, n = (int(span.group(1)), int(span.group(2))) if span else (-1, 0)
        if rwbs == 'FF':
            sector = 0  # completions of flushes carry no sector: paired in issue order
        key = (rwbs.replace('M', ''), sector)
        if event.endswith('issue'):
            issued.setdefault(key, []).append((t, n, rwbs))
        elif issued.get(key):
            t0, n0, kind = issued[key].pop(0)
            if t - t0 < MISMATCH_S:
                reqs.append((t0, t, kind, n0))
    elif 'unlink' in event:
        unlinks.append(t)

by_kind = collections.defaultdict(list)
for t0, t1, kind, _ in reqs:
    by_kind[kind].append(t1 - t0)
print('kind count p50_ms p99_ms max_ms')
for kind, v in sorted(by_kind.items()):
    v.sort()
    n = len(v)
    print(kind, n, '%.2f %.2f %.1f' % (v[n // 2] * 1e3, v[int(n * .99)] * 1e3, v[-1] * 1e3))

start = min(r[0] for r in reqs)
windows = int((max(r[0] for r in reqs) - start) / WINDOW_S) + 1
slowest, discard_mib, unlinked = [0.0] * windows, [0] * windows, [0] * windows
for t0, t1, kind, n in reqs:
    w = int((t0 - start) / WINDOW_S)
    if kind.startswith('D'):
        discard_mib[w] += n // 2048
    elif kind in ('WS', 'FF'):
        slowest[w] = max(slowest[w], (t1 - t0) * 1e3)
for t in unlinks:
    if start <= t:
        w = int((t - start) / WINDOW_S)
        if w < windows:
            unlinked[w] += 1
after = [i for i in range(windows)
         if discard_mib[i] > BIG_DISCARD_MIB or (i and discard_mib[i - 1] > BIG_DISCARD_MIB)]
quiet = [i for i in range(windows) if i not in set(after)]
for name, ws in (('with a discard over %d MiB (this window or the one before)' % BIG_DISCARD_MIB, after),
                 ('without', quiet)):
    v = sorted(slowest[i] for i in ws)
    if v:
        print('%s: %d windows of %.1f s, median slowest %.0f ms, over 100 ms: %d'
              % (name, len(v), WINDOW_S, v[len(v) // 2], sum(x > 100 for x in v)))
print('windows with the slowest over 80 ms or a discard over %d MiB:' % BIG_DISCARD_MIB)
print('t_s slowest_ms discard_MiB unlinks')
for i in range(windows):
    if slowest[i] > 80 or discard_mib[i] > BIG_DISCARD_MIB:
        print('%.1f %.0f %d %d' % (i * WINDOW_S, slowest[i], discard_mib[i], unlinked[i]))
