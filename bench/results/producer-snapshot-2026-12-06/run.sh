#!/usr/bin/env bash
# Start-up cost of the producer-state rebuild with and without the producer-state snapshot
# (docs/benchmarks.md, "Producer-state rebuild at start"). One voter on 127.0.0.1, its log on
# this machine's ext4 disk, filled for SECONDS (argument 1, default 4) with 1 KiB records in
# one-record batches by ringraft-bench (its size is printed). Then ROUNDS (argument 2, default
# 3) alternating pairs of starts, each after a graceful stop (once the node leads again, so
# that its stop writes a snapshot) and with the page cache dropped: "snapshot" with the file
# the previous stop wrote, "whole log" with it removed. Prints the start-up line of each start
# and writes them to starts.txt beside this script.
set -euo pipefail
seconds=${1:-4}
rounds=${2:-3}
out=$(cd "$(dirname "$0")" && pwd)
cd "$(git rev-parse --show-toplevel)"
R=target/release/ringraft
B=target/release/ringraft-bench
dir=$(mktemp -d -p /var/tmp rrsnap.XXXXXX)
port=$((20000 + RANDOM % 20000))
trap 'kill $(cat "$dir/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/server.properties" <<PROPS
broker.id=1
cluster.id=snapshot-bench
log.dirs=$dir/log
quorum.voters=1@127.0.0.1:$port
listeners=PLAINTEXT://127.0.0.1:$port
PROPS

start() { # $1: what; waits for the start-up line, then for the node to lead
  : > "$dir/stderr"
  RUST_LOG=warn,net::node::runtime=info "$R" serve --config "$dir/server.properties" \
    2> "$dir/stderr" & echo $! > "$dir/pid"
  for _ in $(seq 1 600); do
    grep -q "role changed.*Leader" "$dir/stderr" && break
    sleep 0.1
  done
  sleep 1
  line=$(grep "rebuilt the producer state" "$dir/stderr")
  echo "$1: $line" | tee -a "$out/starts.txt"
}
stop() {
  kill -TERM "$(cat "$dir/pid")"
  for _ in $(seq 1 300); do kill -0 "$(cat "$dir/pid")" 2>/dev/null || return 0; sleep 0.1; done
  echo "the node did not stop" >&2; exit 1
}

: > "$out/starts.txt"
start "empty"
# One-record batches: the rebuild's cost is per batch (docs/benchmarks.md).
"$B" --bootstrap-server "127.0.0.1:$port" --duration "$seconds" --record-bytes 1024 \
  --batch-records 1 --connections 16 --inflight 8 > "$dir/fill.txt"
tail -3 "$dir/fill.txt"
du -sh "$dir/log" | tee -a "$out/starts.txt"
stop
for round in $(seq 1 "$rounds"); do
  sync; echo 3 > /proc/sys/vm/drop_caches
  start "round $round snapshot"
  stop
  rm "$dir/log/producer-state.snapshot"
  sync; echo 3 > /proc/sys/vm/drop_caches
  start "round $round whole log"
  stop
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/starts.txt"
