"""The launcher interface: the campaign hands over a trial, a launcher runs it, and owns the rest of its life.

A launcher (process, docker, remote docker, Slurm) is a plugin: the campaign, resume, replay and
``isocost check`` call these methods and never ask which kind it is.

- ``describe()`` facts for campaign.json; ``resume_identity()`` the part of them a ``--resume`` must find
  unchanged (kind and image; for Slurm also the runtime and the pinned node); ``adopt()`` takes
  back what a resumed campaign pinned (the node);
- ``preflight()`` the checks before the first trial (inputs readable by the trial, a compute node
  that reaches the shared directory…): a UserError there leaves ``--out`` as it was;
- ``trial_view()``, ``image_fields()`` and ``run()``: one trial (``run`` raises
  :class:`HostInterrupt` with the trial's result when the host CLI is stopped, Ctrl-C included,
  or the host is lost; ``lost`` then says why);
- ``recover_leftovers()`` before a resume, and ``stop_leftover()`` for one trial that outlived the
  host CLI (a process, a container, a Slurm job), so it writes nothing after its row;
- ``summary()`` and ``check_line()`` what ``isocost run`` and ``isocost check`` print about it.

:class:`LauncherBase` gives every method a default (its leftover stop is :mod:`runner.launch.leftover`). The
records passed to and from a launcher (:class:`TrialPaths`, :class:`LaunchResult` …) are
:mod:`runner.launch.result`'s, and what a kind says of itself (its name, options, choice, replay, launcher.json
record) is :mod:`runner.launch.kind`'s; all are importable from here.

Example::

    class Quiet(LauncherBase):
        name = "quiet"
        def describe(self): return {"kind": "quiet"}
        def run(self, paths, timeout_s): return LaunchResult(exit_code=0)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from runner.launch.kind import LauncherOption
from runner.launch.leftover import stop_leftover as stop_trial_leftover
from runner.launch.result import HostInterrupt, LaunchResult, Placement, TrialPaths

if TYPE_CHECKING:
    from protocol.study.load import Study


class Launcher(Protocol):
    """Runs ``python -m runner.trial SPEC OUT`` somewhere fresh and waits for it; owns the trial's whole life."""

    name: str
    lost: str

    def describe(self) -> dict[str, str]:
        """Facts recorded in campaign.json (kind, engine or interpreter, image)."""
        ...

    def resume_identity(self) -> dict[str, str]:
        """The facts a resumed campaign must find unchanged (compared with campaign.json's launcher)."""
        ...

    def adopt(self, started_with: Mapping[str, str]) -> None:
        """On --resume: take back what the campaign pinned when it started (campaign.json's launcher)."""
        ...

    def preflight(self, study: Study, out: Path) -> str:
        """Everything checked before the first trial of a campaign in ``out``; UserError with the fix. Returns a
        line for the progress output ("" when there is nothing to say)."""
        ...

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        """(corpus path, model path, output dir) as the trial will see them."""
        ...

    def image_fields(self) -> tuple[str, str, str]:
        """(image_ref, image_id, image_digest) passed into the spec; empty for processes."""
        ...

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        ...

    def recover_leftovers(self, campaign_root: Path) -> list[str]:
        """Before a resume: stop what a stopped host CLI left running; one line per thing found."""
        ...

    def stop_leftover(self, trial_dir: Path) -> LaunchResult | None:
        """Stop one trial that outlived the host CLI; returns once it can write nothing more, with what the
        launcher saw of its end (None: nothing more than its directory says)."""
        ...

    def summary(self) -> str:
        """One line for ``isocost run``: which launcher runs the trials, and with what."""
        ...

    def check_line(self) -> tuple[str, str]:
        """(item, text) for ``isocost check``'s report when this launcher is usable."""
        ...


class LauncherBase:
    """Defaults for every part of a launcher's life but ``describe`` and ``run``."""

    name = "base"
    lost = ""

    def describe(self) -> dict[str, str]:
        return {"kind": self.name}

    def resume_identity(self) -> dict[str, str]:
        facts = self.describe()
        return {"kind": facts.get("kind", ""), "image_id": facts.get("image_id", "")}

    def adopt(self, started_with: Mapping[str, str]) -> None:
        return None

    def preflight(self, study: Study, out: Path) -> str:
        return ""

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        return str(paths.corpus), str(paths.model), str(paths.trial_dir)

    def image_fields(self) -> tuple[str, str, str]:
        return "", "", ""

    def recover_leftovers(self, campaign_root: Path) -> list[str]:
        return []

    def stop_leftover(self, trial_dir: Path) -> LaunchResult | None:
        stop_trial_leftover(trial_dir)
        return None

    def summary(self) -> str:
        return self.name

    def check_line(self) -> tuple[str, str]:
        return "launcher", self.summary()


def placement_values(launcher: str, result: LaunchResult) -> tuple[dict[str, Any], dict[str, str]]:
    """The raw row's placement cells (queue_s, node, job_id, allocated_gpu) and, for each empty one, its reason."""
    placement = result.placement or Placement()
    values: dict[str, Any] = {"queue_s": placement.queue_s, "node": placement.node or None,
                              "job_id": placement.job_id or None, "allocated_gpu": placement.allocated_gpu or None}
    if result.placement is None:
        why = f"launcher {launcher!r} has no scheduler queue"
        return values, {name: why for name in values}
    reasons = {"queue_s": "the job's submit or start time was not observed", "node": "no node reported",
               "job_id": "the job was never submitted",
               "allocated_gpu": "no GPU allocated to the job (none asked for)"}
    return values, {name: why for name, why in reasons.items() if values[name] is None}


__all__ = ["HostInterrupt", "LaunchResult", "Launcher", "LauncherBase", "LauncherOption", "Placement", "TrialPaths",
           "placement_values"]
