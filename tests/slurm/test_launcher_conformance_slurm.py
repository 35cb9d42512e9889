"""The slurm launcher kind through the conformance cases every kind runs (tests/launcher_cases.py), on the test
cluster (tests/unit/test_launcher_conformance.py runs the rest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import launcher_cases as cases
import pytest

from runner.campaign.launcher_choice import choose_launcher
from runner.launch.launcher import launcher_kinds

pytestmark = pytest.mark.slurm


def test_the_slurm_kind_conforms(cluster: Any, tmp_path: Path, study_text: Any) -> None:
    kinds = launcher_kinds()
    study = tmp_path / "study.toml"
    study.write_text(study_text())
    launcher = choose_launcher(study, "slurm", options={"slurm": {"gres": "gpu:1"}}).launcher
    cases.chosen_by_name(kinds["slurm"], launcher, study, kinds)
    cases.resume_identity_survives_adopt(kinds["slurm"], launcher)
    cases.stops_nothing_in_an_empty_trial(launcher, tmp_path)
