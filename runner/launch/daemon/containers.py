"""One trial container's end, on any daemon: stop it, collect it, remove it.

The docker kind's local and shipping launchers (:mod:`runner.launch.kinds.docker`) share this tail of a trial:

- :func:`stop_container` (SIGTERM, SIGKILL after a grace period) and :func:`exit_code_after_stop`;
- :func:`collect_container`: the container's logs appended to ``trial.log`` and its final state;
- :func:`remove_container`;
- :func:`remove_leftover_containers`: on ``--resume``, the containers of a trial that outlived
  the host CLI, found by id and by label (so also one created just before the host died, before
  launcher.json named it).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.io.safe_write import write_binary
from runner.launch.daemon.client import docker_sdk

#: Where the trial sees its inputs and its output directory.
CONTAINER_IN = "/in"
CONTAINER_MODEL = "/in/model"
CONTAINER_OUT = "/out"

#: The label every trial container carries: its trial directory on the host CLI's machine.
TRIAL_DIR_LABEL = "org.isocost.trial_dir"

#: The parts of the daemon's ``State`` a trial's launcher.json keeps.
STATE_FIELDS = ("Status", "ExitCode", "OOMKilled", "Error", "StartedAt", "FinishedAt")


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds (the times in launcher.json)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def stop_container(container: Any, grace_s: float) -> None:
    """SIGTERM so the trial writes its status, SIGKILL after the grace period (docker stop)."""
    with contextlib.suppress(Exception):  # the container may be gone, or the daemon with it
        container.stop(timeout=int(grace_s))


def exit_code_after_stop(container: Any, grace_s: float) -> int | None:
    """The exit code of a container being stopped; None when the daemon no longer says."""
    try:
        return int(container.wait(timeout=grace_s + 30).get("StatusCode"))
    except Exception:  # daemon gone: the exit code is unknown
        return None


def remove_container(container: Any) -> bool:
    """Remove a container (force); False when it could not be (already gone, or the daemon is)."""
    try:
        container.remove(force=True)
        return True
    except Exception:  # already gone, or the daemon is
        return False


def collect_container(container: Any, log_path: Path) -> dict[str, Any]:
    """Append the container's logs to ``log_path``; its final state (:data:`STATE_FIELDS`).

    Raises what the daemon raised when it went away between the exit and the collection.
    """
    logs = container.logs(stdout=True, stderr=True)
    with write_binary(log_path, log_path.parent, append=True) as handle:
        handle.write(logs)
    container.reload()
    raw = container.attrs.get("State") or {}
    return {key: raw.get(key) for key in STATE_FIELDS}


def remove_leftover_containers(trial_dir: Path, container_id: str = "", *, client: Any = None) -> list[str]:
    """Stop and remove the containers of a trial that outlived the host CLI; their logs go to trial.log.

    They are found by ``container_id`` (from launcher.json) and by the :data:`TRIAL_DIR_LABEL` every trial container
    carries, so a container created just before the host died (launcher.json not yet written) is found too. Best effort:
    returns the ids removed; a daemon that does not answer removes nothing.
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
    except Exception:  # no SDK, or no daemon answers  # noqa: BLE001
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
