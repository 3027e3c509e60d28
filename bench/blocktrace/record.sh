#!/bin/bash
# usage: bench/blocktrace/record.sh OUT_DIR [extra ringraft-bench args...]
# The retention soak's load for 100 s, with the block layer traced system-wide from its 35th
# second for 50 s (perf tracepoints; the trace is written to /dev/shm, so the tracer adds no
# writes to the disk it traces). Then: python3 bench/blocktrace/summary.py OUT_DIR/script.txt
set -euo pipefail
out=$1; shift
mkdir -p "$out" /dev/shm/ringraft-blocktrace
sync; sleep 3
target/release/ringraft-bench --batch-records 64 --connections 4 --inflight 4 --rate 80000 \
    --duration 100 --warmup 5 \
    --node-override retention.bytes=2147483648 --node-override log.segment.bytes=268435456 \
    --node-override log.retention.check.interval.ms=5000 --security plaintext \
    --json "$out/bench.json" "$@" > "$out/bench.log" 2>&1 &
bench=$!
sleep 35
perf record -o /dev/shm/ringraft-blocktrace/perf.data -a \
    -e block:block_rq_issue -e block:block_rq_complete -e ext4:ext4_discard_blocks \
    -e syscalls:sys_enter_unlink -e syscalls:sys_enter_unlinkat -e syscalls:sys_enter_renameat2 \
    -e syscalls:sys_enter_fallocate -- sleep 50 > "$out/perf.log" 2>&1
wait "$bench"
perf script -i /dev/shm/ringraft-blocktrace/perf.data -F comm,tid,time,event,trace \
    > /dev/shm/ringraft-blocktrace/script.txt 2>/dev/null
python3 "$(dirname "$0")/summary.py" /dev/shm/ringraft-blocktrace/script.txt > "$out/summary.txt"
gzip -c /dev/shm/ringraft-blocktrace/script.txt > "$out/script.txt.gz"
rm -rf /dev/shm/ringraft-blocktrace
cat "$out/summary.txt"
