#!/bin/bash
# Target 4 at the node's defaults (observer pacing 10 ms since 3fda475): per round, 0 and then
# 8 observers, each run after `sync; sleep 3`. Usage: run.sh OUT ROUNDS [BENCH]
set -euo pipefail
out=$1 rounds=$2 bench=${3:-target/release/ringraft-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for n in 0 8; do
    sync; sleep 3
    "$bench" cluster --observers "$n" --node-override log.segment.bytes=67108864 \
      --connections 16 --inflight 8 --duration 10 --json "$out/r$r-obs$n.json" > "$out/r$r-obs$n.txt" 2>&1
  done
done
