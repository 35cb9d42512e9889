"""What --resume does with a trial that outlived the host CLI, before it records the trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.launch import leftover
from runner.launch.kinds.docker import leftover as docker_leftover
from runner.launch.kinds.docker.record import DockerRecord
from runner.launch.launcher_file import write_launcher_file


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, str]]:
    seen: list[tuple[Path, str]] = []
    monkeypatch.setattr(docker_leftover, "remove_leftover_containers",
                        lambda trial_dir, container_id="": seen.append((trial_dir, container_id)) or [])
    return seen


def test_a_container_named_in_launcher_json_is_removed(tmp_path: Path, calls) -> None:
    write_launcher_file(tmp_path, {"container_id": "abc123"}, DockerRecord)
    docker_leftover.stop_leftover(tmp_path)
    assert calls == [(tmp_path, "abc123")]


def test_without_launcher_json_or_process_the_trial_label_is_searched(tmp_path: Path, calls, monkeypatch) -> None:
    """The host died after creating the container but before launcher.json named it."""
    monkeypatch.setattr(leftover, "_trial_processes", lambda trial_dir: [])
    docker_leftover.stop_leftover(tmp_path)
    assert calls == [(tmp_path, "")]


def test_a_leftover_process_is_killed_and_no_engine_is_asked(tmp_path: Path, calls, monkeypatch) -> None:
    killed: list[int] = []
    monkeypatch.setattr(leftover, "_trial_processes", lambda trial_dir: [4242])
    monkeypatch.setattr(leftover, "_kill", killed.append)
    docker_leftover.stop_leftover(tmp_path)
    assert killed == [4242] and calls == []


def test_an_unreadable_launcher_json_names_no_container(tmp_path: Path) -> None:
    (tmp_path / "launcher.json").write_text("{not json")
    assert docker_leftover._recorded_container(tmp_path) == ""
    (tmp_path / "launcher.json").write_text(json.dumps(["a list"]))
    assert docker_leftover._recorded_container(tmp_path) == ""
