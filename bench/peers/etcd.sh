#!/usr/bin/env bash
# etcd 3.4 (Debian's etcd-server / etcd-client) as the peer: 3 members on 127.0.0.1 with their
# default fsync'd WAL, data under a temporary directory on the disk holding TMPDIR (ext4 /tmp
# here), Put load at the leader from bench/peers/etcd_put.py.
# Usage: bench/peers/etcd.sh [-d SECONDS=10] [-v VALUE_BYTES=1024] [-p PROCESSES=auto]
#                            [-o OUT_DIR] INFLIGHT...
#   e.g. bench/peers/etcd.sh -d 10 -o /tmp/out 1 128 256 512
# Starts the cluster once and runs one load per INFLIGHT value (the disk settled before each),
# printing each result as JSON and, with -o, writing OUT_DIR/etcd-inflight-N.json.
# Every etcd process is killed and the data removed on any exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=pip_install.sh
source "$here/pip_install.sh"
# shellcheck source-path=SCRIPTDIR source=peer_load.sh
source "$here/peer_load.sh"

parse_peer_args "$@"

if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    apt-get update
    # policy-rc.d keeps the package's own service from starting in containers; stop it anyway
    # if it did, so only our members run.
    DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server etcd-client
    if command -v systemctl >/dev/null; then systemctl stop etcd 2>/dev/null || true; fi
fi
pip_install grpc grpcio
export ETCDCTL_API=3

peer_work etcd

# Six free loopback ports (client and peer for each member), asked of the kernel.
read -r -a ports <<<"$(free_ports 6)"
cluster=""
for i in 0 1 2; do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:${ports[$((2 * i + 1))]}"
done
endpoints=""
for i in 0 1 2; do
    client=${ports[$((2 * i))]}
    peer=${ports[$((2 * i + 1))]}
    endpoints+="${endpoints:+,}127.0.0.1:$client"
    etcd --name "m$i" --data-dir "$work/m$i" \
        --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "ringraft-bench-$$" \
        --logger zap --log-outputs "$work/m$i.log" 2>>"$work/m$i.stderr" &
    pids+=($!)
done
echo "etcd $(etcd --version | head -1 | awk '{print $3}'): 3 members, data in $work, clients $endpoints"

# Healthy: every member answers and one of them is the leader; at most 30 s.
leader=""
for _ in $(seq 1 150); do
    for pid in "${pids[@]}"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "etcd member $pid exited; its log:" >&2; tail -20 "$work"/m*.log >&2; exit 1
        fi
    done
    if etcdctl --endpoints "$endpoints" endpoint health >/dev/null 2>&1; then
        leader=$(etcdctl --endpoints "$endpoints" endpoint status -w json 2>/dev/null | python3 -c '
import json, sys
for member in json.load(sys.stdin):
    status = member["Status"]
    if status["leader"] and status["header"]["member_id"] == status["leader"]:
        print(member["Endpoint"])
' || true)
        if [ -n "$leader" ]; then break; fi
    fi
    sleep 0.2
done
if [ -z "$leader" ]; then echo "etcd cluster not healthy after 30 s" >&2; exit 1; fi
echo "leader: $leader"

run_loads etcd "$here/etcd_put.py" "$leader" "$work"
