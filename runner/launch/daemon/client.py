"""The Docker daemon as every launcher sees it: the SDK, a connection, the daemon's facts, exact images.

Shared by the local launcher (:mod:`runner.launch.kinds.docker.launcher`), the shipping launcher
(:mod:`runner.launch.kinds.docker.remote`), the image builder and the multi-host run:

- :func:`docker_sdk` imports the docker SDK, or says how to install it;
- :func:`connect_daemon` reaches DOCKER_HOST (or a base URL) and checks that it answers;
  :func:`daemon_answers` asks without failing;
- :func:`daemon_facts` and :func:`daemon_identity` read what ``docker info`` says about the daemon
  and its machine;
- :func:`resolve_image` names an image exactly (image ID or repo digest, never a tag), pulling a
  digest that is absent;
- :func:`short_error`, :func:`connection_lost` and :func:`transport_errors` turn the SDK's
  exceptions into one line, or tell a lost connection from a daemon's answer.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import UserError

#: The non-root user the images create (``org.isocost.uid`` label); used when the host CLI is root.
IMAGE_UID = 10001

_HEX = re.compile(r"^[0-9a-f]{12,64}$")


def docker_sdk() -> Any:
    """The docker SDK module; a UserError saying how to install it when it is missing."""
    try:
        import docker
    except ImportError:
        raise UserError(
            "the docker Python SDK is not installed",
            "--launcher docker",
            "Install it (pip install 'docker>=7'), or use --launcher process.",
        ) from None
    return docker


# -- the daemon ---------------------------------------------------------------------------------


def connect_daemon(timeout_s: float = 120.0, base_url: str | None = None) -> Any:
    """A docker SDK client for DOCKER_HOST (or ``base_url``); a UserError if no daemon answers."""
    docker = docker_sdk()
    try:
        if base_url:
            client = docker.DockerClient(base_url=base_url, timeout=int(timeout_s))
        else:
            client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except docker.errors.DockerException as exc:
        raise UserError(
            f"no Docker engine answers ({short_error(exc)})",
            os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock",
            "Start dockerd (bash .ci/docker-setup.sh does), set DOCKER_HOST, or use --launcher process.",
        ) from None
    return client


def daemon_answers(timeout_s: float = 5.0) -> tuple[bool, str]:
    """(True, daemon version) if a daemon answers within the timeout, else (False, why not)."""
    try:
        docker = docker_sdk()
    except UserError as exc:
        return False, exc.what
    try:
        client = docker.from_env(timeout=max(int(timeout_s), 1))
    except docker.errors.DockerException as exc:
        return False, short_error(exc)
    try:
        return True, str(client.version().get("Version", "?"))
    except Exception as exc:  # the SDK raises several unrelated types when a daemon half-answers
        return False, short_error(exc)
    finally:
        client.close()


def image_store(client: Any) -> str:
    """``graphdriver`` (Image ID = config digest) or ``containerd`` (Image ID = manifest/index digest)."""
    info = client.info()
    for pair in info.get("DriverStatus") or []:
        if len(pair) == 2 and "containerd.snapshotter" in str(pair[1]):
            return "containerd"
    return "graphdriver"


def daemon_facts(client: Any) -> dict[str, str]:
    info = client.info()
    return {
        "version": str(info.get("ServerVersion", "")),
        "storage_driver": str(info.get("Driver", "")),
        "image_store": image_store(client),
        "cgroup": f"{info.get('CgroupDriver', '')} v{info.get('CgroupVersion', '')}",
    }


def is_local_daemon(client: Any) -> bool:
    base = str(getattr(client.api, "base_url", ""))
    return base.startswith("http+docker://localhost") or base.startswith("http+docker://localunixsocket")


def short_error(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]




def daemon_identity(client: Any) -> dict[str, Any]:
    """Facts that name a daemon and its machine, read from the daemon itself (docker info)."""
    info = client.info()
    return {
        "engine_id": str(info.get("ID", "")),
        "engine_version": str(info.get("ServerVersion", "")),
        "api_version": str(client.api.api_version),
        "name": str(info.get("Name", "")),
        "os": str(info.get("OperatingSystem", "")),
        "kernel": str(info.get("KernelVersion", "")),
        "architecture": str(info.get("Architecture", "")),
        "cpus": int(info.get("NCPU") or 0),
        "memory_bytes": int(info.get("MemTotal") or 0),
        "storage_driver": str(info.get("Driver", "")),
        "image_store": image_store(client),
        "runtimes": sorted((info.get("Runtimes") or {}).keys()),
        "cgroup": f"{info.get('CgroupDriver', '')} v{info.get('CgroupVersion', '')}",
    }


def daemon_address(client: Any) -> str:
    """The daemon as the user named it (unix socket path, or the API's base URL)."""
    socket_path = getattr(getattr(client.api, "_custom_adapter", None), "socket_path", "")
    if socket_path:
        return f"unix://{socket_path}"
    return str(getattr(client.api, "base_url", "")) or "--launcher docker"



def connection_lost(exc: BaseException | None) -> bool:
    """Did a call fail for want of a connection to the daemon (rather than an answer from it)?"""
    import requests

    return isinstance(exc, requests.exceptions.ConnectionError)



def transport_errors() -> tuple[type[BaseException], ...]:
    """What a call fails with when the link to the daemon (not the daemon) fails."""
    import requests

    return (requests.exceptions.RequestException, OSError, ConnectionError)


# -- the image ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedImage:
    """An image named exactly, as the daemon holds it."""

    ref: str  # what containers are created from: REPO@sha256:… or the image ID
    image_id: str  # sha256 of the config (Image ID)
    repo_digest: str  # REPO@sha256:<manifest>, "" if never pushed or pulled
    stack: str  # org.isocost.stack label, "" if the image has none
    uid: int  # org.isocost.uid label
    labels: dict[str, str] = field(default_factory=dict)
    pulled: bool = False


def resolve_image(client: Any, ref: str, *, prefer_digest: str = "", pull: bool = True) -> ResolvedImage:
    """Resolve an image ID or ``REPO@sha256:…``; pull a digest if absent. Tags are refused (they move)."""
    docker = docker_sdk()
    ref = ref.strip()
    pulled = False
    if "@sha256:" in ref:
        digest = ref.split("@", 1)[1]
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            if not pull:
                raise UserError(f"image {ref} is not in this engine", "--image", "Pull it first.") from None
            try:
                image = client.images.pull(ref)
                pulled = True
            except docker.errors.APIError as exc:
                raise UserError(
                    f"image {ref} is not in this engine and could not be pulled: {short_error(exc)}",
                    "--image",
                    "Check that the registry answers from this host and holds that digest.",
                ) from None
        digests = image.attrs.get("RepoDigests") or []
        if not any(d.split("@", 1)[1] == digest for d in digests):
            raise UserError(f"the engine's image for {ref} has other repo digests ({digests})", "--image",
                            "Remove the local image and pull the digest again.")
        repo_digest = ref
    elif ref.startswith("sha256:") or _HEX.match(ref):
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            raise UserError(
                f"no image with ID {ref} in this engine",
                "--image",
                "An image ID cannot be pulled from a registry; pass its repo digest (REPO@sha256:…) instead, "
                "or build it here (isocost images build).",
            ) from None
        digests = sorted(image.attrs.get("RepoDigests") or [])
        repo_digest = prefer_digest if prefer_digest in digests else (digests[0] if digests else "")
        ref = image.id
    else:
        raise UserError(
            f"{ref!r} names an image by tag, and tags move",
            "--image",
            "Name the image by repo digest (REPO@sha256:…) or image ID (sha256:…); `isocost images list` shows both.",
        )
    labels = dict((image.attrs.get("Config") or {}).get("Labels") or {})
    try:
        uid = int(labels.get("org.isocost.uid", IMAGE_UID))
    except ValueError:
        uid = IMAGE_UID
    return ResolvedImage(ref=ref, image_id=image.id, repo_digest=repo_digest, stack=labels.get("org.isocost.stack", ""),
                         uid=uid, labels=labels, pulled=pulled)

