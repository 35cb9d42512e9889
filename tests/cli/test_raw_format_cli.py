"""A campaign whose campaign.json declares a raw table format this isocost does not read (a newer isocost's, or a
pre-release one of isocost 0.x) is refused by every reading command with that reason and what to do: never called
edited, never read as format 5, not even with --allow-inconsistent. The campaign is the golden 1.0 one of
``tests/data`` (format 5), its declared format changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main

CAMPAIGN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"


@pytest.fixture()
def newer(tmp_path: Path) -> Path:
    root = tmp_path / "campaign"
    shutil.copytree(CAMPAIGN, root)
    description = json.loads((root / "campaign.json").read_text(encoding="utf-8"))
    (root / "campaign.json").write_text(json.dumps({**description, "raw_schema_version": 8}), encoding="utf-8")
    return root


@pytest.mark.parametrize("command", [["summarize"], ["validate"], ["decide"], ["summarize", "--allow-inconsistent"],
                                     ["bundle", "-o", "{tmp}/c.tar.gz"]], ids=" ".join)
def test_every_reading_command_names_the_format_and_the_isocost_to_use(newer: Path, tmp_path: Path,
                                                                       command: list[str]) -> None:
    before = {path: path.read_bytes() for path in newer.rglob("*") if path.is_file()}
    args = [command[0], str(newer), *(part.replace("{tmp}", str(tmp_path)) for part in command[1:])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "raw table format 8" in result.output and "a newer isocost wrote it" in result.output
    assert "isocost version that started it" in result.output
    assert "changed after it was written" not in result.output and "does not match" not in result.output
    assert {path: path.read_bytes() for path in newer.rglob("*") if path.is_file()} == before
    assert not (tmp_path / "c.tar.gz").exists()


@pytest.mark.parametrize("declared", [3, 4, None])
@pytest.mark.parametrize("command", [["summarize"], ["validate"], ["decide"], ["period"],
                                     ["bundle", "-o", "{tmp}/c.tar.gz"]], ids=" ".join)
def test_every_reading_command_refuses_a_pre_release_campaign_naming_the_fix(tmp_path: Path, command: list[str],
                                                                            declared: int | None) -> None:
    root = tmp_path / "campaign"
    shutil.copytree(CAMPAIGN, root)
    description = json.loads((root / "campaign.json").read_text(encoding="utf-8"))
    description.update(isocost_version="0.1.0", raw_schema_version=declared)
    if declared is None:
        del description["raw_schema_version"]
    (root / "campaign.json").write_text(json.dumps(description), encoding="utf-8")
    args = [command[0], str(root), *(part.replace("{tmp}", str(tmp_path)) for part in command[1:])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    named = "no raw table format (pre-release format 3)" if declared is None else f"raw table format {declared}"
    assert f"campaign.json declares {named}: a pre-release format (isocost 0.x)" in result.output
    assert "Re-run with isocost 0.x (the version that started it, 0.1.0 by its campaign.json)" in result.output
    assert "start a new campaign" in result.output and "does not match" not in result.output
