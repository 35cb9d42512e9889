"""Every 1.x reads every 1.x file: each reading command reads the golden 1.0 campaign and bundle of tests/data.

``tests/data/golden_campaign`` and ``tests/data/golden_bundle.tar.gz`` were recorded once by isocost 1.0.0 from a
real run on the tiny workspace (tests/golden.py) and are kept byte for byte. If a change makes any reader refuse
them, it broke the promise of docs/formats.md: a 1.x reads every 1.x file. (What the readers print from them is held
byte for byte by tests/cli/test_golden_outputs.py.)
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from protocol import __version__
from runner.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
CAMPAIGN = DATA / "golden_campaign"
BUNDLE = DATA / "golden_bundle.tar.gz"


@pytest.fixture()
def campaign(tmp_path: Path) -> Path:
    """A copy of the golden campaign (a reader may write its outputs beside what it reads)."""
    return Path(shutil.copytree(CAMPAIGN, tmp_path / "campaign"))


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    # decide: the golden campaign recorded no rental, so the memo answers no (exit 3, the memo printed)
    assert result.exit_code == (3 if args[0] == "decide" else 0), result.output
    return result.output


def test_the_golden_files_are_1_0_and_small() -> None:
    record = json.loads((CAMPAIGN / "campaign.json").read_text(encoding="utf-8"))
    assert record["isocost_version"] == "1.0.0"
    assert record["raw_schema_version"] == 5  # 1.0's raw format, read by every 1.x
    assert __version__.split(".")[0] == "1"  # a new major version may record them again (tests/golden.py)
    size = sum(path.stat().st_size for path in CAMPAIGN.rglob("*") if path.is_file())
    assert size < 150_000 and BUNDLE.stat().st_size < 40_000, (size, BUNDLE.stat().st_size)


def test_validate_reads_the_golden_campaign(campaign: Path) -> None:
    assert "6 of 6 passes accepted" in _run("validate", str(campaign))


def test_summarize_reads_the_golden_campaign(campaign: Path) -> None:
    output = _run("summarize", str(campaign))
    assert "batch_size=1" in output and "batch_size=4" in output


def test_decide_reads_the_golden_campaign(campaign: Path) -> None:
    assert "batch_size=1 on host vm" in _run("decide", str(campaign))


def test_period_reads_the_golden_campaign(campaign: Path) -> None:
    assert "needed period" in _run("period", str(campaign))


def test_bundle_reads_the_golden_campaign_and_verify_reads_the_new_bundle(campaign: Path, tmp_path: Path) -> None:
    _run("bundle", str(campaign), "-o", str(tmp_path / "again.tar.gz"))
    assert "OK:" in _run("verify", str(tmp_path / "again.tar.gz"))


def test_verify_reads_the_golden_bundle() -> None:
    output = _run("verify", str(BUNDLE))
    assert "every SHA-256 matches BUNDLE.json" in output and "consistent: 6 trial(s)" in output


def test_the_golden_bundle_holds_the_golden_campaign() -> None:
    with tarfile.open(BUNDLE) as archive:
        names = {member.name for member in archive.getmembers()}
        for path in CAMPAIGN.rglob("*"):
            if path.is_file():
                name = f"campaign/{path.relative_to(CAMPAIGN).as_posix()}"
                assert name in names, name
                handle = archive.extractfile(name)
                assert handle is not None and handle.read() == path.read_bytes(), name


def test_the_version_is_one_figure_everywhere_it_is_reported() -> None:
    """pyproject.toml, ``protocol.__version__`` (campaign.json, BUNDLE.json, each trial's manifest) and
    ``isocost --version`` say the same version."""
    import tomllib

    project = tomllib.loads((DATA.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == __version__
    assert _run("--version").strip().endswith(__version__)
    manifest = json.loads(next(CAMPAIGN.glob("trials/*/manifest.json")).read_text(encoding="utf-8"))
    assert manifest["software"]["isocost"] == "1.0.0"
