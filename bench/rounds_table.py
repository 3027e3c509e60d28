#!/usr/bin/env python3
"""The table of a bench/rounds.sh (or bench/ab.sh) run: per round, each variant's committed
records/s and MB/s, p50 and p99 commit latency, the leader's CPU per record, and committed bytes
per CPU-second of all the nodes (docs/benchmarks.md's efficiency figure); then each variant's
ratios to the first variant in the same round, with their medians.
    rounds_table.py OUT_DIR NAME [NAME...]    (reads OUT_DIR/NAME-rN.json)"""
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
        "mb_per_sec": d["mb_per_sec"],
        "p50": d["commit_latency_us"]["p50"],
        "p99": d["commit_latency_us"]["p99"],
        "leader_ns": d["leader_cpu_ns_per_record"],
        "mb_per_cpu_sec": committed_bytes / node_cpu / 1e6 if node_cpu else float("nan"),
        "load": d["loadavg"].split()[0],
    }


def main():
    out = pathlib.Path(sys.argv[1])
    names = sys.argv[2:]
    first = names[0]
    rounds = sorted({int(m.group(1)) for p in out.glob(f"{first}-r*.json")
                     if (m := re.fullmatch(re.escape(first) + r"-r(\d+)\.json", p.name))})
    runs = {(n, r): load(out / f"{n}-r{r}.json") for n in names for r in rounds}
    print("| round | variant | records/s | MB/s | p50 / p99 us | leader CPU ns/record | "
          "MB per node CPU-s | load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rounds:
        for n in names:
            x = runs[(n, r)]
            print(f"| {r} | {n} | {x['records_per_sec']:,.0f} | {x['mb_per_sec']:.1f} | "
                  f"{x['p50']:,} / {x['p99']:,} | {x['leader_ns']:,.0f} | "
                  f"{x['mb_per_cpu_sec']:.2f} | {x['load']} |")
    for n in names[1:]:
        ratios = []
        for r in rounds:
            a, b = runs[(first, r)], runs[(n, r)]
            ratios.append((b["records_per_sec"] / a["records_per_sec"],
                           b["leader_ns"] / a["leader_ns"],
                           b["mb_per_cpu_sec"] / a["mb_per_cpu_sec"]))
        print()
        print(f"| round | {n}/{first} records/s | {n}/{first} leader CPU per record | "
              f"{n}/{first} MB per node CPU-s |")
        print("|---|---|---|---|")
        for r, (t, c, e) in zip(rounds, ratios):
            print(f"| {r} | {t:.2f} | {c:.2f} | {e:.2f} |")
        medians = [statistics.median(column) for column in zip(*ratios)]
        print("| median | " + " | ".join(f"{m:.2f}" for m in medians) + " |")


if __name__ == "__main__":
    main()
