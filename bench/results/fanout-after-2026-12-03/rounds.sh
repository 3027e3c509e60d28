#!/usr/bin/env bash
# The fan-out comparison again after the send and TLS-buffer changes (docs/benchmarks.md,
# "Fan-out after the changes"): per round, 0, 2, 4 and 8 observers, one-record requests with 128
# in flight, the disk settled before each run. BENCH defaults to target/release/ringraft-bench.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
out=bench/results/fanout-after-2026-12-03
B=${BENCH:-target/release/ringraft-bench}
for round in 1 2 3; do
  for n in 0 2 4 8; do
    settle_disk /tmp > /dev/null
    echo "round $round observers $n start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $B cluster --observers $n --node-override log.segment.bytes=67108864 --connections 16 --inflight 8 \
      --duration 10 --json $out/r$round-observers-$n.json > $out/r$round-observers-$n.log 2>&1
  done
done
