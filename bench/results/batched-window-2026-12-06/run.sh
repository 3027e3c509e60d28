#!/usr/bin/env bash
# Target 2 (batched) at the window and at two larger ones, 3 interleaved rounds, the disk
# settled before each run; fio's bandwidth first, on the same disk. Run from the repository root
# after `cargo build --release -p ringraft-tools -p ringraft-bench`.
set -euo pipefail
out=$(dirname "$0")
B=target/release/ringraft-bench
if [ "${PLAINTEXT_PART:-0}" != 1 ]; then
bench/peers/fio-disk.sh /tmp/rr-fio 10 "$out" | tee "$out/fio.txt"
for round in 1 2 3; do
  for cfg in "c4i4b64|--connections 4 --inflight 4 --batch-records 64" \
             "c4i8b256|--connections 4 --inflight 8 --batch-records 256" \
             "c8i8b64|--connections 8 --inflight 8 --batch-records 64"; do
    name=${cfg%%|*}; args=${cfg#*|}
    sync; sleep 3
    echo "== round $round $name: $args (load $(cut -d' ' -f1-3 /proc/loadavg))"
    # shellcheck disable=SC2086
    $B cluster $args --duration 10 --json "$out/$name-$round.json" 2>&1 | grep -E "records/s|MB/s|latency|cpu" | head -6
  done
done
fi
# Second part (run after the first): the two larger windows with the voters on PLAINTEXT, 2 rounds.
if [ "${PLAINTEXT_PART:-0}" = 1 ]; then
  for round in 1 2; do
    for cfg in "c4i8b256-plain|--connections 4 --inflight 8 --batch-records 256 --security plaintext" \
               "c8i8b64-plain|--connections 8 --inflight 8 --batch-records 64 --security plaintext"; do
      name=${cfg%%|*}; args=${cfg#*|}
      sync; sleep 3
      echo "== round $round $name: $args (load $(cut -d' ' -f1-3 /proc/loadavg))"
      # shellcheck disable=SC2086
      $B cluster $args --duration 10 --json "$out/$name-$round.json" 2>&1 | grep -E "summary|commit latency"
    done
  done
fi
