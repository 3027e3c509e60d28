#!/usr/bin/env bash
# Issue 13's "records/s at least 3x the build the work started from": 822c956 (the last commit
# before the first change for its targets) against main (9673208), 16 x 8 one-record requests,
# 3 interleaved rounds (docs/benchmarks.md, the targets table, row 1). Release builds copied to
# /tmp/rr-base and /tmp/rr-A first (822c956 built in its own worktree).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bench/rounds.sh bench/results/ab-issue13-start-2026-12-06 3 'start:--ringraft-bin /tmp/rr-base' \
    'main:--ringraft-bin /tmp/rr-A' -- --connections 16 --inflight 8 --duration 10
