"""Pinned images: lock the Python dependencies, build, push, and record every image by digest.

Two identities of one image, never to be confused:

- **image ID** (``image_id``, ``sha256:…``): the digest of the image's config JSON. Every local
  image has one from the moment it is built. It cannot be pulled from a registry.
- **repo digest** (``repo_digest``, ``REPO@sha256:…``): the digest of the registry manifest. It
  exists only after the image was pushed to (or pulled from) a registry, and it is what another
  host pulls to replay a trial exactly (``isocost run … --image REPO@sha256:…``).

Both are recorded in ``images/images.lock`` (sorted JSON, ``schema_version``), one entry per
stack, together with the base image (name and digest), the build arguments (including a
``--base`` override), the git revision, the build time and the image size.

Python dependencies come from ``images/<stack>/requirements.lock`` (exact versions, sha256
hashes), generated from ``requirements.in`` by :func:`lock_requirements`; the wheels it names are
downloaded on the host into a wheelhouse and installed in the image with ``--no-index``, so the
build needs no network inside the engine.

This module builds and pushes; the pieces live beside it: the stacks and where their files are
(:mod:`runner.images.stacks`), the dependency lock and wheelhouse (:mod:`runner.images.requirements`),
the build context (:mod:`runner.images.context`) and ``images.lock`` (:mod:`runner.images.lock`).
It is a library (no click) and imports the docker SDK lazily.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from runner.images.context import assemble_context, git_revision, git_source
from runner.images.debs import ensure_debs
from runner.images.lock import ImageRecord, default_lock_path, read_lock, update_lock
from runner.images.requirements import ensure_wheelhouse, sha256_of
from runner.images.stacks import (
    IMAGE_REPOSITORY,
    Progress,
    default_base,
    quiet,
    repo_root,
    requirements_paths,
    stack_spec,
)
from runner.launch.daemon.client import connect_daemon, daemon_facts

# -- the dependency lock -----------------------------------------------------------------------






















# -- records ------------------------------------------------------------------------------------












# -- building -----------------------------------------------------------------------------------










@dataclass(frozen=True)
class BaseFacts:
    ref: str
    digest: str
    digest_kind: str
    image_id: str


def _base_facts(client: Any, ref: str, *, override: bool, progress: Progress) -> BaseFacts:
    """The base must be present locally, or pullable; say clearly when it is neither."""
    import docker.errors

    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        progress(f"base {ref} not present locally: pulling it")
        try:
            image = client.images.pull(ref)
        except docker.errors.APIError as exc:
            raise UserError(
                f"the base image {ref} is not present locally and could not be pulled (no registry reachable "
                f"from this engine, or the reference is unknown: {exc.explanation or exc})",
                "--base" if override else "Dockerfile ARG BASE_IMAGE",
                "Pull it on a host with registry access and move it here (docker save | docker load), or build "
                "on a local base with --base IMAGE (e.g. isocost-base/bookworm:local from .ci/docker-setup.sh; "
                "the override is recorded)."
            ) from None
    except docker.errors.APIError as exc:  # not a reference at all: "invalid reference format", control characters
        raise UserError(f"the engine refuses the base image reference {ref!a}: {exc.explanation or exc}",
                        "--base" if override else "Dockerfile ARG BASE_IMAGE",
                        "Name an image as REPOSITORY[:TAG][@sha256:DIGEST], e.g. isocost-base/bookworm:local.") \
            from None
    repo_digests = sorted(image.attrs.get("RepoDigests") or [])
    if "@sha256:" in ref:
        digest, kind = "sha256:" + ref.split("@sha256:", 1)[1], "repo-digest"
    elif repo_digests:
        digest, kind = repo_digests[0].split("@", 1)[1], "repo-digest"
    else:
        digest, kind = image.id, "image-id"
    return BaseFacts(ref=ref, digest=digest, digest_kind=kind, image_id=image.id)


def _docker_build(client: Any, ctx: Path, tag: str, build_args: dict[str, str], progress: Progress,
                  no_cache: bool) -> str:
    """Build with the engine's classic builder, streaming its steps; returns the image ID."""
    import docker.errors

    image_id = ""
    tail: list[str] = []
    try:
        # network_mode none: every input is in the build context (the hashed wheelhouse), so no RUN step
        # may reach a network; this also builds on daemons without a default bridge.
        stream = client.api.build(path=str(ctx), tag=tag, buildargs=build_args, rm=True, forcerm=True, pull=False,
                                  nocache=no_cache, decode=True, timeout=3600, network_mode="none")
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise UserError(f"the image build failed: {detail.strip()}\n" + "".join(tail[-15:]),
                                str(ctx / "Dockerfile"), "Fix the step above and build again.")
            text = chunk.get("stream", "")
            if text:
                tail.append(text)
                if text.startswith("Step "):
                    progress(text.strip())
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = aux["ID"]
    except docker.errors.APIError as exc:
        raise UserError(f"the engine refused the build: {exc.explanation or exc}", tag) from None
    if not image_id:
        image_id = client.images.get(tag).id
    return image_id


