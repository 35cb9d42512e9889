"""Every launcher kind that can run on any machine runs a real campaign through the CLI, found by name: the
built-in ones and the fixture kind ``cwd-process`` (tests/fixtures/launchers/, through ``ISOCOST_LAUNCHERS_PATH`` as a
user's own launcher), then ``--resume`` finds the campaign's launcher unchanged. Kinds that need an engine or a
cluster run theirs in tests/docker and tests/slurm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.campaign_dir.layout import read_raw
from runner.launch.launcher import LAUNCHERS_ENV, launcher_kinds

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "launchers"
pytestmark = pytest.mark.e2e


def _local_kinds() -> list[str]:
    """Every kind found with the fixture folder that needs no engine or cluster (its ``requires`` is empty)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LAUNCHERS_ENV, str(FIXTURES))
        return [name for name, kind in launcher_kinds().items() if not kind.requires]


def _isocost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), LAUNCHERS_ENV: str(FIXTURES)}
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


@pytest.mark.parametrize("name", _local_kinds())
def test_a_kind_runs_a_real_campaign_found_by_name_and_resumes_it(name, make_workspace, tmp_path):
    study = make_workspace(f"ws-{name}", n=8, repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    first = _isocost("run", str(study), "--out", str(out), "--launcher", name)
    assert first.returncode == 0, first.stderr
    rows = read_raw(out / "raw.csv")
    assert [r["status"] for r in rows] == ["ok", "ok"] and {r["launcher"] for r in rows} == {name}
    assert json.loads((out / "campaign.json").read_text())["launcher"]["kind"] == name
    for row in rows:
        recorded = json.loads((out / "trials" / row["trial_id"] / "launcher.json").read_text())
        assert recorded["kind"] == name and recorded["pid"] > 0
    again = _isocost("run", str(study), "--out", str(out), "--resume", "--launcher", name)
    assert again.returncode == 0, again.stderr
    assert "0 trial(s) run now; 2 row(s)" in again.stderr
