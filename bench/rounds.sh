#!/usr/bin/env bash
# Variants of one `ringraft-bench cluster` load, run in interleaved rounds (every variant once
# per round, in the order given) with the disk settled before each run, as docs/benchmarks.md
# asks of every comparison:
#   bench/rounds.sh OUT_DIR ROUNDS 'NAME:ARGS' 'NAME:ARGS' ... [-- COMMON_ARGS...]
# Variant NAME runs `ringraft-bench cluster ARGS COMMON_ARGS` (ARGS split on white space) and
# writes OUT_DIR/NAME-rN.json and .log; then bench/rounds_table.py writes OUT_DIR/table.md: each
# run, and each variant's ratios to the first in the same round with their medians.
# RINGRAFT_BENCH (default target/release/ringraft-bench) drives every run.
set -euo pipefail
usage="usage: rounds.sh OUT_DIR ROUNDS NAME:ARGS... [-- COMMON_ARGS...]"
out=${1:?$usage}
rounds=${2:?$usage}
shift 2
variants=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    variants+=("$1")
    shift
done
[ "${1:-}" = "--" ] && shift
[ ${#variants[@]} -ge 1 ] || { echo "$usage" >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
source bench/peers/settle.sh
bench=${RINGRAFT_BENCH:-target/release/ringraft-bench}
mkdir -p "$out"
{
    echo "common: $*"
    printf 'variant: %s\n' "${variants[@]}"
} > "$out/args.txt"
names=()
for variant in "${variants[@]}"; do
    names+=("${variant%%:*}")
done
for round in $(seq 1 "$rounds"); do
    for variant in "${variants[@]}"; do
        name=${variant%%:*}
        args=()
        [ "$variant" != "$name" ] && read -r -a args <<< "${variant#*:}"
        settle_disk /tmp > /dev/null
        echo "round $round $name start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
        "$bench" cluster "${args[@]}" "$@" --json "$out/$name-r$round.json" \
            > "$out/$name-r$round.log" 2>&1
    done
done
python3 bench/rounds_table.py "$out" "${names[@]}" | tee "$out/table.md"
