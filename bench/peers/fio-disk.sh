#!/usr/bin/env bash
# The two fio reference runs the log benchmark is compared with, on the disk holding DIR:
#   1. bandwidth: O_DIRECT sequential write, 1 MiB blocks, iodepth 8 (libaio)
#   2. latency: 4 KiB O_DIRECT write + fdatasync at queue depth 1 over a pre-written file
#      (--overwrite=1), mean cycle latency = write latency + sync latency.
# Usage: bench/peers/fio-disk.sh DIR [SECONDS=10] [JSON_OUT_DIR]
# Prints both results; with JSON_OUT_DIR, keeps fio's JSON output there (fio-bw.json, fio-lat.json).
# Removes only the files it creates (DIR/ringraft-fio-*).
set -euo pipefail
dir=${1:?usage: fio-disk.sh DIR [SECONDS] [JSON_OUT_DIR]}
secs=${2:-10}
out=${3:-}
if ! command -v fio >/dev/null; then
    apt-get update && apt-get install -y fio
fi
mkdir -p "$dir"
tmp=$(mktemp -d)
bw_file="$dir/ringraft-fio-bw.$$"
lat_file="$dir/ringraft-fio-lat.$$"
cleanup() { rm -f "$bw_file" "$lat_file"; rm -rf "$tmp"; }
trap cleanup EXIT

echo "load: $(cat /proc/loadavg)"
# The latency run goes first: the bandwidth run leaves gigabytes in the host's write-back cache,
# and flushes issued soon after it pay for writing them out.
# Pre-write the file first (and let that write-back settle), so the measured cycles overwrite
# written blocks rather than pay for the layout's flush.
fio --name=layout --filename="$lat_file" --rw=write --bs=1M --direct=1 --size=64M >/dev/null
sync; sleep 5
fio --name=syncwrite --filename="$lat_file" --rw=write --bs=4k --iodepth=1 --ioengine=psync \
    --direct=1 --fdatasync=1 --overwrite=1 --size=64M --time_based --runtime="$secs" \
    --output-format=json --output="$tmp/fio-lat.json" >/dev/null
rm -f "$lat_file"

sync; sleep 5
fio --name=seqwrite --filename="$bw_file" --rw=write --bs=1M --iodepth=8 --ioengine=libaio \
    --direct=1 --size=4G --time_based --runtime="$secs" --ramp_time=1 \
    --output-format=json --output="$tmp/fio-bw.json" >/dev/null
rm -f "$bw_file"

python3 - "$tmp/fio-bw.json" "$tmp/fio-lat.json" <<'PY'
import json, sys
bw = json.load(open(sys.argv[1]))["jobs"][0]["write"]
lat_job = json.load(open(sys.argv[2]))["jobs"][0]
write = lat_job["write"]
sync = lat_job["sync"]
write_mean_us = write["clat_ns"]["mean"] / 1000 + write.get("slat_ns", {}).get("mean", 0) / 1000
sync_mean_us = sync["lat_ns"]["mean"] / 1000
print(f"fio O_DIRECT seq write 1 MiB iodepth 8: {bw['bw_bytes'] / 1e6:.1f} MB/s")
print(f"fio 4 KiB O_DIRECT write + fdatasync qd1 (pre-written): {write['iops']:.0f} cycles/s, "
      f"mean cycle {write_mean_us + sync_mean_us:.1f} us (write {write_mean_us:.1f} + fdatasync {sync_mean_us:.1f}; "
      f"1/rate {1e6 / max(write['iops'], 1e-9):.1f} us), "
      f"fdatasync p50 {sync['lat_ns']['percentile'].get('50.000000', 0) / 1000:.1f} us "
      f"p99 {sync['lat_ns']['percentile'].get('99.000000', 0) / 1000:.1f} us")
PY
echo "load: $(cat /proc/loadavg)"
if [ -n "$out" ]; then mkdir -p "$out"; cp "$tmp"/fio-*.json "$out"/; fi
