"""Which launcher runs a campaign (or a replay): the launcher kinds, registered by name, and ``auto``.

Each kind (:data:`KINDS`) says how it is chosen for a study (``choose``), how it replays a bundle's
trials (``replay``) and which command-line options it takes (``options``: ``--slurm-partition`` …);
everything after the choice (the campaign, resume, leftovers, ``isocost check``) calls the
launcher's own methods (:mod:`runner.launch.base`) and never asks its kind.

``auto`` (the default) picks the Docker launcher when an engine answers AND an image for the
study's stack is known (``--image`` or ``images/images.lock``); otherwise the process launcher,
with a notice saying why. ``docker``, ``process`` and ``slurm`` force one; ``docker`` and ``slurm``
fail with the reason instead of falling back.

Example::

    choice = choose_launcher(Path("study.toml"), "slurm", options={"slurm": {"gres": "gpu:1"}})
    choice.launcher.summary()      # "slurm (process runtime, partition debug, GPUs gres=gpu:1)"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import UserError
from protocol.records import TrialSpec
from protocol.study import Study, load_study
from runner.launch.base import Launcher, LauncherOption

if TYPE_CHECKING:
    from runner.launch.docker import DockerLauncher
    from runner.launch.limits import ContainerLimits

LAUNCHER_KINDS = ("auto", "process", "docker", "slurm")


@dataclass(frozen=True)
class LauncherChoice:
    launcher: Launcher
    notice: str  # why this launcher, when it is not the obvious one ("" otherwise)


@dataclass(frozen=True)
class ChoiceRequest:
    """What ``isocost run --launcher KIND`` was given (``study``: the study, parsed once by the caller)."""

    study: Study
    image: str | None
    options: Mapping[str, Any] = field(default_factory=dict)  # this kind's options, by name
    lock_path: Path | None = None
    engine_timeout_s: float = 5.0
    answers: Callable[[float], tuple[bool, str]] | None = None


@dataclass(frozen=True)
class LauncherKind:
    """One kind of launcher: how it is chosen, how it replays, its options."""

    name: str
    choose: Callable[[ChoiceRequest], LauncherChoice]
    replay: Callable[[str, dict[str, TrialSpec]], tuple[Launcher, dict[str, Any]]]
    options: tuple[LauncherOption, ...] = ()


def parsed(study: Study | Path) -> Study:
    """The study itself, parsed once: a :class:`Study` as given, a path parsed."""
    return study if isinstance(study, Study) else load_study(study)


def study_stack(study_or_path: Study | Path) -> str:
    """The one stack every variant of the study runs on (one image serves one stack)."""
    study = parsed(study_or_path)
    stacks = sorted({variant.stack for variant in study.variants()})
    if len(stacks) != 1:
        raise UserError(
            f"the study's variants use several stacks ({', '.join(stacks)}); one campaign runs one image",
            str(study.path),
            "Split the study by stack (one study per image), or use --launcher process.",
        )
    return stacks[0]


def launcher_options() -> dict[str, tuple[LauncherOption, ...]]:
    """Every kind's command-line options, by kind (the CLI adds them as ``--<kind>-<name>``)."""
    return {name: kind.options for name, kind in KINDS.items() if kind.options}