def build_image(
    stack: str,
    base_override: str | None = None,
    *,
    root: Path | None = None,
    lock_path: Path | None = None,
    client: Any = None,
    no_cache: bool = False,
    progress: Progress = quiet,
) -> ImageRecord:
    """Build a stack's image and record it in the images lock; returns the record.

    ``base_override`` replaces the Dockerfile's pinned base (air-gapped hosts, CI); it is passed as
    the ``BASE_IMAGE`` build argument, kept as a label and recorded as ``base_override``.
    """
    root = repo_root(root)
    spec = stack_spec(stack)
    lock_path = lock_path or default_lock_path(root)
    base = base_override or default_base(spec.name, root)
    client = client or connect_daemon(timeout_s=3600)
    base_facts = _base_facts(client, base, override=bool(base_override), progress=progress)
    wheels = ensure_wheelhouse(stack, root=root, progress=progress)
    debs = ensure_debs(stack, root=root, progress=progress)
    tag, build_args = _tag_and_build_args(stack, root, base, base_facts, base_override)
    cached = bool(client.images.list(filters={"label": [f"org.isocost.stack={stack}", "org.isocost.requirements."
                                                        f"sha256={build_args['REQUIREMENTS_SHA256']}"]}))
    check_build_space(client, stack, sum(path.stat().st_size for path in [*wheels, *debs]), cached=cached)
    progress(f"building {tag} on {base}" + (" (base override)" if base_override else ""))
    with tempfile.TemporaryDirectory(prefix="isocost-build-") as tmp:
        ctx = Path(tmp)
        assemble_context(ctx, stack, root, wheels, debs)
        start = time.perf_counter()
        image_id = _docker_build(client, ctx, tag, build_args, progress, no_cache)
        build_s = time.perf_counter() - start
    image = client.images.get(image_id)
    record = ImageRecord(
        stack=stack,
        tag=tag,
        image_id=image.id,
        repo_digest="",
        base=base,
        base_digest=base_facts.digest,
        base_digest_kind=base_facts.digest_kind,
        base_override=bool(base_override),
        build_args=build_args,
        revision=build_args["REVISION"],
        requirements_sha256=build_args["REQUIREMENTS_SHA256"],
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        build_s=round(build_s, 3),
        size_bytes=int(image.attrs.get("Size") or 0),
        engine=daemon_facts(client),
    )
    update_lock(lock_path, record)
    progress(f"built {tag}: image ID {record.image_id}, {record.size_bytes / 1e9:.2f} GB, {build_s:.1f} s")
    return record


#: Disk a cold build takes per byte of its wheelhouse, measured on the cuda images (2026-12-06): on the daemon's
#: data root the context's copy, the stage-1 image (wheels and venv, left behind dangling) and the final image's venv
#: (2.8 GB of wheels: 19 GB, about 7x); in the temporary folder the context this host assembles (1x).
DAEMON_SPACE_FACTOR = 7
CONTEXT_SPACE_FACTOR = 1


