#!/usr/bin/env python3
"""The table of a bench/ab.sh run: per round, each side's committed records/s, p50 and p99
commit latency, the leader's CPU per record, and committed bytes per CPU-second of all three
nodes (docs/benchmarks.md's efficiency figure), with B's ratio to A in the same round."""
import json
import pathlib
import re
import statistics
import sys


def load(path):
    d = json.loads(path.read_text())
    node_cpu = sum(d["node_cpu_sec"])
    committed_bytes = d["records"] * d["record_bytes"]
    return {
        "records_per_sec": d["records_per_sec"],
        "p50": d["commit_latency_us"]["p50"],
        "p99": d["commit_latency_us"]["p99"],
        "leader_ns": d["leader_cpu_ns_per_record"],
        "mb_per_cpu_sec": committed_bytes / node_cpu / 1e6 if node_cpu else float("nan"),
        "load": d["loadavg"].split()[0],
    }


def main():
    out = pathlib.Path(sys.argv[1])
    rounds = sorted({int(m.group(1)) for p in out.glob("a-r*.json")
                     if (m := re.match(r"a-r(\d+)\.json", p.name))})
    print("| round | side | records/s | p50 / p99 us | leader CPU ns/record | MB per node CPU-s | load |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for r in rounds:
        a, b = load(out / f"a-r{r}.json"), load(out / f"b-r{r}.json")
        for side, x in (("A", a), ("B", b)):
            print(f"| {r} | {side} | {x['records_per_sec']:,.0f} | {x['p50']:,} / {x['p99']:,} | "
                  f"{x['leader_ns']:,.0f} | {x['mb_per_cpu_sec']:.2f} | {x['load']} |")
        ratios.append((b["records_per_sec"] / a["records_per_sec"],
                       b["leader_ns"] / a["leader_ns"],
                       b["mb_per_cpu_sec"] / a["mb_per_cpu_sec"]))
    print()
    print("| round | B/A records/s | B/A leader CPU per record | B/A MB per node CPU-s |")
    print("|---|---|---|---|")
    for r, (t, c, e) in zip(rounds, ratios):
        print(f"| {r} | {t:.2f} | {c:.2f} | {e:.2f} |")
    medians = [statistics.median(column) for column in zip(*ratios)]
    print("| median | " + " | ".join(f"{m:.2f}" for m in medians) + " |")


if __name__ == "__main__":
    main()