def choose_launcher(
    study: Study | Path,
    kind: str = "auto",
    image: str | None = None,
    *,
    lock_path: Path | None = None,
    engine_timeout_s: float = 5.0,
    answers: Callable[[float], tuple[bool, str]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> LauncherChoice:
    """Pick and construct the launcher for ``isocost run``. Raises UserError with the fix.

    ``options``: each kind's option values by kind and name (``{"slurm": {"partition": "gpu"}}``).
    """
    if kind not in LAUNCHER_KINDS:
        raise UserError(f"unknown launcher {kind!r}", "--launcher", f"Use one of: {', '.join(LAUNCHER_KINDS)}.")
    given = {name: values for name, values in (options or {}).items()
             if any(value not in (None, "", (), False) for value in values.values())}
    for other in sorted(set(given) - {kind}):
        flags = ", ".join(f"--{other}-{name.replace('_', '-')}" for name, value in sorted(given[other].items())
                          if value not in (None, "", (), False))
        raise UserError(f"{flags} belong to --launcher {other}", f"--launcher {kind}",
                        f"Add --launcher {other}, or drop {flags}.")
    request = ChoiceRequest(parsed(study), image, dict(given.get(kind, {})), lock_path, engine_timeout_s, answers)
    if kind == "auto":
        return _choose_auto(request)
    return KINDS[kind].choose(request)


# -- process ------------------------------------------------------------------------------------


def _choose_process(request: ChoiceRequest) -> LauncherChoice:
    from runner.launch.process import ProcessLauncher

    if request.image:
        raise UserError("--image needs a container launcher", "--launcher process",
                        "Drop --image, or use --launcher docker.")
    return LauncherChoice(ProcessLauncher(), "trials run as local processes (--launcher process): no container "
                                             "image, so no image digest in the manifests")


def _replay_process(original: str, specs: dict[str, TrialSpec]) -> tuple[Launcher, dict[str, Any]]:
    from runner.launch.process import ProcessLauncher

    images = sorted({spec.image_digest or spec.image_id for spec in specs.values()} - {""})
    exact = original == "process"
    note = "" if exact else (f"the original trials ran with launcher {original!r} (image {', '.join(images)}); "
                             "this replay ran them as local processes (--launcher process): not an exact replay")
    return ProcessLauncher(), {"kind": "process", "original": original, "exact": exact, "image": "", "note": note}


# -- docker -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ImageTarget:
    """The image a container launcher would run: its stack, reference, preferred digest and limits."""

    stack: str
    ref: str
    prefer: str
    lock_path: Path
    limits: ContainerLimits


def _image_target(request: ChoiceRequest) -> tuple[_ImageTarget, bool, str, bool]:
    """The study's image (``--image``, the study's [images], or the lock), whether an engine answers (and why
    not), and whether the image was named (by --image or the study) rather than found in the lock."""
    from runner.images.lock import default_lock_path, locked_image
    from runner.launch.engine import engine_answers
    from runner.launch.limits import study_limits

    study = request.study
    stack = study_stack(study)
    image = request.image or study.image_for(stack) or None  # the study may name its image by digest
    lock_path = request.lock_path or default_lock_path()
    ok, why = (request.answers or engine_answers)(request.engine_timeout_s)
    record = locked_image(stack, lock_path)
    target = _ImageTarget(stack=stack, ref=image or (record.image_ref if record is not None else ""),
                          prefer=record.repo_digest if record is not None else "", lock_path=lock_path,
                          limits=study_limits(study.campaign))
    return target, ok, why, bool(image)


def _choose_docker(request: ChoiceRequest) -> LauncherChoice:
    target, ok, why, named = _image_target(request)
    where = "--image (or the study's [images])" if named else "--launcher docker"
    return _required_container(target, request.study, ok, why, where)


def _choose_auto(request: ChoiceRequest) -> LauncherChoice:
    target, ok, why, named = _image_target(request)
    if named:
        return _required_container(target, request.study, ok, why, "--image (or the study's [images])")
    return _container_if_usable(target, request.study, ok, why)


def _required_container(target: _ImageTarget, study: Study, ok: bool, why: str, where: str) -> LauncherChoice:
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
    _check_study_inputs(launcher, study)
    return LauncherChoice(launcher, "")


def _container_if_usable(target: _ImageTarget, study: Study, ok: bool, why: str) -> LauncherChoice:
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
    _check_study_inputs(launcher, study)
    return LauncherChoice(launcher, "")


def _check_study_inputs(launcher: DockerLauncher, study: Study) -> None:
    """Fail before the campaign starts if the container could not read the study's corpus or model."""
    launcher.check_inputs(study.corpus.path, study.model.path)


def _replay_docker(original: str, specs: dict[str, TrialSpec]) -> tuple[Launcher, dict[str, Any]]:
    """A container of the exact recorded image (the originals' repo digest, else their image ID)."""
    images = sorted({spec.image_digest or spec.image_id for spec in specs.values()} - {""})
    if not images:
        raise UserError(
            f"the original trials ran with launcher {original!r}, and no image digest is recorded",
            "--launcher",
            "Replay them with --launcher process (or --launcher original).",
        )
    if len(images) != 1:
        raise UserError(f"the chosen trials ran in several images ({', '.join(images)})", "--trial",
                        "Replay the trials of one image at a time.")
    from runner.launch.docker import DockerLauncher

    stacks = sorted({spec.variant.stack for spec in specs.values()})
    try:
        docker_launcher = DockerLauncher(images[0], stack=stacks[0])
    except UserError as exc:
        raise UserError(f"the exact image {images[0]} cannot be run here: {exc.what}", exc.where,
                        f"{exc.fix} Or replay knowingly outside it with --launcher process (reported as not "
                        "exact).") from None
    return docker_launcher, {"kind": "docker", "original": original, "exact": True, "image": images[0], "note": ""}


# -- slurm --------------------------------------------------------------------------------------


def _choose_slurm(request: ChoiceRequest) -> LauncherChoice:
    from runner.images.lock import default_lock_path, locked_image
    from runner.launch.limits import study_limits
    from runner.launch.slurm.launcher import SlurmLauncher
    from runner.launch.slurm.options import SlurmOptions

    options = SlurmOptions.from_values(request.options)
    study = request.study
    stack = study_stack(study)
    image = request.image or study.image_for(stack) or ""
    if not image and options.runtime != "process":
        record = locked_image(stack, request.lock_path or default_lock_path())
        image = (record.repo_digest or (record.image_id if options.runtime == "docker" else "")) if record else ""
    limits = study_limits(study.campaign)
    launcher = SlurmLauncher(options, stack=stack, image=image, trial_timeout_s=study.campaign.trial_timeout_s,
                             mem_limit=limits.mem_limit or "")
    return LauncherChoice(launcher, "")


def _replay_slurm(original: str, specs: dict[str, TrialSpec]) -> tuple[Launcher, dict[str, Any]]:
    raise UserError("a replay does not go through Slurm: the original trials ran as Slurm jobs on their pinned node",
                    "--launcher", "Replay them here with --launcher docker (the same image by digest) or --launcher "
                                  "process (reported as not exact).")


def _slurm_options() -> tuple[LauncherOption, ...]:
    from runner.launch.slurm.options import OPTIONS

    return OPTIONS


def replay_launcher(kind: str, specs: dict[str, TrialSpec]) -> tuple[Launcher, dict[str, Any]]:
    """The launcher a replay runs with (``original``: the originals' kind), and facts for the replay's report."""
    originals = sorted({spec.launcher for spec in specs.values()})
    original = originals[0] if len(originals) == 1 else "mixed"
    wanted = original if kind == "original" else kind
    if wanted not in KINDS:
        raise UserError(f"the original trials ran with launcher {original!r}, and no image digest is recorded",
                        "--launcher", "Replay them with --launcher process (or --launcher original).")
    return KINDS[wanted].replay(original, specs)


KINDS: dict[str, LauncherKind] = {
    "process": LauncherKind("process", _choose_process, _replay_process),
    "docker": LauncherKind("docker", _choose_docker, _replay_docker),
    "slurm": LauncherKind("slurm", _choose_slurm, _replay_slurm, _slurm_options()),
}
