"""Failures seen from outside the container still give a row: OOM kill, time limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker


def test_memory_limit_oom_is_recorded(cpu_image: Any, workspace: Any, tmp_path: Path, files: Any,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.campaign.run import run_campaign
    from runner.launch.daemon.limits import ContainerLimits
    from runner.launch.kinds.docker.launcher import DockerLauncher

    monkeypatch.delenv("ISOCOST_FAULT_INJECT", raising=False)
    # Importing torch alone needs more than this: the kernel kills the trial, the engine says OOMKilled.
    launcher = DockerLauncher(cpu_image.image_id, stack="cpu", limits=ContainerLimits(mem_limit="96m"))
    run_campaign(workspace.study("one-b4", batches="[4]"), tmp_path / "out", launcher)
    [row] = files.rows(tmp_path / "out")
    assert row["status"] == "oom", row["notes"]
    assert row["exit_code"] == "137"
    assert "OOMKilled" in row["notes"]
    assert row["image_id"] == cpu_image.image_id
    assert row["corpus_accepted"] == "false"


def test_time_limit_stops_the_container(cpu_image: Any, workspace: Any, tmp_path: Path, files: Any,
                                        monkeypatch: pytest.MonkeyPatch, docker_client: Any) -> None:
    from runner.campaign.run import run_campaign
    from runner.launch.kinds.docker.launcher import DockerLauncher

    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "hang-at-batch:0")
    launcher = DockerLauncher(cpu_image.image_id, stack="cpu", kill_grace_s=5)
    run_campaign(workspace.study("hang", batches="[4]", timeout=12), tmp_path / "out", launcher)
    [row] = files.rows(tmp_path / "out")
    assert row["status"] == "timeout", row["notes"]
    assert "time limit" in row["notes"]
    [trial] = files.trials(tmp_path / "out")
    # SIGTERM reached the trial through docker stop: it wrote its own account before exiting.
    assert '"status": "interrupted"' in (trial / "status.json").read_text()
    assert docker_client.containers.list(all=True, filters={"label": f"org.isocost.trial_dir={trial}"}) == []
