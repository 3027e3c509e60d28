#!/usr/bin/env bash
# Target 4 on this session's VM: 0 and 8 observers at the node's defaults (pacing 10 ms), one
# record per request, 16 x 8 in flight, 3 alternating rounds, the disk settled before each run.
set -euo pipefail
out=$(dirname "$0")
B=target/release/ringraft-bench
for round in 1 2 3; do
  for n in 0 8; do
    sync; sleep 3
    echo "== round $round observers $n (load $(cut -d' ' -f1-3 /proc/loadavg))"
    $B cluster --observers $n --node-override log.segment.bytes=67108864 --connections 16 \
        --inflight 8 --duration 10 --json "$out/obs$n-$round.json" 2>&1 | grep -E "summary|commit latency"
  done
done
