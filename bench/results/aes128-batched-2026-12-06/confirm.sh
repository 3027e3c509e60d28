#!/usr/bin/env bash
# After AES-128-GCM became the default preference: the default against AES-256 set by hand,
# the batched target's load, rounds interleaved, disk settled.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
out=bench/results/aes128-batched-2026-12-06
B=target/release/ringraft-bench
for round in 1 2; do
    for side in set-aes256 default; do
        extra=()
        [ "$side" = set-aes256 ] && extra=(--node-override ssl.cipher.suites=TLS_AES_256_GCM_SHA384)
        settle_disk /tmp > /dev/null
        echo "round $round $side start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
        $B cluster --connections 4 --inflight 4 --batch-records 64 --duration 10 "${extra[@]}" \
            --json "$out/confirm-$side-r$round.json" > "$out/confirm-$side-r$round.log" 2>&1
    done
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("| round | suites | MB/s | leader CPU ns/byte | MB per voter CPU-s |")
print("|---|---|---|---|---|")
for r in (1, 2):
    for side in ("set-aes256", "default"):
        d = json.load(open(f"{out}/confirm-{side}-r{r}.json"))
        print(f"| {r} | {side} | {d['mb_per_sec']:.1f} | {d['leader_cpu_ns_per_byte']:.2f} | "
              f"{d['committed_mb_per_voter_cpu_sec']:.1f} |")
PY
