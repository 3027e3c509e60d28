#!/usr/bin/env bash
# Target 6's open-loop half: the closed-loop peak of 16 x 8 one-record requests (1 KiB,
# acks=-1), then 60 s of open-loop load at half of it, latency from the intended send time,
# with the generator's default 2 load threads and with 16:
#   bench/open_loop_half_peak.sh OUT_DIR    (writes OUT_DIR/{peak,half,half-16-threads}.{json,log})
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
out=${1:?usage: bench/open_loop_half_peak.sh OUT_DIR}
mkdir -p "$out"
B=target/release/ringraft-bench
settle_disk /tmp > /dev/null
echo "peak start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
$B cluster --connections 16 --inflight 8 --duration 10 --json $out/peak.json > $out/peak.log 2>&1
peak=$(python3 -c "import json; print(int(json.load(open('$out/peak.json'))['records_per_sec']))")
rate=$((peak / 2))
settle_disk /tmp > /dev/null
echo "half ($rate records/s) start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
$B cluster --connections 16 --inflight 8 --rate $rate --duration 60 --warmup 5 --json $out/half.json > $out/half.log 2>&1
settle_disk /tmp > /dev/null
echo "half, 16 load threads, start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
$B cluster --connections 16 --inflight 8 --rate $rate --duration 60 --warmup 5 --load-threads 16 \
    --json $out/half-16-threads.json > $out/half-16-threads.log 2>&1
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
p = json.load(open(f"{out}/peak.json")); h = json.load(open(f"{out}/half.json"))
l = h["commit_latency_us"]
print(f"peak {p['records_per_sec']:,.0f} records/s; half: {h['records_per_sec']:,.0f} records/s held, "
      f"p50 {l['p50']:,} us, p99 {l['p99']:,} us, p99/p50 {l['p99']/l['p50']:.2f}; load {h['loadavg']}")
PY
