#!/usr/bin/env bash
# Sourced by the peer scripts: pip_install MODULE PACKAGE installs PACKAGE from PyPI for python3
# unless MODULE already imports. Debian's own python3 is marked externally managed (PEP 668) and
# its pip refuses to install there; the drivers' packages (kazoo, grpcio) are not what apt
# manages, so the override is used for that interpreter only. A venv or pyenv python has no
# marker and needs none.

pip_install() {
    local module=$1 package=$2 flags=()
    if python3 -c "import $module" 2>/dev/null; then return 0; fi
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-pip
    fi
    if python3 -c '
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)'; then
        flags=(--break-system-packages)
    fi
    python3 -m pip install "${flags[@]}" "$package"
}
