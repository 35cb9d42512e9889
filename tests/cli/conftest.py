"""Fixtures shared by the CLI tests of issue 38 (evidence values, links): one real campaign, copied per test.

Example: a test taking ``evidence_campaign`` gets a fresh copy of a decided fake campaign (2 variants × 2).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_hostile_inputs import invoke, ws  # noqa: F401 (ws: the hostile-input workspace, a fixture)


@pytest.fixture(scope="session")
def evidence_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fakecampaign import FakeLauncher, fake_workspace

    from protocol.records.stages import Rental
    from runner.campaign.run import run_campaign

    root = tmp_path_factory.mktemp("values")
    run_campaign(fake_workspace(root / "ws", n=6, repetitions=2), root / "out", FakeLauncher(),
                 rental=Rental("rtx-4090", 2))
    for command in ("validate", "summarize", "decide"):
        result = invoke([command, str(root / "out")])
        assert result.exit_code == 0, result.output
    return root / "out"


@pytest.fixture
def evidence_campaign(evidence_built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "campaign"
    shutil.copytree(evidence_built, copy)
    return copy
