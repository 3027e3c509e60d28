#!/usr/bin/env bash
# The one-record target's load (16 connections x 8 in flight, 1 KiB records, acks=-1) on one
# voter alone, on three voters in PLAINTEXT and on three over mTLS (the default), rounds
# interleaved with the disk settled before each run: how much of the leader's CPU per request
# the replication adds (docs/benchmarks.md, "The leader alone").
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
out=bench/results/leader-alone-2026-12-06
for round in 1 2 3; do
    for run in "n1:--nodes 1" "n3-plaintext:--security plaintext" "n3-mtls:"; do
        name=${run%%:*}
        args=${run#*:}
        settle_disk /tmp > /dev/null
        echo "round $round $name start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
        # shellcheck disable=SC2086
        target/release/ringraft-bench cluster $args --connections 16 --inflight 8 --duration 10 \
            --json "$out/$name-r$round.json" > "$out/$name-r$round.log" 2>&1
    done
done
python3 - "$out" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
print("| run | round | records/s | leader CPU us/request | p50 / p99 us | load |")
print("|---|---|---|---|---|---|")
for name in ("n1", "n3-plaintext", "n3-mtls"):
    for r in (1, 2, 3):
        d = json.load(open(f"{out}/{name}-r{r}.json"))
        lat = d["commit_latency_us"]
        print(f"| {name} | {r} | {d['records_per_sec']:,.0f} | {d['leader_cpu_ns_per_record']/1000:.2f} | "
              f"{lat['p50']:,} / {lat['p99']:,} | {d['loadavg'].split()[0]} |")
PY
