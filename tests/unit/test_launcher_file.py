"""launcher.json through its kind's record (runner/launch/launcher_file.py): each kind its own keys and the
``kind`` key (version 3); versions 1 and 2 (one record for every kind, no ``kind``) still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from runner.launch.kinds.docker.record import DockerRecord
from runner.launch.kinds.process.launcher import ProcessRecord
from runner.launch.kinds.slurm.record import SlurmRecord
from runner.launch.launcher_file import LAUNCHER_SCHEMA_VERSION, read_launcher_file, write_launcher_file


def test_each_launchers_record_reads_back(tmp_path: Path) -> None:
    write_launcher_file(tmp_path, {"pid": 41, "command": ["python", "-m", "runner.trial"]}, ProcessRecord)
    assert read_launcher_file(tmp_path) == ProcessRecord(pid=41, command=("python", "-m", "runner.trial"))
    data = json.loads((tmp_path / "launcher.json").read_text(encoding="utf-8"))
    assert data == {"schema_version": LAUNCHER_SCHEMA_VERSION, "kind": "process", "pid": 41,
                    "command": ["python", "-m", "runner.trial"]}  # None not written
    docker = {"image_ref": "isocost-cpu:1", "image_id": "sha256:" + "a" * 64, "user": "1000:1000", "limits": {},
              "times": {"create_at": "2026-12-01T09:00:00.000+00:00"}, "container_id": "c1", "container_name": "n",
              "state": {"ExitCode": 0}, "outcome": {"exit_code": 0}}
    write_launcher_file(tmp_path, {**docker, "host": "h", "host_url": "ssh://h", "engine_id": "e", "volume": "v",
                                   "transfer": {"sent": {}}}, DockerRecord)
    assert read_launcher_file(tmp_path).container_id == "c1"
    write_launcher_file(tmp_path, {"lane": "isocost-c0ffee", "runtime": "process", "pinned_node": None,
                                   "pinned_gpus": [], "jobs": [{"job_id": "7", "submitted_at": "t"}]}, SlurmRecord)
    recorded = read_launcher_file(tmp_path)
    assert isinstance(recorded, SlurmRecord) and recorded.jobs == ({"job_id": "7", "submitted_at": "t"},)


def test_a_kind_writes_only_its_own_keys(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown key 'container_id'"):
        write_launcher_file(tmp_path, {"container_id": "c1"}, ProcessRecord)
    with pytest.raises(UserError, match="this record is 'process'"):
        write_launcher_file(tmp_path, {"kind": "docker"}, ProcessRecord)


@pytest.mark.parametrize(("old", "expected"), [
    ({"container_id": "abc123"}, DockerRecord(container_id="abc123")),  # version 1: no schema_version
    ({"schema_version": 2, "pid": 7, "command": ["python"]}, ProcessRecord(pid=7, command=("python",))),
    ({"schema_version": 2, "lane": "l", "jobs": [], "error": "x"}, SlurmRecord(lane="l", jobs=(), error="x")),
    ({"schema_version": 2, "error": "no engine"}, DockerRecord(error="no engine")),
])
def test_versions_1_and_2_still_read_as_the_kind_whose_record_holds_their_keys(tmp_path: Path, old, expected):
    (tmp_path / "launcher.json").write_text(json.dumps(old), encoding="utf-8")
    assert read_launcher_file(tmp_path) == expected
    assert read_launcher_file(tmp_path / "none") is None


def test_a_key_no_launcher_writes_or_an_unknown_kind_is_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "launcher.json").write_text(json.dumps({"schema_version": 2, "containr_id": "c1"}), encoding="utf-8")
    with pytest.raises(UserError, match="unknown key 'containr_id'"):
        read_launcher_file(tmp_path)
    (tmp_path / "launcher.json").write_text(json.dumps({"container_id": 5}), encoding="utf-8")
    with pytest.raises(UserError, match="key 'container_id' must be a string or null, got 5"):
        read_launcher_file(tmp_path)
    (tmp_path / "launcher.json").write_text(json.dumps({"schema_version": 3, "kind": "kubernetes"}), encoding="utf-8")
    with pytest.raises(UserError) as info:
        read_launcher_file(tmp_path)
    assert "names launcher kind 'kubernetes'" in info.value.what and "ISOCOST_LAUNCHERS_PATH" in info.value.fix
    (tmp_path / "launcher.json").write_text(json.dumps({"schema_version": 4, "kind": "process"}), encoding="utf-8")
    with pytest.raises(UserError, match="schema_version 4"):
        read_launcher_file(tmp_path)
