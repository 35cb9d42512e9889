"""A trial that outlived the host CLI: find it, stop it, and tell a crash from a kill.

``--resume`` records such a trial from its directory; before it does, :func:`stop_leftover` makes
sure the trial (a container named in its ``launcher.json``, or a ``runner.trial`` process found by
its command line) is gone, so it writes nothing after its row.

Example::

    stop_leftover(Path("results/quick/trials/0002-r1-batch_size=4"))
    log_shows_error(Path("results/quick/trials/0002-r1-batch_size=4/trial.log"))   # True: a traceback
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from protocol.errors import UserError
from protocol.jsonio import read_json


def stop_leftover(trial_dir: Path) -> None:
    """If the trial outlived the host CLI, stop it before recording it.

    A container is found by the id in launcher.json. A trial process is found by its command line
    (``runner.trial`` and this trial's spec.json), so one whose host died before launcher.json was
    written is stopped too; the call returns once it is gone, so it writes nothing after its row.
    """
    pid_file = trial_dir / "launcher.json"
    if pid_file.exists():
        try:
            record = read_json(pid_file)
        except (UserError, ValueError, TypeError):
            record = {}
        container_id = record.get("container_id") if isinstance(record, dict) else None
        if container_id:
            _remove_leftover_container(str(container_id), trial_dir)
            return
    for pid in _trial_processes(trial_dir):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
        _wait_gone(pid)


def _trial_processes(trial_dir: Path) -> list[int]:
    """Processes on this machine running the trial of ``trial_dir`` (empty where there is no /proc)."""
    spec = (trial_dir / "spec.json").resolve()
    found = []
    try:
        entries = [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if "runner.trial" not in args or int(entry.name) == os.getpid():
                continue
            cwd = Path(os.readlink(entry / "cwd"))  # the trial's relative paths are relative to its cwd
        except OSError:
            continue
        if any(arg.endswith("spec.json") and (cwd / arg).resolve() == spec for arg in args):
            found.append(int(entry.name))
    return found


def _wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    """Until the killed process has exited (or is a zombie waiting for its new parent to reap it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)


def log_shows_error(path: Path) -> bool:
    """Did the trial die of an exception (its traceback is in the log) rather than a kill?"""
    try:
        tail = path.read_bytes()[-4096:].decode("utf-8", "replace")
    except OSError:
        return False
    return "Traceback (most recent call last)" in tail


def _remove_leftover_container(container_id: str, trial_dir: Path) -> None:
    """A trial container that outlived the host CLI: keep its logs, then stop and remove it (best effort)."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        container = client.containers.get(container_id)
        with open(trial_dir / "trial.log", "ab") as log:
            log.write(container.logs(stdout=True, stderr=True))
        container.remove(force=True)  # kills it if running; also works on a created, never started one
    except Exception:  # the engine may be gone, or the container already removed  # noqa: BLE001
        pass


