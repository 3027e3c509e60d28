#!/usr/bin/env bash
set -euo pipefail
cd /work/main
source bench/peers/settle.sh
out=bench/results/fanout-2026-12-03
B=target/release/ringraft-bench
for n in 0 2 4 8; do
  settle_disk /tmp
  echo "observers $n start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  $B cluster --observers $n --node-override log.segment.bytes=67108864 --connections 16 --inflight 8 --duration 10 --json $out/observers-$n.json > $out/observers-$n.log 2>&1
  grep -E "records/s|observers:|ns per committed byte" $out/observers-$n.log | head -4
done
for idle in 0 984; do
  settle_disk /tmp
  echo "idle $idle start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  $B cluster --idle-connections $idle --connections 16 --duration 10 --json $out/idle-$idle.json > $out/idle-$idle.log 2>&1
  grep -E "records/s|idle connections:" $out/idle-$idle.log | head -3
done
