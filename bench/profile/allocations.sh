#!/usr/bin/env bash
# Allocations per request on the leader's raft thread (docs/benchmarks.md, "Allocations on the
# per-request path"): uprobes on libc's malloc, free and realloc, counted on that thread for 5 s
# while `ringraft-bench cluster` sends one-record Produce requests at a fixed rate (a uprobe costs
# microseconds: at full load it would change the batching it measures), then the call sites of
# 2 s of mallocs grouped by the first ringraft function above the allocator.
#   bench/profile/allocations.sh OUT_DIR RINGRAFT_BIN [RATE]
# Writes OUT_DIR/counts.txt (per request) and OUT_DIR/sites.txt. Needs root (perf probe).
# RINGRAFT_BENCH (default target/release/ringraft-bench) drives the cluster.
# RINGRAFT_BIN must allocate through glibc: the default build uses mimalloc, whose allocations
# these probes do not see; build one with `cargo build --release -p ringraft-tools
# --no-default-features` (docs/architecture.md, "Memory and the allocator").
set -euo pipefail
out=${1:?usage: allocations.sh OUT_DIR RINGRAFT_BIN [RATE]}
bin=$(realpath "${2:?ringraft binary}")
# (symbols captured first: grep -q closing the pipe early would fail the pipeline under pipefail)
symbols=$(nm "$bin" 2>/dev/null || true)
if grep -qE ' T mi_(malloc_aligned|free)$' <<<"$symbols"; then
    echo "allocations.sh: $bin allocates through mimalloc, which these probes on glibc's malloc do not see;" >&2
    echo "  build one with: cargo build --release -p ringraft-tools --no-default-features" >&2
    exit 2
fi
rate=${3:-3000}
cd "$(git rev-parse --show-toplevel)"
bench=${RINGRAFT_BENCH:-target/release/ringraft-bench}
libc=$(ldd "$bin" | awk '/libc.so/ {print $3}')
mkdir -p "$out"
for fn in malloc free realloc; do
    perf probe -q -x "$libc" --add "$fn" 2>/dev/null || true   # already there is fine
done

# Starts the cluster under load; sets LEADER to the leader's pid.
start_load() {
    "$bench" cluster --ringraft-bin "$bin" --connections 16 --inflight 8 --rate "$rate" \
        --duration "$1" --warmup 2 --security plaintext > "$2" 2>&1 &
    load_pid=$!
    local port=""
    for _ in $(seq 1 100); do
        sleep 0.2
        port=$(grep -o "leader 127.0.0.1:[0-9]*" "$2" | head -1 | cut -d: -f2 || true)
        [ -n "$port" ] && break
    done
    [ -n "$port" ] || { echo "no leader in $2" >&2; exit 1; }
    sleep 3
    LEADER=$(ss -ltnpH "sport = :$port" | grep -o "pid=[0-9]*" | head -1 | cut -d= -f2)
}

start_load 14 "$out/count-run.log"
perf stat -x, -e probe_libc:malloc,probe_libc:free,probe_libc:realloc -t "$LEADER" \
    -o "$out/perf-stat.csv" -- sleep 5
wait "$load_pid"
awk -F, -v n=$((rate * 5)) '/probe_libc/ {printf "%-22s %6.2f per request\n", $3, $1 / n}' \
    "$out/perf-stat.csv" | tee "$out/counts.txt"

start_load 10 "$out/sites-run.log"
perf record -q -e probe_libc:malloc --call-graph dwarf,8192 -t "$LEADER" \
    -o /dev/shm/allocations.perf -- sleep 2 2>/dev/null
wait "$load_pid"
perf script -i /dev/shm/allocations.perf -F event,ip,sym 2>/dev/null \
    | python3 bench/profile/allocation_sites.py $((rate * 2)) > "$out/sites.txt"
rm -f /dev/shm/allocations.perf
head -20 "$out/sites.txt"
