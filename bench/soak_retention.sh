#!/bin/bash
# usage: bench/soak_retention.sh OUT_DIR   (the ten-minute retention soak of docs/benchmarks.md with
# /metrics on; samples disk use, RSS and each node's segment counters every 10 s into OUT_DIR)
out=${1:?usage: bench/soak_retention.sh OUT_DIR}
mkdir -p "$out" && out=$(realpath "$out")
cd "$(dirname "$0")/.."
sync; sleep 3
date -u +%T > $out/start.txt; cut -d' ' -f1-3 /proc/loadavg >> $out/start.txt
( for i in $(seq 1 64); do echo "$(date -u +%T) $(df --output=used -B1 / | tail -1) $(ps -C ringraft -o rss= | tr '\n' ' ') load $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 10; done ) > $out/disk.txt &
( sleep 8; for i in $(seq 1 64); do
    for t in $(python3 -c "import json; print(' '.join(a for g in json.load(open('$out/targets.json')) for a in g['targets']))" 2>/dev/null); do
      echo "$(date -u +%T) $t $(curl -s --max-time 3 http://$t/metrics | grep -E '^ringraft_log_segments_total|^ringraft_disk_slow_groups_total' | tr '\n' ' ')"
    done; sleep 10; done ) > $out/segments.txt &
target/release/ringraft-bench --batch-records 64 --connections 4 --inflight 4 --rate 80000 \
    --duration 600 --warmup 5 \
    --node-override retention.bytes=2147483648 --node-override log.segment.bytes=268435456 \
    --node-override log.retention.check.interval.ms=5000 --security plaintext \
    --metrics-scrape-ms 10000 --prometheus-targets $out/targets.json \
    --json $out/soak-ret.json --svg $out/soak-ret.svg > $out/bench.log 2>&1
echo "rc=$? $(date -u +%T)" >> $out/start.txt
