"""A trial process that dies (SIGKILL from outside, a crash) leaves nothing of its process group running: vLLM's
engine core and worker are children of the trial and outlived a SIGKILLed trial (found by the fault case
``vllm-killed-mid-pass``). The process launcher stops what is left of the trial's group once the trial is gone, and
says so in the row's notes."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from runner.launch.kinds.process.launcher import ProcessLauncher
from runner.launch.launcher import TrialPaths

#: Stands in for the trial's interpreter: starts a child that would live 300 s (an engine core), writes its pid,
#: then kills itself, as the OOM killer or a crash would.
FAKE_TRIAL = """#!/bin/sh
sleep 300 &
echo $! > "{pid_file}"
kill -9 $$
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_what_a_killed_trial_left_in_its_process_group_is_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    fake = tmp_path / "python"
    fake.write_text(FAKE_TRIAL.format(pid_file=pid_file))
    fake.chmod(0o755)
    trial_dir = tmp_path / "trial"
    trial_dir.mkdir()
    launcher = ProcessLauncher(python=str(fake))
    result = launcher.run(TrialPaths(trial_dir=trial_dir, corpus=tmp_path, model=tmp_path), timeout_s=60)
    child = int(pid_file.read_text())
    try:
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the trial's child outlived it"
        assert result.exit_code == -signal.SIGKILL
        assert any("left running" in note for note in result.notes), result.notes
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_the_sweep_returns_only_once_the_killed_processes_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGKILLed process holding gigabytes (vLLM's engine core) takes seconds to exit on a loaded machine: the
    sweep waits for it to be gone (or a zombie) instead of returning while it still runs (found in CI: a campaign
    returned with three engine processes still alive)."""
    from runner.launch.kinds.process import launcher as module

    sent: list[int] = []
    polls_after_kill = []

    def killpg(pgid: int, sig: int) -> None:
        sent.append(sig)

    def group_alive(pgid: int) -> bool:
        if signal.SIGKILL not in sent:
            return True  # ignores SIGTERM
        polls_after_kill.append(pgid)
        return len(polls_after_kill) < 5  # dies a few polls after SIGKILL

    monkeypatch.setattr(module.os, "killpg", killpg)
    monkeypatch.setattr(module, "_group_alive", group_alive)
    monkeypatch.setattr(module, "_KILL_GRACE_S", 0.2)
    assert module._stop_group(4242) is True
    assert sent == [signal.SIGTERM, signal.SIGKILL]
    assert len(polls_after_kill) == 5, "returned before the killed group was gone"
