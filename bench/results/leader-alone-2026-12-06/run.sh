#!/usr/bin/env bash
# The one-record target's load (16 connections x 8 in flight, 1 KiB records, acks=-1) on one
# voter alone, on three voters in PLAINTEXT and on three over mTLS (the default), 3 interleaved
# rounds with the disk settled before each run: how much of the leader's CPU per request the
# replication adds (docs/benchmarks.md, "The leader alone"). Run at 17:01 UTC as a loop of its
# own that did the same; bench/rounds.sh, written after, is that loop.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bench/rounds.sh bench/results/leader-alone-2026-12-06 3 'n1:--nodes 1' \
    'n3-plaintext:--security plaintext' n3-mtls: -- --connections 16 --inflight 8 --duration 10
