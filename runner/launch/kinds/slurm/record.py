"""The Slurm launcher's ``launcher.json``: the trial's lane, runtime, pinned node and cards, and its jobs.

``jobs`` holds one object per submitted job (its id, submit time, Slurm's final state and what the job
saw of itself); ``--resume`` stops the last one (:meth:`SlurmLauncher.stop_leftover`).

Example::

    SlurmRecord(lane="isocost-c0ffee", runtime="process", jobs=({"job_id": "7"},))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from protocol.records.codec import OMIT_NONE, Schema
from runner.launch.launcher_file import launcher_schema


def _kept() -> Any:
    return field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class SlurmRecord:
    """One trial's launcher.json under the Slurm launcher (a key it did not write is None)."""

    kind: str = "slurm"
    lane: str | None = _kept()
    runtime: str | None = _kept()
    pinned_node: Any = _kept()
    pinned_gpus: Any = _kept()
    jobs: tuple[dict[str, Any], ...] | None = _kept()
    error: str | None = _kept()
    not_saved: str | None = _kept()
    CODEC: ClassVar[Schema] = launcher_schema("slurm")
