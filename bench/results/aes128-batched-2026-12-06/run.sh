#!/usr/bin/env bash
# The batched target's load (4 connections x 4 in flight x 64 records of 1 KiB, voters over
# mTLS), interleaved rounds with the disk settled before each run (docs/benchmarks.md, "The
# voters' cipher suite"). First, 3 rounds: the ring provider's default order then (AES-256-GCM
# first) against ssl.cipher.suites=TLS_AES_128_GCM_SHA256 on every node; then, once AES-128-GCM
# was the default preference, 2 rounds: AES-256 set by hand against the new default. Run at
# 17:35-17:45 UTC as loops of their own that did the same; bench/rounds.sh, written after, is
# that loop.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=bench/results/aes128-batched-2026-12-06
load=(--connections 4 --inflight 4 --batch-records 64 --duration 10)
bench/rounds.sh $out 3 aes256: 'aes128:--node-override ssl.cipher.suites=TLS_AES_128_GCM_SHA256' \
    -- "${load[@]}"
bench/rounds.sh $out/confirm 2 'set-aes256:--node-override ssl.cipher.suites=TLS_AES_256_GCM_SHA384' \
    default: -- "${load[@]}"
