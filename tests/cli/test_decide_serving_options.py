"""``isocost decide``'s serving options (--peak-qps, --hours-per-day, --days) on an offline campaign: refused by
name, nothing written; without them the offline decision is the golden one (tests/cli/test_decide_cli.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from runner.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"


def test_serving_options_are_refused_for_an_offline_study(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    result = CliRunner().invoke(main, ["decide", str(campaign), "--peak-qps", "40", "--hours-per-day", "8",
                                       "--days", "7", "--out", str(tmp_path / "decision")])
    assert result.exit_code == 2, result.output
    assert "declare serving traffic, and this campaign's study is offline" in result.output
    assert not (tmp_path / "decision").exists()


def test_a_bad_serving_option_is_refused_before_any_campaign_is_read(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["decide", str(GOLDEN), "--peak-qps", "nan", "--hours-per-day", "8",
                                       "--days", "7"])
    assert result.exit_code == 2 and "--peak-qps must be a finite number above 0" in result.output, result.output
