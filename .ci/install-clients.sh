#!/usr/bin/env bash
# Installs the real Kafka clients the process tests drive (docs/clients.md): Debian's `kcat`, and
# a virtualenv at target/venv with kafka-python 3.x and confluent-kafka 2.x. Idempotent: each
# piece is installed only when missing. .ci/run calls it; so can README.md's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v kcat >/dev/null; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat
fi
VENV=target/venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import kafka, confluent_kafka, sys
sys.exit(not (kafka.__version__.startswith("3.") and confluent_kafka.version()[0].startswith("2.")))' 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        'kafka-python>=3,<4' 'confluent-kafka>=2,<3'
fi
