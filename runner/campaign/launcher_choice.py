"""Which launcher runs a campaign (or a replay): the kind named by ``--launcher``, or ``auto``.

The kinds are found by name (:func:`runner.launch.launcher.launcher_kinds`: the packages of
``runner/launch/kinds/`` and of ``ISOCOST_LAUNCHERS_PATH``); each says how it is chosen, how it replays and
which options it takes. This module only parses the study once, hands each kind what it asks for (the
image lock, the engine check) and refuses options given to another kind than the one chosen; it never
asks which kind it is.

``auto`` (the default) asks the kinds that take part in it, in their ``auto_order``: the first that does
not decline runs the trials, and the declines before it are passed on (the process kind, last, turns the
first into its notice: "no Docker engine answers (…): trials run as local processes …").

Example::

    choice = choose_launcher(Path("study.toml"), "slurm", options={"slurm": {"gres": "gpu:1"}})
    choice.launcher.summary()      # "slurm (process runtime, partition debug, GPUs gres=gpu:1)"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from protocol.engines import engine_named
from protocol.errors import UserError
from protocol.records.stages import TrialSpec
from protocol.study.load import Study, load_study
from runner.images.lock import default_lock_path, locked_image
from runner.launch.launcher import (
    ChoiceRequest,
    Decline,
    Launcher,
    LauncherChoice,
    LauncherKind,
    LauncherOption,
    ReplayRequest,
    launcher_kind,
    launcher_kinds,
)

__all__ = ["ChoiceRequest", "LauncherChoice", "choose_launcher", "launcher_options", "replay_launcher", "study_stack"]


def study_stack(study_path: Path | Study) -> str:
    """The one stack every variant of the study runs on (one image serves one stack); ``study_path``: the study,
    parsed once by the caller, or its file."""
    return ChoiceRequest(study_path if isinstance(study_path, Study) else load_study(study_path), None).stack()


def launcher_options() -> dict[str, tuple[LauncherOption, ...]]:
    """Every kind's command-line options, by kind (the CLI adds them as ``--<kind>-<name>``)."""
    return {name: kind.options for name, kind in launcher_kinds().items() if kind.options}


def choose_launcher(
    study_path: Path | Study,
    kind: str = "auto",
    image: str | None = None,
    *,
    lock_path: Path | None = None,
    daemon_timeout_s: float = 5.0,
    answers: Callable[[float], tuple[bool, str]] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    study: Study | None = None,
) -> LauncherChoice:
    """Pick and construct the launcher for ``isocost run``. Raises UserError with the fix.

    ``options``: each kind's option values by kind and name (``{"slurm": {"partition": "gpu"}}``); ``study``: the study
    already parsed from ``study_path`` (parsed here otherwise; ``study_path`` may be the parsed study itself).
    """
    if isinstance(study_path, Study):
        study = study_path
    if kind != "auto":
        launcher_kind(kind)  # an unknown name fails first, listing the known ones
    given = {name: values for name, values in (options or {}).items()
             if any(value not in (None, "", (), False) for value in values.values())}
    for other in sorted(set(given) - {kind}):
        flags = ", ".join(f"--{other}-{name.replace('_', '-')}" for name, value in sorted(given[other].items())
                          if value not in (None, "", (), False))
        raise UserError(f"{flags} belong to --launcher {other}", f"--launcher {kind}",
                        f"Add --launcher {other}, or drop {flags}.")
    lock = lock_path or default_lock_path()
    request = ChoiceRequest(study or load_study(str(study_path)), image, dict(given.get(kind, {})), lock,
                            lambda stack: locked_image(stack, lock), daemon_timeout_s, answers)
    if kind == "auto":
        return _choose_auto(request)
    _check_scenario(launcher_kind(kind), request.study, f"--launcher {kind}")
    return launcher_kind(kind).choose(request)


def _check_scenario(kind: LauncherKind, study: Study, where: str) -> None:
    """A kind runs only the scenarios it declares (``server`` trials need LoadGen beside the model), and an engine
    only under the launchers it declares (vLLM's environment is a local one)."""
    for variant in study.series_variants():
        engine = engine_named(variant.engine)
        if engine.launchers and kind.name not in engine.launchers:
            why = f" ({engine.launchers_why})" if engine.launchers_why else ""
            raise UserError(f"engine {engine.name} does not run under launcher {kind.name} yet{why}", where,
                            f"Use --launcher {' or '.join(engine.launchers)} for it (docs/engines.md).")
    scenario = study.scenario
    if scenario not in kind.scenarios:
        able = ", ".join(k.name for k in launcher_kinds().values() if scenario in k.scenarios)
        raise UserError(f"launcher {kind.name} does not run scenario {scenario!r} yet", where,
                        f"Use --launcher {able or 'process'} (docs/serving.md).")


def _choose_auto(request: ChoiceRequest) -> LauncherChoice:
    """The first kind taking part in ``auto`` that does not decline; each later one hears why the others did."""
    declined: list[Decline] = []
    for kind in sorted((k for k in launcher_kinds().values() if k.auto is not None), key=lambda k: k.auto_order):
        assert kind.auto is not None
        try:
            _check_scenario(kind, request.study, "--launcher auto")
        except UserError as exc:
            declined.append(Decline(exc.what, exc.fix))
            continue
        answer = kind.auto(dataclasses.replace(request, declined=tuple(declined)))
        if isinstance(answer, LauncherChoice):
            return answer
        declined.append(answer)
    reasons = "; ".join(d.reason for d in declined) or "no launcher kind takes part in --launcher auto"
    raise UserError(f"no launcher can run this study here ({reasons})", "--launcher auto",
                    f"Name one with --launcher ({', '.join(launcher_kinds())}).")


def replay_launcher(kind: str, specs: dict[str, TrialSpec]) -> tuple[Launcher, dict[str, Any]]:
    """The launcher a replay runs with (``original``: the originals' kind), and facts for the replay's report."""
    originals = sorted({spec.launcher for spec in specs.values()})
    original = originals[0] if len(originals) == 1 else "mixed"
    wanted = original if kind == "original" else kind
    kinds = launcher_kinds()
    if wanted not in kinds:
        raise UserError(f"the original trials ran with launcher {original!r}, and no image digest is recorded",
                        "--launcher", "Replay them with --launcher process (or --launcher original).")
    return kinds[wanted].replay(ReplayRequest(original, specs))
