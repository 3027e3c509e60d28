#!/usr/bin/env bash
# Reassignment under load (docs/benchmarks.md, "Changing the voters under load"): three voters
# and an observer (node 4) on 127.0.0.1, `ringraft-bench` driving 1 KiB acks=-1 records at the
# leader, and after BEFORE seconds of load a voter that is not the leader (the highest id) is
# replaced by node 4 with `ringraft quorum reassign --voters ... --wait`. Prints how long the
# reassignment took, the load generator's records/s per second, and the mean records/s of the
# seconds the reassignment overlapped as a ratio of the seconds before it.
#
#   cargo build --release -p ringraft-tools -p ringraft-bench && bench/reassign.sh
#
# Environment: DURATION (s of measured load, default 20), BEFORE (s of load before the change,
# default 8), CONNECTIONS (default 16), DIR (default a new temporary directory, removed after).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release
DURATION=${DURATION:-20}
BEFORE=${BEFORE:-8}
CONNECTIONS=${CONNECTIONS:-16}
DIR=${DIR:-$(mktemp -d /tmp/ringraft-reassign.XXXXXX)}
BASE=$((20000 + RANDOM % 20000))
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

port() { echo $((BASE + $1)); }
voters="1@127.0.0.1:$(port 1),2@127.0.0.1:$(port 2),3@127.0.0.1:$(port 3)"
servers="127.0.0.1:$(port 1),127.0.0.1:$(port 2),127.0.0.1:$(port 3),127.0.0.1:$(port 4)"
for i in 1 2 3 4; do
    cat > "$DIR/server-$i.properties" <<EOF
broker.id=$i
cluster.id=reassign-bench
listeners=PLAINTEXT://127.0.0.1:$(port $i)
log.dirs=$DIR/node-$i
quorum.voters=$voters
EOF
    "$BIN/ringraft" serve --config "$DIR/server-$i.properties" > "$DIR/node-$i.log" 2>&1 &
    pids+=($!)
done
quorum() { "$BIN/ringraft" quorum --bootstrap-server "$servers" --timeout-ms 60000 "$@"; }

status=$(quorum describe --status)
leader=$(awk '/^LeaderId:/ {print $2}' <<<"$status")
for _ in $(seq 100); do
    quorum describe --replication | grep -qE '^4 .*Observer' && break
    sleep 0.1
done
quorum describe --replication | grep -qE '^4 .*Observer' || { echo "node 4 never fetched" >&2; exit 1; }
removed=$(for v in 3 2 1; do [ "$v" != "$leader" ] && echo "$v" && break; done)
target=$(for v in 1 2 3 4; do [ "$v" != "$removed" ] && echo "$v"; done | paste -sd, -)
echo "leader $leader; replacing voter $removed by node 4: --voters $target"

"$BIN/ringraft-bench" --bootstrap-server "$servers" --duration "$DURATION" --warmup 1 \
    --connections "$CONNECTIONS" --record-bytes 1024 --acks -1 > "$DIR/bench.out" 2>&1 &
bench=$!
t0=$(date +%s.%N)
# The measured seconds start after the leader is found and a second of warm-up.
sleep $((BEFORE + 1))
t1=$(date +%s.%N)
quorum reassign --voters "$target" --wait
t2=$(date +%s.%N)
wait "$bench"
cat "$DIR/bench.out"
quorum describe --status
awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
    # Lines of the per-second table: end second, records/s, ...
    $1 ~ /^[0-9]+$/ && NF >= 5 && $2 ~ /^[0-9]+$/ { rate[$1] = $2; n = $1 > n ? $1 : n }
    END {
        start = t1 - t0 - 1; end = t2 - t0 - 1
        for (s = 1; s <= n; s++) {
            if (s <= start) { before += rate[s]; nb++ }
            else if (s - 1 < end) { during += rate[s]; nd++ }
        }
        printf "reassignment took %.0f ms (AlterQuorum sent to voters == target, --wait)\n", (t2 - t1) * 1000
        if (nb && nd) printf "records/s: %.0f in the %d s before, %.0f in the %d s it overlapped: ratio %.2f (load average %s)\n", before / nb, nb, during / nd, nd, (during / nd) / (before / nb), load
    }' "$DIR/bench.out"
