#!/usr/bin/env bash
# A/B comparison of two `ringraft` builds under the same `ringraft-bench cluster` load, rounds
# interleaved (A, B, A, B, ...) with the disk settled before each run, as docs/benchmarks.md asks
# of every performance change ("Before and after: bench/ab.sh").
#   bench/ab.sh OUT_DIR ROUNDS A_RINGRAFT B_RINGRAFT -- [ringraft-bench cluster args...]
# Writes OUT_DIR/{a,b}-rN.json and .log, then the table with B's ratios to A to OUT_DIR/table.md
# (bench/rounds.sh, which this is two variants of; the binaries' paths must have no spaces).
set -euo pipefail
usage="usage: ab.sh OUT_DIR ROUNDS A_RINGRAFT B_RINGRAFT -- ARGS..."
out=${1:?$usage}
rounds=${2:?$usage}
a_bin=$(realpath "${3:?A ringraft binary}")
b_bin=$(realpath "${4:?B ringraft binary}")
shift 4
[ "${1:-}" = "--" ] && shift
exec "$(dirname "$0")/rounds.sh" "$out" "$rounds" "a:--ringraft-bin $a_bin" \
    "b:--ringraft-bin $b_bin" -- "$@"
