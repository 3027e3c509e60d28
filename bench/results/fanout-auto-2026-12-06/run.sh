#!/usr/bin/env bash
# Target 4 at the defaults of 9264a28 (log.sync.mode=auto: RWF_DSYNC on this VM's disk): 0 and 8
# observers alternating, one record per request, 16 x 8 in flight, 3 rounds, the disk settled
# before each run (bench/rounds.sh writes the table).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bench/rounds.sh bench/results/fanout-auto-2026-12-06 3 'obs0:--observers 0' 'obs8:--observers 8' \
    -- --node-override log.segment.bytes=67108864 --connections 16 --inflight 8 --duration 10
