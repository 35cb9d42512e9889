"""The launcher interface: the campaign hands over a trial, a launcher runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


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


class Launcher(Protocol):
    """Runs ``python -m runner.trial SPEC OUT`` somewhere fresh and waits for it."""

    name: str

    def describe(self) -> dict[str, str]:
        """Facts recorded in campaign.json (kind, engine or interpreter, image)."""
        ...

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        """(corpus path, model path, output dir) as the trial will see them."""
        ...

    def image_fields(self) -> tuple[str, str, str]:
        """(image_ref, image_id, image_digest) passed into the spec; empty for processes."""
        ...

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        ...


class HostInterrupt(Exception):
    """The user interrupted the host CLI while a trial ran; carries that trial's result."""

    def __init__(self, result: LaunchResult) -> None:
        super().__init__("interrupted")
        self.result = result
