#!/usr/bin/env bash
# Issue 13's "records/s at least 3x the build the work started from": 822c956 against main
# 155d521 (log.sync.mode=auto by default), 16 x 8 one-record requests, 3 interleaved rounds.
# Release builds copied to /tmp/rr-base and /tmp/rr-head first (822c956 built in its own worktree).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bench/rounds.sh bench/results/ab-issue13-start-head-2026-12-06 3 'start:--ringraft-bin /tmp/rr-base' \
    'main:--ringraft-bin /tmp/rr-head' -- --connections 16 --inflight 8 --duration 10
