#!/usr/bin/env bash
# Renders docs/grafana/ringraft.json from a real run, headless (docs/operations.md, "Metrics"):
# a local Prometheus server (Debian's `prometheus`, installed when missing) scrapes the three
# nodes of the README's cluster every second while ringraft-bench drives it; then
# bench/dashboard/render.py draws every panel of the dashboard from that server's data into
# docs/grafana/ringraft.png. Usage: bench/dashboard/capture.sh [SECONDS] [extra ringraft-bench args]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-120}
shift || true
work=$(mktemp -d /tmp/ringraft-dashboard.XXXXXX)
prom_pid=
cleanup() {
    [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

if ! command -v prometheus >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus
fi
venv=target/dashboard-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q matplotlib==3.9.2
fi
cargo build --release -p ringraft-tools -p ringraft-bench

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo '[]' > "$work/targets.json"
cat > "$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ringraft
    file_sd_configs:
      - files: ["$work/targets.json"]
        refresh_interval: 1s
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$port" --log.level=warn > "$work/prometheus.log" 2>&1 &
prom_pid=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null && break
    sleep 0.1
done
start=$(date +%s)
target/release/ringraft-bench --metrics-scrape-ms 1000 --prometheus-targets "$work/targets.json" \
    --duration "$seconds" "$@"
sleep 3
end=$(date +%s)
# Stat panels show the moment the load ends (the bench's warm-up comes first), before the nodes
# stop and resign.
stat_at=$((start + seconds))
"$venv/bin/python" bench/dashboard/render.py docs/grafana/ringraft.json "http://127.0.0.1:$port" \
    "$start" "$end" "$stat_at" docs/grafana/ringraft.png
