#!/usr/bin/env bash
# Install what the multi-host tests (tests/multihost) need; safe to run again (idempotent).
#
#   1. Debian's openssh-server (sshd) and openssh-client, installed WITHOUT starting the system's
#      sshd: no service of the package is started (policy-rc.d answers 101 during the install).
#      The tests start their own sshd on 127.0.0.1 only, with their own host key and config,
#      and stop it at the end of the session;
#   2. paramiko in $PYTHON's environment: the docker SDK refuses ssh:// engines without it, even
#      when it shells out to `ssh` (use_ssh_client=True). pyproject declares it (docker[ssh]);
#      this is only a fallback for an environment installed before that.
#
# Docker Engine itself (dockerd, the second engine the tests start) and the registry on
# 127.0.0.1:5000 come from .ci/docker-setup.sh: run it first.
# Env: PYTHON (with isocost installed), ISOCOST_CI_LOGDIR.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOGDIR="${ISOCOST_CI_LOGDIR:-/tmp/isocost-ci}"
mkdir -p "$LOGDIR"
say() { printf 'multihost-setup: %s\n' "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }

need=()
[[ -x /usr/sbin/sshd ]] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
if ((${#need[@]})); then
    say "installing ${need[*]} (apt-get; no service is started)"
    policy=/usr/sbin/policy-rc.d
    saved=""
    if [[ -e "$policy" ]]; then saved="$(mktemp)"; cp -p "$policy" "$saved"; fi
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    restore() { if [[ -n "$saved" ]]; then cp -p "$saved" "$policy"; rm -f "$saved"; else rm -f "$policy"; fi; }
    trap restore EXIT
    apt-get update -qq >"$LOGDIR/apt-multihost.log" 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
        >>"$LOGDIR/apt-multihost.log" 2>&1 || die "apt-get install ${need[*]} (see $LOGDIR/apt-multihost.log)"
    restore
    trap - EXIT
fi
say "sshd: $(/usr/sbin/sshd -V 2>&1 | head -n1 || true)"

PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c "import paramiko" >/dev/null 2>&1; then
    say "installing paramiko into $PYTHON (the docker SDK needs it for ssh:// engines)"
    "$PYTHON" -m pip install --quiet 'paramiko>=3' >>"$LOGDIR/pip-multihost.log" 2>&1 \
        || die "pip install paramiko (see $LOGDIR/pip-multihost.log)"
fi
say "ready (the tests start the second engine and sshd themselves, on 127.0.0.1 only)"
