#!/usr/bin/env bash
# Fan-out with observer pacing: per round 0 observers, then 8 observers with
# quorum.observer.fetch.interval.ms = 0, 5, 10 and 20, the disk settled before each run.
# usage: run.sh OUT_DIR ROUNDS RINGRAFT_BIN
set -euo pipefail
out=$1; rounds=$2; bin=$3
bench=${BENCH:-target/release/ringraft-bench}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for cfg in "0 0" "8 0" "8 5" "8 10" "8 20"; do
    set -- $cfg
    name="r$r-o$1-iv$2"
    sync; sleep 3
    "$bench" cluster --ringraft-bin "$bin" --observers "$1" \
      --node-override log.segment.bytes=67108864 \
      --node-override quorum.observer.fetch.interval.ms="$2" \
      --connections 16 --inflight 8 --duration 10 --json "$out/$name.json" > "$out/$name.txt" 2>&1
    echo "$name done"
  done
done
