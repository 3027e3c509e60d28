#!/bin/bash
# usage: bench/memory/rss.sh OUT_DIR RINGRAFT_BIN
# 85 s of the retention soak's batched load (80,000 records/s of 1 KiB, plaintext) against the
# given `ringraft` build; each node's RssAnon (from /proc) at 20, 45 and 85 s into OUT_DIR/rss.txt,
# the run's JSON (node_cpu_sec) and output beside it (docs/operations.md, "Memory").
out=${1:?usage: rss.sh OUT_DIR RINGRAFT_BIN}; bin=$(realpath "${2:?usage: rss.sh OUT_DIR RINGRAFT_BIN}")
mkdir -p "$out" && out=$(realpath "$out")
cd "$(dirname "$0")/../.."
sync; sleep 3
( sleep 20; for t in 20 45 85; do
    for p in $(pgrep -x "$(basename "$bin" | cut -c1-15)"); do
        echo "t=$t pid=$p $(grep RssAnon /proc/$p/status | tr -s ' \t' ' ')"
    done
    [ $t = 20 ] && sleep 25; [ $t = 45 ] && sleep 39; done ) > "$out/rss.txt" &
target/release/ringraft-bench --ringraft-bin "$bin" --batch-records 64 --connections 4 --inflight 4 \
    --rate 80000 --duration 85 --warmup 5 --node-override retention.bytes=2147483648 \
    --node-override log.segment.bytes=268435456 --security plaintext \
    --json "$out/bench.json" > "$out/bench.log" 2>&1
wait; echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/rss.txt"
