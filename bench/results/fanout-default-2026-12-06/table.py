#!/usr/bin/env python3
"""run.sh's JSON files as a table: per round, 8 observers against the round's run without, and
the medians of the ratios."""
import json, glob, os, re, statistics, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
runs = {}
for f in glob.glob(os.path.join(d, "r*-obs*.json")):
    r, o = map(int, re.match(r"r(\d+)-obs(\d+)\.json", os.path.basename(f)).groups())
    j = json.load(open(f))
    runs[(r, o)] = dict(rps=j["records_per_sec"], nspb=j["leader_cpu_ns_per_byte"],
                        p50=j["commit_latency_us"]["p50"], p99=j["commit_latency_us"]["p99"],
                        obs_cpu=sum(j["node_cpu_sec"][3:]) if o else 0.0,
                        load=j["loadavg"].split()[0],
                        lag=(j.get("observers") or {}).get("all_within_max_lag_at_end"))
print("| round | observers | load | records/s | vs 0 | leader ns per byte | vs 0 | commit p50 / p99 us | observers' CPU-s | all within lag at end |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratios = []
for (r, o) in sorted(runs):
    x, base = runs[(r, o)], runs[(r, 0)]
    tr, cr = x["rps"] / base["rps"], x["nspb"] / base["nspb"]
    if o:
        ratios.append((tr, cr))
    print(f"| {r} | {o} | {x['load']} | {x['rps']:,.0f} | {tr:.0%} | {x['nspb']:.1f} | {cr:.2f}x | {x['p50']:,} / {x['p99']:,} | {x['obs_cpu']:.1f} | {x['lag'] if o else '-'} |")
print()
t = statistics.median(a for a, _ in ratios)
c = statistics.median(b for _, b in ratios)
print(f"- 8 observers at the defaults, median of {len(ratios)} rounds: {t:.0%} of the throughput, {c:.2f}x the leader's CPU per byte")
