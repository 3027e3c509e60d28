#!/usr/bin/env bash
# One record in flight, unpinned against pinned (each node's raft and log threads and the load
# thread on fixed vCPUs), 3 alternating rounds, the disk settled before each run.
set -euo pipefail
out=$(dirname "$0")
B=target/release/ringraft-bench
for round in 1 2 3; do
  for cfg in "unpinned|" "pinned|--raft-cpus 0,1,0 --log-cpus 1,0,1 --bench-cpus 0,1"; do
    name=${cfg%%|*}; args=${cfg#*|}
    sync; sleep 3
    echo "== round $round $name (load $(cut -d' ' -f1-3 /proc/loadavg))"
    # shellcheck disable=SC2086
    $B cluster --connections 1 --inflight 1 --duration 10 $args --json "$out/$name-$round.json" 2>&1 | grep -E "summary|commit latency"
  done
done
