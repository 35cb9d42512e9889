"""A trial process that outlived the host CLI: find it, stop it, and tell a crash from a kill.

``--resume`` records such a trial from its directory; before it does, :func:`stop_leftover` makes
sure the trial's ``runner.trial`` process (found by its command line) is gone, so it writes nothing
after its row. This is the default ``stop_leftover`` of every launcher
(:class:`runner.launch.launcher.LauncherBase`); a launcher with its own kind of leftover (a container, a
Slurm job) overrides it.

Example::

    stop_leftover(Path("results/quick/trials/0002-r1-batch_size=4"))
    log_shows_error(Path("results/quick/trials/0002-r1-batch_size=4/trial.log"))   # True: a traceback
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def stop_leftover(trial_dir: Path) -> list[int]:
    """If the trial's process outlived the host CLI, stop it before recording it; returns the pids stopped.

    A trial process is found by its command line (``runner.trial`` and this trial's spec.json). The call
    returns once it is gone, so it writes nothing after its row.
    """
    processes = _trial_processes(trial_dir)
    for pid in processes:
        _kill(pid)
    return processes


def _kill(pid: int) -> None:
    """SIGKILL the trial's process group (or the process alone) and wait until it is gone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
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
