#!/usr/bin/env bash
# Prepare a real Docker engine for the docker tests; safe to run again (idempotent).
#
#   1. start dockerd if nothing answers (log: $ISOCOST_CI_LOGDIR/dockerd.log), wait up to 60 s;
#   2. start a registry on 127.0.0.1:5000 (Debian's docker-registry, storage under $ISOCOST_CACHE);
#   3. build the local base image isocost-base/bookworm:local with debootstrap, only if it is
#      missing (/var/lib/docker persists between CI runs on the same machine, so it is cached);
#   4. isocost images build --stack cpu --base isocost-base/bookworm:local, then --stack cpu-vllm (engine vllm's
#      own image, 3.7 GB: about 2.5 min here with the wheels at hand; its 860 MB wheelhouse downloads in about a
#      minute). The wheelhouses are cached in images/<stack>/wheels; the engine's layer cache does the rest.
#
# No registry can be pulled from on this network: the base is made locally and the override is
# recorded in images/images.lock and as an image label. Env: PYTHON (with isocost installed),
# ISOCOST_IMAGES_LOCK (where the lock goes), ISOCOST_SKIP_IMAGE_BUILD=1 (stop after step 3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOGDIR="${ISOCOST_CI_LOGDIR:-/tmp/isocost-ci}"
CACHE="${ISOCOST_CACHE:-/var/cache/isocost}"
BASE_IMAGE="${ISOCOST_BASE_IMAGE:-isocost-base/bookworm:local}"
REGISTRY_ADDR="${ISOCOST_REGISTRY:-127.0.0.1:5000}"
DEBIAN_MIRROR="${ISOCOST_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$LOGDIR" "$CACHE"

say() { printf 'docker-setup: %s\n' "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }

need_packages=()
command -v dockerd >/dev/null || need_packages+=(docker.io)
command -v docker-registry >/dev/null || need_packages+=(docker-registry)
command -v debootstrap >/dev/null || need_packages+=(debootstrap)
if ((${#need_packages[@]})); then
    say "installing ${need_packages[*]} (apt-get)"
    apt-get update -qq >"$LOGDIR/apt.log" 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_packages[@]}" >>"$LOGDIR/apt.log" 2>&1 \
        || die "apt-get install ${need_packages[*]} (see $LOGDIR/apt.log)"
fi

# -- 1. the engine -----------------------------------------------------------------------------
if docker info >/dev/null 2>&1; then
    say "engine already answers"
else
    say "starting dockerd (log: $LOGDIR/dockerd.log)"
    setsid dockerd >"$LOGDIR/dockerd.log" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        tail -n 30 "$LOGDIR/dockerd.log" >&2 || true
        die "dockerd did not answer within 60 s (log above: $LOGDIR/dockerd.log)"
    fi
    say "engine answers: $(docker version --format '{{.Server.Version}}')"
fi

# -- 2. the registry ---------------------------------------------------------------------------
registry_up() {
    python3 - "$REGISTRY_ADDR" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(f"http://{sys.argv[1]}/v2/", timeout=2).read()
EOF
}
if registry_up; then
    say "registry already answers on $REGISTRY_ADDR"
else
    conf_dir="$(mktemp -d /tmp/isocost-registry.XXXXXX)"
    mkdir -p "$CACHE/registry"
    cat >"$conf_dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $CACHE/registry
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
EOF
    say "starting docker-registry on $REGISTRY_ADDR (log: $LOGDIR/registry.log)"
    setsid docker-registry serve "$conf_dir/config.yml" >"$LOGDIR/registry.log" 2>&1 < /dev/null &
    for _ in $(seq 1 30); do
        registry_up && break
        sleep 1
    done
    registry_up || { tail -n 20 "$LOGDIR/registry.log" >&2 || true; die "registry did not answer on $REGISTRY_ADDR"; }
fi

# -- 3. the local base image -------------------------------------------------------------------
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "base image $BASE_IMAGE present (cached)"
else
    rootfs="$(mktemp -d /tmp/isocost-rootfs.XXXXXX)"
    say "building $BASE_IMAGE with debootstrap (about a minute; log: $LOGDIR/debootstrap.log)"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        bookworm "$rootfs" "$DEBIAN_MIRROR" >"$LOGDIR/debootstrap.log" 2>&1 \
        || { tail -n 20 "$LOGDIR/debootstrap.log" >&2; die "debootstrap"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' \
        --message "debootstrap --variant=minbase bookworm $DEBIAN_MIRROR" - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
    say "base image built: $(docker image inspect --format '{{.Id}}' "$BASE_IMAGE")"
fi

# -- 4. the CPU image --------------------------------------------------------------------------
if [[ "${ISOCOST_SKIP_IMAGE_BUILD:-0}" == 1 ]]; then
    say "skipping the image build (ISOCOST_SKIP_IMAGE_BUILD=1)"
    exit 0
fi
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
lock_args=()
[[ -n "${ISOCOST_IMAGES_LOCK:-}" ]] && lock_args=(--lock "$ISOCOST_IMAGES_LOCK")
for stack in cpu cpu-vllm; do
    say "building the $stack image on $BASE_IMAGE"
    (cd "$ROOT" && "$PYTHON" -m runner.cli images build --stack "$stack" --base "$BASE_IMAGE" "${lock_args[@]}") \
        || die "isocost images build --stack $stack --base $BASE_IMAGE"
done
say "ready"
