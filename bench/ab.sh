#!/usr/bin/env bash
# A/B comparison of two `ringraft` builds under the same `ringraft-bench cluster` load, rounds
# interleaved (A, B, A, B, ...) with the disk settled before each run, as docs/benchmarks.md asks
# of every performance change ("Before and after: bench/ab.sh").
#   bench/ab.sh OUT_DIR ROUNDS A_RINGRAFT B_RINGRAFT -- [ringraft-bench cluster args...]
# Writes OUT_DIR/{a,b}-rN.json and .log, then the table of bench/ab_table.py to OUT_DIR/table.md.
# RINGRAFT_BENCH (default target/release/ringraft-bench) drives both.
set -euo pipefail
out=${1:?usage: ab.sh OUT_DIR ROUNDS A_RINGRAFT B_RINGRAFT -- ARGS...}
rounds=${2:?rounds}
a_bin=$(realpath "${3:?A ringraft binary}")
b_bin=$(realpath "${4:?B ringraft binary}")
shift 4
[ "${1:-}" = "--" ] && shift
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
bench=${RINGRAFT_BENCH:-target/release/ringraft-bench}
mkdir -p "$out"
echo "args: $*" > "$out/args.txt"
for round in $(seq 1 "$rounds"); do
    for side in a b; do
        bin=$a_bin
        [ "$side" = b ] && bin=$b_bin
        settle_disk /tmp > /dev/null
        echo "round $round $side start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
        "$bench" cluster --ringraft-bin "$bin" "$@" --json "$out/$side-r$round.json" \
            > "$out/$side-r$round.log" 2>&1
    done
done
python3 bench/ab_table.py "$out" | tee "$out/table.md"
