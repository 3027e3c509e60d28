#!/usr/bin/env bash
# Rounds 2 and 3 of the fan-out comparison (docs/benchmarks.md, "Observers and idle
# connections"), interleaved: 0 and 8 observers, then 0 and 984 idle connections, per round.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
out=bench/results/fanout-2026-12-03
B=target/release/ringraft-bench
for round in 2 3; do
  for n in 0 8; do
    settle_disk /tmp
    echo "round $round observers $n start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $B cluster --observers $n --node-override log.segment.bytes=67108864 --connections 16 --inflight 8 \
      --duration 10 --json $out/r$round-observers-$n.json > $out/r$round-observers-$n.log 2>&1
  done
  for idle in 0 984; do
    settle_disk /tmp
    echo "round $round idle $idle start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $B cluster --idle-connections $idle --connections 16 --duration 10 \
      --json $out/r$round-idle-$idle.json > $out/r$round-idle-$idle.log 2>&1
  done
done
