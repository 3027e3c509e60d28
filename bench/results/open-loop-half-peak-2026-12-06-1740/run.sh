#!/usr/bin/env bash
# Target 6's open-loop half: the closed-loop peak of 16 x 8 one-record requests (1 KiB,
# acks=-1), then 60 s of open-loop load at half of it, latency from the intended send time.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bench/open_loop_half_peak.sh bench/results/open-loop-half-peak-2026-12-06-1740
