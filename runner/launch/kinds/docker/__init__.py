"""The ``docker`` launcher kind: each trial a fresh container of one exactly named image.

Local daemons run :class:`runner.launch.kinds.docker.launcher.DockerLauncher` (bind mounts); remote daemons (``--host``,
docs/hosts.md) run :class:`runner.launch.kinds.docker.remote.ShippingDockerLauncher`; both write a
:class:`runner.launch.kinds.docker.record.DockerRecord`. ``--launcher docker`` (or an image named by ``--image`` or
the study's ``[images]``) requires a daemon and an image, and fails with the reason; ``auto`` asks this kind
first and takes it when a daemon answers and the locked image resolves. A replay runs the originals' exact
image (repo digest, else image ID).

Example::

    KIND.auto(request)   # a LauncherChoice, or a Decline("no Docker engine answers (…)", "start dockerd …")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.engines import image_stack
from protocol.errors import UserError
from runner.launch.daemon.client import connect_daemon, daemon_answers, resolve_image
from runner.launch.daemon.limits import ContainerLimits, engines_shm_size, study_limits
from runner.launch.kinds.docker.launcher import DockerLauncher
from runner.launch.kinds.docker.record import DockerRecord
from runner.launch.launcher import ChoiceRequest, Decline, Launcher, LauncherChoice, LauncherKind, ReplayRequest

_NAMED = "--image (or the study's [images])"


@dataclass(frozen=True)
class _ImageTarget:
    """The image a container launcher would run: its stack, reference, preferred digest and limits."""

    stack: str
    ref: str
    prefer: str
    lock_path: Path
    limits: ContainerLimits
    named: bool  # by --image or the study, rather than found in the lock


def _target(request: ChoiceRequest) -> tuple[_ImageTarget, bool, str]:
    """The study's image (``--image``, the study's [images], or the lock) and whether a daemon answers (why not)."""
    stack = request.stack()
    image = request.image or request.study.image_for(stack) or None  # the study may name its image by digest
    ok, why = (request.answers or daemon_answers)(request.daemon_timeout_s)
    record = request.locked(stack)
    target = _ImageTarget(stack=stack, ref=image or (record.image_ref if record is not None else ""),
                          prefer=record.repo_digest if record is not None else "", lock_path=request.lock_path,
                          limits=_limits(request), named=bool(image))
    return target, ok, why


def _limits(request: ChoiceRequest) -> ContainerLimits:
    """The study's limits, with the /dev/shm its engines need (vLLM's engine core: more than Docker's 64 MiB)."""
    return dataclasses.replace(study_limits(request.study.campaign),
                               shm_size=engines_shm_size(request.study.variants()))


def _on_gpu(variants: Iterable[Any]) -> bool:
    """Whether a variant runs on a GPU: a CUDA image whose variants all run on device "cpu" asks for no card."""
    return any(variant.device != "cpu" for variant in variants)


def _choose(request: ChoiceRequest) -> LauncherChoice:
    target, ok, why = _target(request)
    return _required(target, request, ok, why, _NAMED if target.named else "--launcher docker")


def _required(target: _ImageTarget, request: ChoiceRequest, ok: bool, why: str, where: str) -> LauncherChoice:
    """--launcher docker or --image: a container launcher, or a UserError saying what is missing."""
    if not ok:
        raise UserError(f"no Docker engine answers ({why})", where,
                        "Start dockerd (bash .ci/docker-setup.sh does) or set DOCKER_HOST; "
                        "or use --launcher process.")
    if not target.ref:
        raise UserError(f"no {target.stack} image is known (none in {target.lock_path})", where,
                        f"Build one (isocost images build --stack {target.stack}) or pass --image REPO@sha256:….")
    launcher = DockerLauncher(target.ref, stack=target.stack, prefer_digest=target.prefer, limits=target.limits,
                              gpu=_on_gpu(request.study.variants()))
    launcher.check_inputs(request.study.corpus.path, request.study.model.path)
    return LauncherChoice(launcher, "")


def _auto(request: ChoiceRequest) -> LauncherChoice | Decline:
    """Containers where a daemon answers and the image resolves; a named image is required, not declined."""
    try:
        target, ok, why = _target(request)
    except UserError as exc:  # variants needing two images (cpu and cpu-vllm): one campaign runs one image
        return Decline(exc.what, exc.fix)
    if target.named:
        return _required(target, request, ok, why, _NAMED)
    stack = target.stack
    if not ok:
        return Decline(f"no Docker engine answers ({why})", "start dockerd to use containers")
    if not target.ref:
        return Decline(f"no {stack} image is known (none in {target.lock_path}, no --image)",
                       f"isocost images build --stack {stack} makes one")
    client = connect_daemon()
    try:
        resolve_image(client, target.ref, prefer_digest=target.prefer)
    except UserError as exc:
        return Decline(f"the locked {stack} image is not usable here ({exc.what})",
                       f"rebuild it with isocost images build --stack {stack}, or pass --image")
    launcher = DockerLauncher(target.ref, stack=stack, client=client, prefer_digest=target.prefer,
                              limits=target.limits, gpu=_on_gpu(request.study.variants()))
    launcher.check_inputs(request.study.corpus.path, request.study.model.path)
    return LauncherChoice(launcher, "")


def _replay(request: ReplayRequest) -> tuple[Launcher, dict[str, Any]]:
    """A container of the exact recorded image (the originals' repo digest, else their image ID)."""
    images = request.images()
    if not images:
        raise UserError(f"the original trials ran with launcher {request.original!r}, and no image digest is "
                        "recorded", "--launcher", "Replay them with --launcher process (or --launcher original).")
    if len(images) != 1:
        raise UserError(f"the chosen trials ran in several images ({', '.join(images)})", "--trial",
                        "Replay the trials of one image at a time.")
    stacks = sorted({image_stack(spec.variant.stack, spec.variant.engine) for spec in request.specs.values()})
    try:
        launcher = DockerLauncher(images[0], stack=stacks[0], gpu=_on_gpu(s.variant for s in request.specs.values()))
    except UserError as exc:
        raise UserError(f"the exact image {images[0]} cannot be run here: {exc.what}", exc.where,
                        f"{exc.fix} Or replay knowingly outside it with --launcher process (reported as not "
                        "exact).") from None
    return launcher, {"kind": "docker", "original": request.original, "exact": True, "image": images[0], "note": ""}


KIND = LauncherKind(
    name="docker",
    help="each trial a fresh container of the study stack's pinned image, on this machine's engine or "
         "(--host) remote ones",
    choose=_choose,
    replay=_replay,
    record=DockerRecord,
    auto=_auto,
    auto_order=10,
    order=20,
    requires="ISOCOST_REQUIRE_DOCKER",
    scenarios=("offline", "server"),  # LoadGen runs inside the trial (the image has it); no port, no network
)
