"""The docker launcher kind through the conformance cases every kind runs (tests/launcher_cases.py), on a real
engine with this checkout's CPU image (tests/unit/test_launcher_conformance.py runs the rest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import launcher_cases as cases
import pytest

from runner.campaign.launcher_choice import choose_launcher
from runner.launch.launcher import launcher_kinds

pytestmark = pytest.mark.docker


def test_the_docker_kind_conforms(cpu_image: Any, images_lock: Path, workspace: Any, tmp_path: Path) -> None:
    kinds = launcher_kinds()
    study = workspace.study("conformance", batches="[4]")
    launcher = choose_launcher(study, "docker", cpu_image.image_id, lock_path=images_lock).launcher
    cases.chosen_by_name(kinds["docker"], launcher, study, kinds)
    cases.resume_identity_survives_adopt(kinds["docker"], launcher)
    cases.stops_nothing_in_an_empty_trial(launcher, tmp_path)
    auto = choose_launcher(study, "auto", lock_path=images_lock)  # the lock names the image: auto picks docker
    assert auto.launcher.name == "docker" and auto.notice == ""
