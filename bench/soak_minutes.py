#!/usr/bin/env python3
# usage: python3 bench/soak_minutes.py SOAK.json
# The soak table of docs/benchmarks.md from ringraft-bench's JSON: per whole minute the
# records/s and latency over all that minute's requests (from the intended send, us), the
# median of its seconds' p99, the seconds whose p99 passed 20 ms, and each node's RSS at the
# minute's end (KiB).
import json
import sys

run = json.load(open(sys.argv[1]))
seconds = run['intervals']
print('| minute | records/s | p50 | p99 | p99.9 | max | median of the seconds\' p99 '
      '| seconds with p99 > 20 ms | RSS at the end (nodes 1 / 2 / 3) |')
print('|---|---|---|---|---|---|---|---|---|')
for m in run['minutes']:
    n = m['minute']
    inside = [s for s in seconds if n - 1 < s['end_sec'] / 60 <= n]
    p99s = sorted(s['latency_us']['p99'] for s in inside)
    lat = m['latency_us']
    rss = ' / '.join('{:,}'.format(r) for r in inside[-1]['node_rss_kib']) if inside else '-'
    print('| %d | {:,} | {:,} | {:,} | {:,} | {:,} | {:,} | %d | %s |'.format(
        round(m['records_per_sec']), lat['p50'], lat['p99'], lat['p999'], lat['max'],
        p99s[len(p99s) // 2] if p99s else 0) % (n, sum(p > 20000 for p in p99s), rss))
c = run['commit_latency_us']
print()
print('whole run: {:,} records/s; commit latency p50 {:,} p99 {:,} p99.9 {:,} max {:,} us; '
      'loadavg {}; node RSS start {} end {}'.format(
          round(run['records_per_sec']), c['p50'], c['p99'], c['p999'], c['max'],
          run['loadavg'], run['node_rss_kib_start'], run['node_rss_kib_end']))
