#!/usr/bin/env python3
"""The fan-out table of run.sh's JSON files: per round, each run against the round's run without
observers, and the medians per configuration."""
import json, glob, os, re, statistics, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
runs = {}
for f in glob.glob(os.path.join(d, "r*-o*-iv*.json")):
    r, o, iv = map(int, re.match(r"r(\d+)-o(\d+)-iv(\d+)\.json", os.path.basename(f)).groups())
    j = json.load(open(f))
    obs_cpu = sum(j["node_cpu_sec"][3:]) if o else 0.0
    runs[(r, o, iv)] = dict(rps=j["records_per_sec"], nspb=j["leader_cpu_ns_per_byte"],
                            p50=j["commit_latency_us"]["p50"], p99=j["commit_latency_us"]["p99"],
                            obs_cpu=obs_cpu, load=j["loadavg"].split()[0],
                            lag=(j.get("observers") or {}).get("all_within_max_lag_at_end"))
print("| round | observers | interval ms | load | records/s | vs 0 | leader ns per byte | vs 0 | commit p50 / p99 us | observers' CPU-s | all within lag at end |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
ratios = {}
for (r, o, iv) in sorted(runs):
    x = runs[(r, o, iv)]
    base = runs.get((r, 0, 0))
    tr = x["rps"] / base["rps"] if base else float("nan")
    cr = x["nspb"] / base["nspb"] if base else float("nan")
    if o:
        ratios.setdefault(iv, []).append((tr, cr))
    print(f"| {r} | {o} | {iv} | {x['load']} | {x['rps']:,.0f} | {tr:.0%} | {x['nspb']:.1f} | {cr:.2f}x | {x['p50']:,} / {x['p99']:,} | {x['obs_cpu']:.1f} | {x['lag'] if o else '-'} |")
print()
for iv in sorted(ratios):
    t = statistics.median(a for a, _ in ratios[iv])
    c = statistics.median(b for _, b in ratios[iv])
    print(f"- 8 observers, interval {iv} ms, median of {len(ratios[iv])} rounds: {t:.0%} of the throughput, {c:.2f}x the leader's CPU per byte")
