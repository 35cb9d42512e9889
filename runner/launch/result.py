"""What passes between the campaign and a launcher for one trial: its paths, where a scheduler put it, and
what the host saw of its end (:class:`LaunchResult`; :class:`HostInterrupt` carries it when the host stopped).

These records import nothing of the launchers, so every launcher module (and the leftover stop that
:class:`runner.launch.base.LauncherBase` defaults to) can use them without a circle back to the interface.

Example::

    LaunchResult(exit_code=0, wall_s=12.5, placement=Placement(node="gpu07", job_id="41"))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class TrialPaths:
    """Host-side paths of one trial. The launcher maps them into the trial's view."""

    trial_dir: Path  # spec.json, predictions.jsonl, manifest.json, status.json, trial.log
    corpus: Path
    model: Path

    @property
    def log(self) -> Path:
        return self.trial_dir / "trial.log"


@dataclass(frozen=True)
class Placement:
    """Where a cluster scheduler put one trial (launchers without a scheduler leave it out).

    ``queue_s``: submitted → started; ``node``, ``job_id`` and ``allocated_gpu`` (the scheduler's
    card index or indices, with the card's UUID when it was read inside the job).
    """

    queue_s: float | None = None
    node: str = ""
    job_id: str = ""
    allocated_gpu: str = ""


@dataclass(frozen=True)
class LaunchResult:
    """What the host saw from the outside. The trial's own account is in status.json."""

    exit_code: int | None
    timed_out: bool = False
    interrupted: bool = False  # the host stopped it (Ctrl-C on the host CLI)
    oom_killed: bool = False  # the kernel/engine killed it for memory
    launch_overhead_s: float | None = None  # launch until the trial's own clock started
    wall_s: float | None = None
    image_id: str = ""
    image_digest: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    placement: Placement | None = None


class HostInterrupt(Exception):
    """The user interrupted the host CLI while a trial ran; carries that trial's result."""

    def __init__(self, result: LaunchResult) -> None:
        super().__init__("interrupted")
        self.result = result
