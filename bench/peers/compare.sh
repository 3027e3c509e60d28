#!/usr/bin/env bash
# The peer comparison in one command: fio (the disk's limits), a loopback round trip, ringraft's
# 3-voter cluster, etcd 3.4's 3-member cluster and ZooKeeper 3.8's 3-server ensemble, back to back
# on this machine, the disk settled before each run (settle.sh), then a side-by-side markdown table
# with the ratios issue 5's targets need and ringraft's like-for-like ratios to each peer.
# Usage: bench/peers/compare.sh [-d SECONDS=10] [-o RESULTS_DIR=bench/peers/results]
#        [-n KEY=VALUE]... (each handed to every ringraft node as --node-override, e.g.
#        -n log.sync.mode=dsync; named in the table's command line)
# Writes RESULTS_DIR/compare-<UTC date-time>.md (also printed) and the raw JSON of every run in
# RESULTS_DIR/compare-<UTC date-time>/. Builds the release binaries if they are missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=settle.sh
source "$here/settle.sh"

secs=10
results="$root/bench/peers/results"
node_overrides=()
while getopts "d:o:n:" opt; do
    case $opt in
        d) secs=$OPTARG ;;
        o) results=$OPTARG ;;
        n) node_overrides+=(--node-override "$OPTARG") ;;
        *) echo "usage: compare.sh [-d SECONDS] [-o RESULTS_DIR] [-n KEY=VALUE]..." >&2; exit 2 ;;
    esac
done
command_line="bench/peers/compare.sh $*"

bench_bin="$root/target/release/ringraft-bench"
# Always asked of cargo (a no-op when fresh), so the run never measures a stale build.
(cd "$root" && cargo build --release -p ringraft-tools -p ringraft-bench)
if ! command -v fio >/dev/null; then apt-get update && apt-get install -y fio; fi

stamp=$(date -u +%Y-%m-%d-%H%M)
raw="$results/compare-$stamp"
report="$results/compare-$stamp.md"
mkdir -p "$raw"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ringraft-compare.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
loads="$raw/loads.txt"
: >"$loads"

step() {
    # step NAME: settle the disk, log the load average before the run under NAME.
    local line
    line=$(settle_disk "$scratch")
    echo "$line"
    echo "$1 $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$loads"
}

{
    echo "{\"command\": \"$command_line\", \"started\": \"$(date -u +%FT%TZ)\","
    echo " \"seconds\": $secs, \"kernel\": \"$(uname -r)\", \"cpus\": $(nproc),"
    echo " \"git\": \"$(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown)\"}"
} >"$raw/meta.json"

echo "== fio (disk: $(disk_of "$scratch"))"
step fio
"$here/fio-disk.sh" "$scratch/fio" "$secs" "$raw"

echo "== loopback round trip (unpinned, one vCPU, across vCPUs)"
step rtt
python3 "$here/loopback_rtt.py" --json "$raw/rtt-unpinned.json" >/dev/null
if [ "$(nproc)" -ge 2 ]; then
    python3 "$here/loopback_rtt.py" --cpus 0,0 --json "$raw/rtt-same-cpu.json" >/dev/null
    python3 "$here/loopback_rtt.py" --cpus 0,1 --json "$raw/rtt-across-cpus.json" >/dev/null
fi
python3 - "$raw"/rtt-*.json <<'PY'
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    r = d["rtt_us"]
    print(f"  {d['cpus']}: p50 {r['p50']:.1f} us, p99 {r['p99']:.1f} us, min {r['min']:.1f} us")
PY

# ringraft's own log writer, one 1 KiB batch at a time on the same disk: the write + fdatasync
# the cluster pays, as the log pays it (fio's psync cycle can be far slower on a busy host).
echo "== ringraft log, 1 writer: ringraft-bench log --writers 1 --duration $secs"
step ringraft-log1
"$bench_bin" log --dir "$scratch/log" --duration "$secs" --writers 1 --json "$raw/log-writer1.json" >"$raw/log-writer1.log" 2>&1 || {
    echo "ringraft-bench log failed; its output:" >&2; tail -20 "$raw/log-writer1.log" >&2; exit 1; }
rm -rf "$scratch/log"
tail -3 "$raw/log-writer1.log"

# ringraft: 1 KiB records, acks=-1, fsync on, 3 voters. One record in flight for latency; then
# 16 connections x 16-record batches for throughput; then one record per request with 128 in
# flight, as etcd's 128-in-flight run. --inflight only if this build of ringraft-bench has it
# (then 128 in flight is 16 connections x 8, and 4 connections x 4 in flight carry 16- and
# 64-record batches).
has_inflight=0
# (help captured first: grep -q closing the pipe early would fail the pipeline under pipefail)
bench_help=$("$bench_bin" cluster --help 2>/dev/null || true)
if grep -q -- '--inflight' <<<"$bench_help"; then has_inflight=1; fi
ringraft_runs=(
    "lat1|--connections 1"
    "c16b16|--connections 16 --batch-records 16"
)
if [ "$has_inflight" = 1 ]; then
    ringraft_runs+=(
        "c16i8b1|--connections 16 --inflight 8"
        "c4i4b16|--connections 4 --inflight 4 --batch-records 16"
        "c4i4b64|--connections 4 --inflight 4 --batch-records 64"
    )
else
    ringraft_runs+=("c128b1|--connections 128")
fi
for run in "${ringraft_runs[@]}"; do
    name=${run%%|*}
    flags=${run#*|}
    echo "== ringraft $name: ringraft-bench cluster $flags --duration $secs"
    step "ringraft-$name"
    # shellcheck disable=SC2086 # flags are words
    "$bench_bin" cluster $flags "${node_overrides[@]}" --duration "$secs" --json "$raw/ringraft-$name.json" >"$raw/ringraft-$name.log" 2>&1 || {
        echo "ringraft-bench $name failed; its output:" >&2; tail -20 "$raw/ringraft-$name.log" >&2; exit 1; }
    tail -4 "$raw/ringraft-$name.log"
done

echo "== etcd: 1, 128, 256, 512 puts in flight, 1 KiB values"
step etcd
"$here/etcd.sh" -d "$secs" -v 1024 -o "$raw" 1 128 256 512 >"$raw/etcd.log" 2>&1 || {
    echo "etcd.sh failed; its output:" >&2; tail -30 "$raw/etcd.log" >&2; exit 1; }
grep -E '^(etcd|leader|settle)' "$raw/etcd.log" || true

echo "== zookeeper: 1, 128, 256, 512 creates in flight, 1 KiB values"
step zookeeper
"$here/zookeeper.sh" -d "$secs" -v 1024 -o "$raw" 1 128 256 512 >"$raw/zookeeper.log" 2>&1 || {
    echo "zookeeper.sh failed; its output:" >&2; tail -30 "$raw/zookeeper.log" >&2; exit 1; }
grep -E '^(zookeeper|settle)' "$raw/zookeeper.log" || true

python3 "$here/compare_table.py" "$raw" | tee "$report"
echo "written: $report and $raw/"
