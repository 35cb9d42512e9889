"""``make faults`` never passes by skipping: a case that could not run is named, with its reason, and
fails the run where CI requires it (no engine under ISOCOST_REQUIRE_DOCKER=1, no tmpfs mount under
ISOCOST_REQUIRE_MOUNT=1). No engine, model or mount needed for these tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cases
import fault_table as report
import pytest


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "build_tiny_model", lambda path: path)


def test_a_missing_engine_is_the_reason_and_fails_where_required(monkeypatch, capsys, no_model):
    monkeypatch.setattr(report, "docker_unavailable", lambda: "no Docker engine answers (connection refused)")
    monkeypatch.setenv("ISOCOST_REQUIRE_DOCKER", "1")
    assert report.main(["--containers"]) == 1
    out = capsys.readouterr()
    assert "NOT RUN" in out.out and "connection refused" in out.out
    assert "not run (REQUIRED): hang: no Docker engine answers" in out.out
    monkeypatch.delenv("ISOCOST_REQUIRE_DOCKER")
    assert report.main(["--containers"]) == 0  # a laptop without Docker: said, not failed
    assert "not run: hang: no Docker engine answers" in capsys.readouterr().out


def test_mounting_is_probed_not_guessed_from_the_uid(monkeypatch):
    cases.mount_refused.cache_clear()
    calls: list[list[str]] = []

    def refused(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 32, "", "mount: /tmp/x: permission denied.\n")

    monkeypatch.setattr(cases.subprocess, "run", refused)
    try:
        why = cases.mount_refused()
    finally:
        cases.mount_refused.cache_clear()
    assert calls and calls[0][:3] == ["mount", "-t", "tmpfs"]
    assert "mount exit 32" in why and "permission denied" in why


def test_a_refused_mount_is_not_run_and_fails_where_required(monkeypatch, capsys, no_model, tmp_path):
    monkeypatch.setattr(cases, "mount_refused", lambda: "mounting a tmpfs is refused here (mount exit 32)")
    ctx = cases.Context(root=tmp_path, model=tmp_path, launcher_factory=lambda: None, launcher_name="process")
    monkeypatch.setattr(cases.Context, "study", lambda self, **options: Path("/nonexistent/study.toml"))
    with pytest.raises(cases.NotRun) as caught:
        cases.case_disk_full(ctx)
    assert caught.value.required_by == "ISOCOST_REQUIRE_MOUNT"
    monkeypatch.setattr(report, "PROCESS_CASES", {"disk-full": cases.case_disk_full})
    monkeypatch.setattr(report, "process_context", lambda root, model: cases.Context(
        root=root, model=model, launcher_factory=lambda: None, launcher_name="process"))
    monkeypatch.setenv("ISOCOST_REQUIRE_MOUNT", "1")
    assert report.main(["--processes"]) == 1
    assert "not run (REQUIRED): disk-full: mounting a tmpfs is refused" in capsys.readouterr().out
    monkeypatch.delenv("ISOCOST_REQUIRE_MOUNT")
    assert report.main(["--processes"]) == 0
