#!/usr/bin/env bash
# Make a real sandbox available to the tests: Docker engine + sandbox image, and bubblewrap.
# Idempotent; run as root from the repository root (CI calls it from .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v debootstrap >/dev/null || need+=(debootstrap)
# bwrap runs the host's own /usr: the tools a coding task expects there (tests/test_sandbox_seccomp.py)
/usr/bin/python3 -c "import pytest" 2>/dev/null || need+=(python3-pytest)
/usr/bin/python3 -c "import ensurepip, pip" 2>/dev/null || need+=(python3-venv python3-pip)
command -v make >/dev/null || need+=(make)
command -v gcc >/dev/null || need+=(gcc)
if ((${#need[@]})); then
    echo "sandbox-setup: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    echo "sandbox-setup: starting dockerd"
    nohup dockerd >/tmp/dockerd.log 2>&1 &
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { echo "dockerd did not come up:"; tail -20 /tmp/dockerd.log; exit 1; }
fi

image="${SANDBOX_IMAGE:-lmagent-sandbox:latest}"
# (re)build when the image is missing or older than today's package list (python, gcc, pytest)
if ! docker run --rm --network none "$image" sh -c 'command -v python && command -v gcc && command -v pytest' >/dev/null 2>&1; then
    echo "sandbox-setup: building $image"
    python sandboxed_shell.py --build
fi
# checked in a folder of its own: a workspace gets a .lmagent.md (the sandbox's mount point)
checked="$(mktemp -d)"
WORKSPACE="$checked" SANDBOX_BACKEND=docker python sandboxed_shell.py --check
WORKSPACE="$checked" SANDBOX_BACKEND=bwrap python sandboxed_shell.py --check
rm -rf "$checked"
