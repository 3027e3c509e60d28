#!/usr/bin/env bash
# ZooKeeper 3.8 (Debian's zookeeper) as the peer: a 3-server ensemble on 127.0.0.1 with every
# transaction fsync'd before it is acknowledged (forceSync=yes, its default, stated), data under a
# temporary directory on the disk holding TMPDIR (ext4 /tmp here), create load at the leader from
# bench/peers/zk_create.py (kazoo, from PyPI).
# Usage: bench/peers/zookeeper.sh [-d SECONDS=10] [-v VALUE_BYTES=1024] [-p PROCESSES=auto]
#                                 [-o OUT_DIR] INFLIGHT...
#   e.g. bench/peers/zookeeper.sh -d 10 -o /tmp/out 1 128 256 512
# Starts the ensemble once and runs one load per INFLIGHT value (the disk settled before each),
# printing each result as JSON and, with -o, writing OUT_DIR/zookeeper-inflight-N.json.
# Every ZooKeeper JVM is killed and the data removed on any exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=pip_install.sh
source "$here/pip_install.sh"
# shellcheck source-path=SCRIPTDIR source=peer_load.sh
source "$here/peer_load.sh"

parse_peer_args "$@"

zk_jar=/usr/share/java/zookeeper.jar
# The jar's manifest brings its dependencies but no slf4j binding; slf4j-simple (libslf4j-java,
# a dependency of the package) sends the servers' log to stderr, which we keep per server.
log_jar=/usr/share/java/slf4j-simple.jar
if [ ! -f "$zk_jar" ] || [ ! -f "$log_jar" ] || ! command -v java >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y zookeeper
    # Only zookeeperd (not installed) ships a service; stop one anyway if it runs, so only our
    # servers do.
    if command -v systemctl >/dev/null; then systemctl stop zookeeper 2>/dev/null || true; fi
fi
pip_install kazoo kazoo

# A JVM's shutdown hooks get 10 s; then it is killed outright, so no server outlives us.
peer_work zookeeper 10

# Nine free loopback ports (client, quorum and election for each server), asked of the kernel.
read -r -a ports <<<"$(free_ports 9)"
servers=""
for i in 1 2 3; do
    servers+="server.$i=127.0.0.1:${ports[$((3 * i - 2))]}:${ports[$((3 * i - 1))]}"$'\n'
done
clients=()
for i in 1 2 3; do
    client=${ports[$((3 * i - 3))]}
    clients+=("$client")
    mkdir -p "$work/zk$i/data"
    echo "$i" >"$work/zk$i/data/myid"
    # tickTime/initLimit/syncLimit are the packaged zoo.cfg's. forceSync is ZooKeeper's default,
    # written out because the comparison rests on it: every transaction is fsync'd to the log
    # before the server acknowledges it. srvr is the one four-letter word the leader search needs.
    cat >"$work/zk$i/zoo.cfg" <<CFG
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$work/zk$i/data
clientPort=$client
clientPortAddress=127.0.0.1
forceSync=yes
admin.enableServer=false
4lw.commands.whitelist=srvr
$servers
CFG
    # -Xmx1g: upstream zkEnv.sh's default server heap; the JVM's own default is a quarter of RAM
    # for each of the three.
    java -Xmx1g -cp "$zk_jar:$log_jar" -Dorg.slf4j.simpleLogger.showDateTime=true \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zk$i/zoo.cfg" \
        >"$work/zk$i.log" 2>&1 &
    pids+=($!)
done
echo "zookeeper: 3 servers, data in $work, client ports ${clients[*]}"

print_logs() {
    local i
    for i in 1 2 3; do echo "--- server $i (tail of $work/zk$i.log)" >&2; tail -20 "$work/zk$i.log" >&2; done
}

# Whole: one server says Mode: leader and the other two Mode: follower (srvr on each client
# port); at most 60 s, for three JVMs starting on two busy cores.
leader=""
version=""
for _ in $(seq 1 120); do
    for pid in "${pids[@]}"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "zookeeper server $pid exited; the logs:" >&2; print_logs; exit 1
        fi
    done
    modes=$(python3 - "${clients[@]}" <<'PY'
import socket, sys
for port in sys.argv[1:]:
    reply = b""
    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=2) as s:
            s.sendall(b"srvr")
            while chunk := s.recv(4096):
                reply += chunk
    except OSError:
        pass
    fields = dict(line.split(": ", 1) for line in reply.decode(errors="replace").splitlines()
                  if ": " in line)
    version = fields.get("Zookeeper version", "-").split("-")[0].split(",")[0]
    print(port, fields.get("Mode", "down"), version)
PY
)
    if [ "$(grep -c ' follower ' <<<"$modes")" = 2 ] && grep -q ' leader ' <<<"$modes"; then
        leader="127.0.0.1:$(awk '$2 == "leader" { print $1 }' <<<"$modes")"
        version=$(awk '$2 == "leader" { print $3 }' <<<"$modes")
        break
    fi
    sleep 0.5
done
if [ -z "$leader" ]; then
    echo "zookeeper ensemble has no leader and two followers after 60 s; srvr said:" >&2
    echo "$modes" >&2
    print_logs
    exit 1
fi
echo "zookeeper $version, leader: $leader"

# The client connects to the leader alone: a follower forwards every write to the leader and
# relays the answer, an extra hop that neither etcd's run (driven at its leader) nor ringraft's
# (clients write to the leader) pays.
run_loads zookeeper "$here/zk_create.py" "$leader" "$work"
