"""The docker kind's launcher.json (:class:`DockerRecord`, local and remote daemons) and how a trial container's end
is recorded in it (:func:`finish_trial`: the exit code and OOM state read, the :class:`LaunchResult` built, and
:class:`HostInterrupt` raised when the host stopped the trial).

Example::

    DockerRecord(container_id="abc123").kind   # "docker"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from protocol.errors import UserError
from protocol.records.codec import OMIT_NONE, Schema
from protocol.records.stages import read_status
from runner.launch.launcher import HostInterrupt, LaunchResult
from runner.launch.launcher_file import launcher_schema, save_record


def _kept() -> Any:
    return field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class DockerRecord:
    """A trial container's launcher.json: the image, user, limits, times, container, the daemon's state and the
    outcome; a remote daemon adds ``host``, ``host_url``, ``engine_id``, ``volume`` and ``transfer``."""

    kind: str = "docker"
    image_ref: str | None = _kept()
    image_id: str | None = _kept()
    user: str | None = _kept()
    limits: dict[str, Any] | None = _kept()
    times: dict[str, str] | None = _kept()
    container_id: str | None = _kept()
    container_name: str | None = _kept()
    state: dict[str, Any] | None = _kept()
    outcome: dict[str, Any] | None = _kept()
    error: str | None = _kept()
    not_saved: str | None = _kept()
    host: str | None = _kept()
    host_url: str | None = _kept()
    engine_id: str | None = _kept()
    volume: str | None = _kept()
    transfer: dict[str, Any] | None = _kept()
    CODEC: ClassVar[Schema] = launcher_schema("docker")


def launch_overhead_s(trial_dir: Path, created_at: str) -> float | None:
    """Container create → the trial's own clock start (``started_at`` in status.json)."""
    try:
        status = read_status(trial_dir)
        if status is None:
            return None
        started = datetime.fromisoformat(status.started_at)
        return max((started - datetime.fromisoformat(created_at)).total_seconds(), 0.0)
    except (UserError, ValueError, TypeError):  # an unreadable status (the row names it), naive and aware times
        return None


def finish_trial(trial_dir: Path, record: dict[str, Any], outcome: dict[str, Any], state: dict[str, Any],
                 notes: list[str], *, wall_s: float, image_id: str, image_digest: str,
                 mem_limit: str | None) -> LaunchResult:
    """Record how the trial ended (launcher.json) and say so; HostInterrupt when the host stopped it.

    ``outcome`` is what waiting saw (exit code, timed out, interrupted, daemon lost), ``state`` what
    the daemon said afterwards (:func:`collect_container`).
    """
    record["state"] = state
    record["outcome"] = outcome
    save_record(trial_dir, record, DockerRecord)
    if record.get("not_saved"):
        notes.append(record["not_saved"])
    exit_code = outcome.get("exit_code")
    if exit_code is None and state.get("ExitCode") is not None and not outcome.get("engine_lost"):
        exit_code = int(state["ExitCode"])
    oom = bool(state.get("OOMKilled"))
    if oom:
        notes.append("the container was killed for memory (State.OOMKilled"
                     + (f", memory limit {mem_limit})" if mem_limit else ")"))
    result = LaunchResult(
        exit_code=exit_code,
        timed_out=bool(outcome.get("timed_out")),
        interrupted=bool(outcome.get("interrupted")),
        oom_killed=oom,
        launch_overhead_s=launch_overhead_s(trial_dir, record["times"]["create_at"]),
        wall_s=wall_s,
        image_id=image_id,
        image_digest=image_digest,
        notes=tuple(notes),
    )
    if outcome.get("interrupted"):
        raise HostInterrupt(result)
    return result


