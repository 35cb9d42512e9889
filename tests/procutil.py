"""Process helpers shared by the test engines (tests/multihost/loopback.py, tests/faults/private_engine.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie child of ours counts as gone (and is reaped)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return "zombie" not in proc_state(pid)


def proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n", 1)[0].lower()
    except (OSError, IndexError):
        return ""


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def send_signal(pid: int, sig: int) -> None:
    if pid > 0 and alive(pid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``pid`` to end; True if it did."""
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)
