"""The conformance cases every launcher kind runs through, given the kind's launcher for a study.

``tests/unit/test_launcher_conformance.py`` runs them for every kind that can run on any machine (and the
cases that need no launcher for every kind); ``tests/docker/test_launcher_conformance_docker.py`` and
``tests/slurm/test_launcher_conformance_slurm.py`` run the same cases with a real engine and cluster (CI:
``ISOCOST_REQUIRE_DOCKER=1``, ``ISOCOST_REQUIRE_SLURM=1``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import UserError
from runner.campaign.launcher_choice import choose_launcher
from runner.launch.launcher import LauncherKind


def chosen_by_name(kind: LauncherKind, launcher: Any, study: Path, kinds: dict[str, LauncherKind]) -> None:
    """The chosen launcher is of its kind, says so, and another kind's options are refused with it."""
    assert launcher.name == kind.name and launcher.describe()["kind"] == kind.name
    assert launcher.summary().startswith(kind.name) and launcher.check_line()[1]
    for other, described in kinds.items():
        if other != kind.name and described.options:
            option = described.options[0]
            with pytest.raises(UserError, match=f"belong to --launcher {other}"):
                choose_launcher(study, kind.name, options={other: {option.name.replace("-", "_"): "x"}})


def resume_identity_survives_adopt(kind: LauncherKind, launcher: Any) -> None:
    identity = launcher.resume_identity()
    assert identity["kind"] == kind.name
    launcher.adopt(launcher.describe())
    assert launcher.resume_identity() == identity


def stops_nothing_in_an_empty_trial(launcher: Any, tmp_path: Path) -> None:
    empty = tmp_path / "trials" / "000-empty"
    empty.mkdir(parents=True)
    result = launcher.stop_leftover(empty)
    assert result is None or result.exit_code is None


def stops_a_leftover_trial_process(launcher: Any, tmp_path: Path) -> None:
    """A trial process left by a killed host CLI (``runner.trial`` and its spec.json, relative to its working
    directory) is gone once ``stop_leftover`` returns."""
    trial = tmp_path / "trials" / "001-leftover"
    trial.mkdir(parents=True)
    (trial / "spec.json").write_text("{}")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "runner.trial", "spec.json"],
                            cwd=trial, start_new_session=True)
    try:
        time.sleep(0.3)
        launcher.stop_leftover(trial)
        assert proc.wait(timeout=15) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
