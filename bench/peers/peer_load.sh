#!/usr/bin/env bash
# Sourced by the peer scripts (etcd.sh, zookeeper.sh), which take the same options, ask the kernel
# for their members' ports the same way and run one load per INFLIGHT value the same way.

# shellcheck source-path=SCRIPTDIR source=settle.sh
source "$(dirname "${BASH_SOURCE[0]}")/settle.sh"

# peer_work NAME [GRACE_S]: $work, a new temporary directory for the members' data on the disk
# holding TMPDIR, and $pids, empty, for the members the script starts. On any exit (Ctrl-C and
# SIGTERM exit 130) every member gets SIGTERM, then with GRACE_S SIGKILL if still running that
# many seconds later; $work is removed once they are gone.
peer_work() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/ringraft-$1.XXXXXX")
    pids=()
    peer_grace_s=${2:-}
    trap stop_members EXIT
    trap 'exit 130' INT TERM
}

stop_members() {
    local pid i alive polls
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -n "$peer_grace_s" ]; then
        polls=$((peer_grace_s * 5))
        for i in $(seq 1 "$polls"); do
            alive=0
            for pid in "${pids[@]}"; do if kill -0 "$pid" 2>/dev/null; then alive=1; fi; done
            if [ "$alive" = 0 ]; then break; fi
            if [ "$i" = "$polls" ]; then
                for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
            fi
            sleep 0.2
        done
    fi
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}

# parse_peer_args "$@": [-d SECONDS=10] [-v VALUE_BYTES=1024] [-p PROCESSES=0, auto]
# [-o OUT_DIR] INFLIGHT... into secs, value_bytes, processes, out and the array inflights
# (1 when none is given); a bad option prints the usage and exits 2.
parse_peer_args() {
    local opt OPTIND=1
    secs=10
    value_bytes=1024
    processes=0
    out=""
    while getopts "d:v:p:o:" opt; do
        case $opt in
            d) secs=$OPTARG ;;
            v) value_bytes=$OPTARG ;;
            p) processes=$OPTARG ;;
            o) out=$OPTARG ;;
            *) echo "usage: $(basename "$0") [-d SECONDS] [-v VALUE_BYTES] [-p PROCESSES] [-o OUT_DIR] INFLIGHT..." >&2; exit 2 ;;
        esac
    done
    shift $((OPTIND - 1))
    if [ $# -eq 0 ]; then set -- 1; fi
    inflights=("$@")
}

# free_ports COUNT: COUNT free loopback ports, asked of the kernel, on one line.
free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# run_loads NAME DRIVER LEADER DIR: for each of inflights, settles the disk holding DIR, then
# runs the Python load DRIVER against LEADER with the parsed options, its JSON result also
# written to OUT_DIR/NAME-inflight-N.json with -o.
run_loads() {
    local name=$1 driver=$2 leader=$3 dir=$4 inflight json_arg
    for inflight in "${inflights[@]}"; do
        settle_disk "$dir"
        json_arg=()
        if [ -n "$out" ]; then mkdir -p "$out"; json_arg=(--json "$out/$name-inflight-$inflight.json"); fi
        python3 "$driver" --endpoint "$leader" --inflight "$inflight" \
            --value-bytes "$value_bytes" --duration "$secs" --processes "$processes" "${json_arg[@]}"
    done
}
