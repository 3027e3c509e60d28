#!/usr/bin/env bash
# Target 4 with every node (voters and observers) on log.sync.mode=dsync: 0 and 8 observers,
# one record per request, 16 x 8 in flight, the voters' default mTLS, 3 alternating rounds, the
# disk settled before each run. Same loads as bench/results/fanout-2026-12-06-vm2/run.sh.
set -euo pipefail
out=$(dirname "$0")
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
B=target/release/ringraft-bench
for round in 1 2 3; do
  for n in 0 8; do
    settle_disk /tmp > /dev/null
    echo "== round $round observers $n $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $B cluster --observers $n --node-override log.segment.bytes=67108864 \
        --node-override log.sync.mode=dsync --connections 16 --inflight 8 --duration 10 \
        --json "$out/obs$n-$round.json" 2>&1 | grep -E "summary|commit latency"
  done
done
