#!/usr/bin/env bash
# log.sync.mode=fdatasync (the default) against dsync on the same build, one record per request,
# 1 KiB, over the voters' default mutual TLS: one in flight (latency) and 16 x 8 in flight
# (throughput), 3 interleaved rounds, the disk settled before each run.
set -euo pipefail
out=$(dirname "$0")
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
B=target/release/ringraft-bench
for round in 1 2 3; do
  for load in one c16x8; do
    args="--connections 1 --inflight 1"
    [ "$load" = c16x8 ] && args="--connections 16 --inflight 8"
    for mode in fdatasync dsync; do
      settle_disk /tmp > /dev/null
      echo "== round $round $load $mode $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
      $B cluster $args --duration 10 --node-override log.sync.mode=$mode \
          --json "$out/$load-$mode-$round.json" 2>&1 | grep -E "summary|commit latency"
    done
  done
done
