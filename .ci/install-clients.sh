#!/usr/bin/env bash
# Installs the real Kafka clients the process tests drive (docs/clients.md): Debian's `kcat`, and
# a virtualenv at target/venv with kafka-python 3.x, confluent-kafka 2.x and prometheus-client
# (its parser reads /metrics in tools/tests/metrics.rs), and kafkajs 2.x (npm) under target/node
# with Debian's nodejs and npm (tools/tests/groups.rs). Idempotent: each
# piece is installed only when missing. .ci/run calls it; so can README.md's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
apt_install() {
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@"
}
if ! command -v kcat >/dev/null; then
    apt_install kcat
fi
VENV=target/venv
if [ ! -x "$VENV/bin/python" ]; then
    # Debian's python3 makes venvs only with python3-venv (ensurepip) installed.
    if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        apt_install python3 python3-venv
    fi
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import kafka, confluent_kafka, prometheus_client, sys
sys.exit(not (kafka.__version__.startswith("3.") and confluent_kafka.version()[0].startswith("2.")))' 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        'kafka-python>=3,<4' 'confluent-kafka>=2,<3' 'prometheus-client>=0.20,<1'
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt_install nodejs npm
fi
NODE_DIR=target/node
if ! node -e 'process.exit(require(process.argv[1] + "/package.json").version.startsWith("2.") ? 0 : 1)' \
        "$PWD/$NODE_DIR/node_modules/kafkajs" 2>/dev/null; then
    mkdir -p "$NODE_DIR"
    npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent 'kafkajs@>=2 <3'
fi
