#!/usr/bin/env bash
# log.sync.mode=auto against the fdatasync default, interleaved rounds (docs/benchmarks.md,
# "The sync mode chosen at start"). A = release build of 9673208 (fdatasync by default),
# B = release build of 9264a28 (auto by default; it chose RWF_DSYNC on this VM's disk), copied to
# /tmp/rr-A and /tmp/rr-B first.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=bench/results/sync-auto-2026-12-06
bench/rounds.sh $out/one-in-flight 5 'fdatasync-default:--ringraft-bin /tmp/rr-A' \
    'auto-default:--ringraft-bin /tmp/rr-B' -- --connections 1 --inflight 1 --duration 10
bench/rounds.sh $out/c16i8 3 'fdatasync-default:--ringraft-bin /tmp/rr-A' \
    'auto-default:--ringraft-bin /tmp/rr-B' -- --connections 16 --inflight 8 --duration 10
bench/rounds.sh $out/c4i4b64 3 'fdatasync-default:--ringraft-bin /tmp/rr-A' \
    'auto-default:--ringraft-bin /tmp/rr-B' -- --connections 4 --inflight 4 --batch-records 64 --duration 10
