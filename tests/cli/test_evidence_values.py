"""Issue 38, class 2: a sealed row is trusted for values no run can produce.

The chain proves a row was not edited after it was written; it does not make its values possible, and anyone
can recompute a sha256 chain (tests/rechain.py does, with isocost's own chain code). So every numeric cell of
every evidence file is checked for its domain when read (finite, non-negative, within its declared bounds), and
a value outside it is one ``Error:`` line naming the file, the row and the column: never a summary of it, never
a traceback. The campaign is real host code with fake trials (tests/fakecampaign.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rechain import rechain, reseal
from test_hostile_inputs import assert_user_error, invoke

from runner.campaign_dir.layout import read_rows

READING = ["validate", "summarize", "decide", "period", "bundle"]


def _argv(command: str, root: Path, tmp: Path) -> list[str]:
    return {"bundle": ["bundle", str(root), "-o", str(tmp / "b.tar.gz")],
            "memory": ["memory", "estimate", "--campaign", str(root)]}.get(command, [command, str(root)])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fakecampaign import FakeLauncher, fake_workspace

    from protocol.records import Rental
    from runner.campaign.run import run_campaign

    root = tmp_path_factory.mktemp("values")
    run_campaign(fake_workspace(root / "ws", n=6, repetitions=2), root / "out", FakeLauncher(),
                 rental=Rental("rtx-4090", 2))
    for command in ("validate", "summarize", "decide"):
        result = invoke([command, str(root / "out")])
        assert result.exit_code == 0, result.output
    return root / "out"


@pytest.fixture
def campaign(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "campaign"
    shutil.copytree(built, copy)
    return copy


def _set_cell(column: str, value: str, row: int = 1):
    def change(rows: list[dict[str, str]]) -> None:
        rows[row - 1][column] = value
    return change


@pytest.mark.parametrize("command", READING)
@pytest.mark.parametrize("column, value", [("pass_s", "-5"), ("pass_s", "inf"), ("pass_s", "nan"),
                                           ("peak_rss_bytes", "1" + "0" * 30), ("pass_s", "-inf"),
                                           ("load_s", "-1"), ("peak_allocated_bytes", "-1"), ("completed", "-3"),
                                           ("device_busy_share", "7"), ("queue_s", "1e300"), ("repetition", "0")])
def test_a_rechained_row_with_an_impossible_value_is_refused_naming_row_and_column(campaign, tmp_path, command,
                                                                                    column, value):
    rechain(campaign, _set_cell(column, value, row=2))
    assert_user_error(invoke(_argv(command, campaign, tmp_path)), "raw.csv", "row 2", column)


def test_the_unedited_campaign_reads_with_every_command(campaign, tmp_path):
    rechain(campaign, lambda rows: None)  # the helper itself changes nothing a reader sees
    for command in READING:
        result = invoke(_argv(command, campaign, tmp_path))
        assert result.exit_code == 0, f"{command}: {result.output}"