def check_build_space(client: Any, stack: str, wheels_bytes: int, *, cached: bool = False) -> None:
    """Refuse, before the build starts, a build the disk cannot hold: the temporary folder (the context) and, for
    a daemon on this machine, Docker's data root, each free enough for a cold build (one filesystem: the sum).
    ``cached``: an image of this stack and lock is in the engine, so its heavy layers come from the layer cache
    and the daemon needs room for the context only."""
    import os
    import shutil

    from runner.launch.daemon.client import is_local_daemon

    needs = {Path(tempfile.gettempdir()): CONTEXT_SPACE_FACTOR * wheels_bytes}
    root = str(client.info().get("DockerRootDir") or "") if is_local_daemon(client) else ""
    if root and Path(root).is_dir():
        needs[Path(root)] = (CONTEXT_SPACE_FACTOR if cached else DAEMON_SPACE_FACTOR) * wheels_bytes
    by_device: dict[int, list[Path]] = {}
    for path in needs:
        by_device.setdefault(os.stat(path).st_dev, []).append(path)
    for paths in by_device.values():
        need, free = sum(needs[p] for p in paths), shutil.disk_usage(paths[0]).free
        if free < need:
            raise UserError(
                f"building the {stack} image needs about {need / 1e9:.1f} GB free on the disk of "
                f"{' and '.join(map(str, paths))} ({wheels_bytes / 1e9:.1f} GB of wheels: the build context, the "
                f"build stage and the image), and {free / 1e9:.1f} GB are free", "isocost images build",
                "Free space (docker image prune; docker builder prune), or point TMPDIR at a larger disk, then build "
                "again; a build from the layer cache needs less, but that is known only once it runs.")


def _tag_and_build_args(stack: str, root: Path, base: str, base_facts: BaseFacts,
                        base_override: str | None) -> tuple[str, dict[str, str]]:
    """The image's tag (version and short revision) and its build arguments (base, revision, lock hash)."""
    from protocol import __version__

    revision = git_revision(root)
    short = revision[:12] if re.match(r"^[0-9a-f]{40}", revision) else "dev"
    tag = f"{IMAGE_REPOSITORY.format(stack=stack)}:{__version__}-{short}"
    build_args = {
        "BASE_IMAGE": base,
        "BASE_DIGEST": base_facts.digest,
        "BASE_OVERRIDE": "true" if base_override else "false",
        "REVISION": revision,
        "SOURCE": git_source(root),
        "REQUIREMENTS_SHA256": sha256_of(requirements_paths(stack, root)[1]),
    }
    return tag, build_args


# -- pushing ------------------------------------------------------------------------------------

_REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")


def push_image(
    stack: str,
    registry: str,
    *,
    lock_path: Path | None = None,
    client: Any = None,
    progress: Progress = quiet,
) -> ImageRecord:
    """Tag the locked image as REGISTRY/isocost/STACK:TAG, push it, record its repo digest."""
    import docker.errors

    if not _REGISTRY.match(registry):
        raise UserError(f"{registry!r} is not HOST[:PORT]", "--registry", "Example: --registry 127.0.0.1:5000.")
    lock_path = lock_path or default_lock_path()
    record = read_lock(lock_path).get(stack)
    if record is None:
        raise UserError(f"no image for stack {stack!r} in the lock", str(lock_path),
                        f"Build it first: isocost images build --stack {stack}.")
    client = client or connect_daemon(timeout_s=3600)
    try:
        image = client.images.get(record.image_id)
    except docker.errors.ImageNotFound:
        raise UserError(f"the locked image {record.image_id} is not in this engine", str(lock_path),
                        f"Rebuild it: isocost images build --stack {stack}.") from None
    repository = f"{registry}/{IMAGE_REPOSITORY.format(stack=stack)}"
    tag = record.tag.rsplit(":", 1)[1]
    image.tag(repository, tag)
    progress(f"pushing {repository}:{tag}")
    pushed = ""
    try:
        for chunk in client.api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise UserError(f"the push to {registry} failed: {detail}", "--registry",
                                "Check that a registry answers there (.ci/docker-setup.sh starts one on "
                                "127.0.0.1:5000).")
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                pushed = aux["Digest"]
    except docker.errors.APIError as exc:
        raise UserError(f"the push to {registry} failed: {exc.explanation or exc}", "--registry") from None
    image.reload()
    digests = [d for d in image.attrs.get("RepoDigests") or [] if d.startswith(repository + "@")]
    repo_digest = f"{repository}@{pushed}" if pushed else (digests[0] if digests else "")
    if not repo_digest or (digests and repo_digest not in digests):
        raise UserError(f"the engine reports no repo digest for {repository} after the push (seen: {digests})",
                        "--registry")
    updated = dataclasses.replace(record, repo_digest=repo_digest, registry=registry,
                                  pushed_at=datetime.now(UTC).isoformat(timespec="seconds"))
    update_lock(lock_path, updated)
    progress(f"pushed: repo digest {repo_digest} (image ID {record.image_id})")
    return updated


__all__ = ["build_image", "push_image"]
