"""Which launcher runs a campaign: a container of a pinned image when possible, else a process.

``auto`` (the default) picks the Docker launcher when an engine answers AND an image for the
study's stack is known (``--image`` or ``images/images.lock``); otherwise the process launcher,
with a notice saying why. ``docker`` and ``process`` force one; ``docker`` fails with the reason
instead of falling back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.errors import UserError
from protocol.study import load_study
from runner.launch.base import Launcher

if TYPE_CHECKING:
    from runner.launch.docker import DockerLauncher
    from runner.launch.limits import ContainerLimits

LAUNCHER_KINDS = ("auto", "process", "docker")


@dataclass(frozen=True)
class LauncherChoice:
    launcher: Launcher
    notice: str  # why this launcher, when it is not the obvious one ("" otherwise)


def study_stack(study_path: Path) -> str:
    """The one stack every variant of the study runs on (one image serves one stack)."""
    study = load_study(study_path)
    stacks = sorted({variant.stack for variant in study.variants()})
    if len(stacks) != 1:
        raise UserError(
            f"the study's variants use several stacks ({', '.join(stacks)}); one campaign runs one image",
            str(study.path),
            "Split the study by stack (one study per image), or use --launcher process.",
        )
    return stacks[0]


def choose_launcher(
    study_path: Path,
    kind: str = "auto",
    image: str | None = None,
    *,
    lock_path: Path | None = None,
    engine_timeout_s: float = 5.0,
    answers: Callable[[float], tuple[bool, str]] | None = None,
) -> LauncherChoice:
    """Pick and construct the launcher for ``isocost run``. Raises UserError with the fix."""
    from runner.launch.process import ProcessLauncher

    if kind not in LAUNCHER_KINDS:
        raise UserError(f"unknown launcher {kind!r}", "--launcher", f"Use one of: {', '.join(LAUNCHER_KINDS)}.")
    if kind == "process":
        if image:
            raise UserError("--image needs a container launcher", "--launcher process",
                            "Drop --image, or use --launcher docker.")
        return LauncherChoice(ProcessLauncher(), "trials run as local processes (--launcher process): no container "
                                                 "image, so no image digest in the manifests")
    study = load_study(study_path)
    from runner.images.lock import default_lock_path, locked_image
    from runner.launch.engine import engine_answers
    from runner.launch.limits import study_limits

    stack = study_stack(study_path)
    image = image or study.image_for(stack) or None  # the study may name its image by digest
    lock_path = lock_path or default_lock_path()
    ok, why = (answers or engine_answers)(engine_timeout_s)
    record = locked_image(stack, lock_path)
    target = _ImageTarget(stack=stack, ref=image or (record.image_ref if record is not None else ""),
                          prefer=record.repo_digest if record is not None else "", lock_path=lock_path,
                          limits=study_limits(study.campaign))
    if kind == "docker" or image:
        where = "--image (or the study's [images])" if image else "--launcher docker"
        return _required_container(target, study_path, ok, why, where)
    return _container_if_usable(target, study_path, ok, why)


@dataclass(frozen=True)
class _ImageTarget:
    """The image a container launcher would run: its stack, reference, preferred digest and limits."""

    stack: str
    ref: str
    prefer: str
    lock_path: Path
    limits: ContainerLimits


def _required_container(target: _ImageTarget, study_path: Path, ok: bool, why: str, where: str) -> LauncherChoice:
    """--launcher docker or --image: a container launcher, or a UserError saying what is missing."""
    from runner.launch.docker import DockerLauncher

    if not ok:
        raise UserError(f"no Docker engine answers ({why})", where,
                        "Start dockerd (bash .ci/docker-setup.sh does) or set DOCKER_HOST; "
                        "or use --launcher process.")
    if not target.ref:
        raise UserError(f"no {target.stack} image is known (none in {target.lock_path})", where,
                        f"Build one (isocost images build --stack {target.stack}) or pass --image REPO@sha256:….")
    launcher = DockerLauncher(target.ref, stack=target.stack, prefer_digest=target.prefer, limits=target.limits)
    _check_study_inputs(launcher, study_path)
    return LauncherChoice(launcher, "")


def _container_if_usable(target: _ImageTarget, study_path: Path, ok: bool, why: str) -> LauncherChoice:
    """--launcher auto: containers where an engine answers and the locked image resolves, else processes."""
    from runner.launch.docker import DockerLauncher
    from runner.launch.engine import connect_engine, resolve_image
    from runner.launch.process import ProcessLauncher

    stack = target.stack
    if not ok:
        return LauncherChoice(ProcessLauncher(), f"no Docker engine answers ({why}): trials run as local processes, "
                                                 "without an image digest (start dockerd to use containers)")
    if not target.ref:
        return LauncherChoice(ProcessLauncher(), f"no {stack} image is known (none in {target.lock_path}, no "
                                                 "--image): trials run as local processes, without an image digest "
                                                 f"(isocost images build --stack {stack} makes one)")
    client = connect_engine()
    try:
        resolve_image(client, target.ref, prefer_digest=target.prefer)
    except UserError as exc:
        return LauncherChoice(ProcessLauncher(), f"the locked {stack} image is not usable here ({exc.what}): trials "
                                                 "run as local processes, without an image digest (rebuild it with "
                                                 f"isocost images build --stack {stack}, or pass --image)")
    launcher = DockerLauncher(target.ref, stack=stack, client=client, prefer_digest=target.prefer,
                              limits=target.limits)
    _check_study_inputs(launcher, study_path)
    return LauncherChoice(launcher, "")


def _check_study_inputs(launcher: DockerLauncher, study_path: Path) -> None:
    """Fail before the campaign starts if the container could not read the study's corpus or model."""
    study = load_study(study_path)
    launcher.check_inputs(study.corpus.path, study.model.path)
