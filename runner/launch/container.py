"""One trial container's end, on any engine: stop it, collect it, remove it, record how it ended.

The local launcher (:mod:`runner.launch.docker`) and the shipping launcher
(:mod:`runner.launch.remote`) share this tail of a trial:

- :func:`stop_container` (SIGTERM, SIGKILL after a grace period) and :func:`exit_code_after_stop`;
- :func:`collect_container`: the container's logs appended to ``trial.log`` and its final state;
- :func:`remove_container`;
- :func:`save_record`: the trial's ``launcher.json`` (a full disk must not lose the row);
- :func:`remove_leftover_containers`: on ``--resume``, the containers of a trial that outlived
  the host CLI, found by id and by label (so also one created just before the host died, before
  launcher.json named it);
- :func:`finish_trial`: the record written, the exit code and OOM state read, the
  :class:`~runner.launch.base.LaunchResult` built (and :class:`HostInterrupt` raised when the host
  stopped the trial);
- :class:`DockerRecord`: the Docker kind's launcher.json (local and remote engines).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from protocol.errors import UserError
from protocol.io.safe_write import write_binary
from protocol.records.codec import OMIT_NONE, Schema
from protocol.records.stages import read_status
from runner.launch.engine import docker_sdk
from runner.launch.launcher_file import launcher_schema, write_launcher_file
from runner.launch.result import HostInterrupt, LaunchResult

#: Where the trial sees its inputs and its output directory.
CONTAINER_IN = "/in"
CONTAINER_MODEL = "/in/model"
CONTAINER_OUT = "/out"

#: The label every trial container carries: its trial directory on the host CLI's machine.
TRIAL_DIR_LABEL = "org.isocost.trial_dir"

#: The parts of the engine's ``State`` a trial's launcher.json keeps.
STATE_FIELDS = ("Status", "ExitCode", "OOMKilled", "Error", "StartedAt", "FinishedAt")


def _kept() -> Any:
    return field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class DockerRecord:
    """A trial container's launcher.json: the image, user, limits, times, container, the engine's state and the
    outcome; a remote engine adds ``host``, ``host_url``, ``engine_id``, ``volume`` and ``transfer``."""

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


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds (the times in launcher.json)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def stop_container(container: Any, grace_s: float) -> None:
    """SIGTERM so the trial writes its status, SIGKILL after the grace period (docker stop)."""
    try:
        container.stop(timeout=int(grace_s))
    except Exception:  # the container may be gone, or the engine with it
        pass


def exit_code_after_stop(container: Any, grace_s: float) -> int | None:
    """The exit code of a container being stopped; None when the engine no longer says."""
    try:
        return int(container.wait(timeout=grace_s + 30).get("StatusCode"))
    except Exception:  # engine gone: the exit code is unknown
        return None


def remove_container(container: Any) -> bool:
    """Remove a container (force); False when it could not be (already gone, or the engine is)."""
    try:
        container.remove(force=True)
        return True
    except Exception:  # already gone, or the engine is
        return False


def collect_container(container: Any, log_path: Path) -> dict[str, Any]:
    """Append the container's logs to ``log_path``; its final state (:data:`STATE_FIELDS`).

    Raises what the engine raised when it went away between the exit and the collection.
    """
    logs = container.logs(stdout=True, stderr=True)
    with write_binary(log_path, log_path.parent, append=True) as handle:
        handle.write(logs)
    container.reload()
    raw = container.attrs.get("State") or {}
    return {key: raw.get(key) for key in STATE_FIELDS}


def save_record(trial_dir: Path, record: dict[str, Any], record_type: type = DockerRecord) -> None:
    """Write launcher.json; a full disk must not lose the trial's row (the failure goes into its notes)."""
    record.pop("not_saved", None)
    try:
        write_launcher_file(trial_dir, record, record_type)
    except OSError as exc:
        record["not_saved"] = f"launcher.json not written: {exc.strerror}"


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

    ``outcome`` is what waiting saw (exit code, timed out, interrupted, engine lost), ``state`` what
    the engine said afterwards (:func:`collect_container`).
    """
    record["state"] = state
    record["outcome"] = outcome
    save_record(trial_dir, record)
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


def remove_leftover_containers(trial_dir: Path, container_id: str = "", *, client: Any = None) -> list[str]:
    """Stop and remove the containers of a trial that outlived the host CLI; their logs go to trial.log.

    They are found by ``container_id`` (from launcher.json) and by the :data:`TRIAL_DIR_LABEL` every
    trial container carries, so a container created just before the host died (launcher.json not
    yet written) is found too. Best effort: returns the ids removed; an engine that does not answer
    removes nothing.
    """
    trial_dir = trial_dir.resolve()
    try:
        client = client or docker_sdk().from_env(timeout=10)
        found = {c.id: c for c in client.containers.list(all=True, filters={"label": f"{TRIAL_DIR_LABEL}={trial_dir}"})}
        if container_id and not any(cid.startswith(container_id) for cid in found):
            try:
                named = client.containers.get(container_id)
                found[named.id] = named
            except Exception:  # already removed  # noqa: BLE001
                pass
    except Exception:  # no SDK, or no engine answers  # noqa: BLE001
        return []
    removed = []
    for cid, container in sorted(found.items()):
        try:
            with write_binary(trial_dir / "trial.log", trial_dir, append=True) as log:
                log.write(container.logs(stdout=True, stderr=True))
        except Exception:  # logs are a courtesy here  # noqa: BLE001
            pass
        if remove_container(container):  # kills it if running; also removes a created, never started one
            removed.append(cid)
    return removed
