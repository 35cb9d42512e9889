"""launcher.json through its record (runner/launch/launcher_file.py): every kind's keys, version 1 still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from runner.launch.launcher_file import LauncherFile, read_launcher_file, write_launcher_file


def test_each_launchers_record_reads_back(tmp_path: Path) -> None:
    write_launcher_file(tmp_path, {"pid": 41, "command": ["python", "-m", "runner.trial"]})
    assert read_launcher_file(tmp_path) == LauncherFile(pid=41, command=("python", "-m", "runner.trial"))
    data = json.loads((tmp_path / "launcher.json").read_text(encoding="utf-8"))
    assert data == {"schema_version": 2, "pid": 41, "command": ["python", "-m", "runner.trial"]}  # None not written
    docker = {"image_ref": "isocost-cpu:1", "image_id": "sha256:" + "a" * 64, "user": "1000:1000", "limits": {},
              "times": {"create_at": "2026-12-01T09:00:00.000+00:00"}, "container_id": "c1", "container_name": "n",
              "state": {"ExitCode": 0}, "outcome": {"exit_code": 0}}
    write_launcher_file(tmp_path, {**docker, "host": "h", "host_url": "ssh://h", "engine_id": "e", "volume": "v",
                                   "transfer": {"sent": {}}})
    assert read_launcher_file(tmp_path).container_id == "c1"  # type: ignore[union-attr]
    write_launcher_file(tmp_path, {"lane": "isocost-c0ffee", "runtime": "process", "pinned_node": None,
                                   "pinned_gpus": [], "jobs": [{"job_id": "7", "submitted_at": "t"}]})
    assert read_launcher_file(tmp_path).jobs == ({"job_id": "7", "submitted_at": "t"},)  # type: ignore[union-attr]


def test_a_version_1_file_without_schema_version_still_reads(tmp_path: Path) -> None:
    (tmp_path / "launcher.json").write_text(json.dumps({"container_id": "abc123"}), encoding="utf-8")
    assert read_launcher_file(tmp_path) == LauncherFile(container_id="abc123")
    assert read_launcher_file(tmp_path / "none") is None


def test_a_key_no_launcher_writes_is_refused_where_it_is_written_and_read(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown key 'containr_id'"):
        write_launcher_file(tmp_path, {"containr_id": "c1"})
    (tmp_path / "launcher.json").write_text(json.dumps({"container_id": 5}), encoding="utf-8")
    with pytest.raises(UserError, match="key 'container_id' must be a string or null, got 5"):
        read_launcher_file(tmp_path)
