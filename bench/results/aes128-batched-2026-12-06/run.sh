#!/usr/bin/env bash
# The batched target's load (4 connections x 4 in flight x 64 records of 1 KiB, voters over
# mTLS) with the ring provider's default TLS 1.3 suite order (AES-256-GCM first) against
# ssl.cipher.suites=TLS_AES_128_GCM_SHA256 on every node, rounds interleaved, disk settled.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
out=bench/results/aes128-batched-2026-12-06
B=target/release/ringraft-bench
for round in 1 2 3; do
    for side in aes256 aes128; do
        extra=()
        [ "$side" = aes128 ] && extra=(--node-override ssl.cipher.suites=TLS_AES_128_GCM_SHA256)
        settle_disk /tmp > /dev/null
        echo "round $round $side start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
        $B cluster --connections 4 --inflight 4 --batch-records 64 --duration 10 "${extra[@]}" \
            --json "$out/$side-r$round.json" > "$out/$side-r$round.log" 2>&1
    done
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("| round | suite | MB/s | leader CPU ns/byte | MB per voter CPU-s | p50 / p99 us |")
print("|---|---|---|---|---|---|")
for r in (1, 2, 3):
    for side in ("aes256", "aes128"):
        d = json.load(open(f"{out}/{side}-r{r}.json"))
        l = d["commit_latency_us"]
        print(f"| {r} | {side} | {d['mb_per_sec']:.1f} | {d['leader_cpu_ns_per_byte']:.2f} | "
              f"{d['committed_mb_per_voter_cpu_sec']:.1f} | {l['p50']:,} / {l['p99']:,} |")
PY
