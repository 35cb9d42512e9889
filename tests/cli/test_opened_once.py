"""Each thing opened once (issue 34, deliverable 2): one study parse per `isocost run`, one read of raw.csv per
campaign directory per reading command.

The counts are taken by instrumenting every way a file is opened and every study parse (tests/opencount.py), on the
golden 1.0 campaign (a real run) and on a fake-trial `isocost run` (tests/fakecampaign.py: real host code, fake trials).
Before the change: `isocost run` parsed the study 3 times (5 with `--launcher auto`), and `decide` read raw.csv 3
times per directory, `summarize` 2 times.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakecampaign import FakeLauncher, fake_workspace
from opencount import count_raw_reads, count_study_parses

from runner.analysis.summarize import summarize_campaign
from runner.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"


def _campaign(tmp_path: Path, name: str = "campaign") -> Path:
    root = tmp_path / name
    shutil.copytree(GOLDEN, root)
    return root


def _invoke(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    # decide: the golden campaign recorded no rental, so the memo answers no (exit 3, the memo written)
    assert result.exit_code == (3 if args[0] == "decide" else 0), result.output
    return result.output


@pytest.mark.parametrize("command", [
    ["summarize", "{a}"], ["validate", "{a}"], ["period", "{a}"], ["compare", "{a}"],
    ["decide", "{a}", "--out", "{out}"],
])
def test_a_reading_command_reads_raw_csv_once_per_campaign_directory(tmp_path, monkeypatch, command):
    root = _campaign(tmp_path)
    reads = count_raw_reads(monkeypatch)
    _invoke([word.format(a=root, out=tmp_path / "out") for word in command])
    assert reads == [str(root / "raw.csv")], reads


@pytest.mark.parametrize("command", [["summarize", "{a}"], ["period", "{a}"], ["decide", "{a}", "--out", "{out}"]])
def test_a_reading_command_parses_the_frozen_study_once(tmp_path, monkeypatch, command):
    root = _campaign(tmp_path)
    parses = count_study_parses(monkeypatch)
    _invoke([word.format(a=root, out=tmp_path / "out") for word in command])
    assert len(parses) == 1, parses


@pytest.mark.parametrize("launcher", ["process", "auto"])
def test_run_parses_the_study_once(tmp_path, monkeypatch, launcher):
    import runner.launch.kinds.process.launcher

    study = fake_workspace(tmp_path / "ws", repetitions=1, batches="[1]")
    monkeypatch.setattr(runner.launch.kinds.process.launcher, "ProcessLauncher", FakeLauncher)
    parses = count_study_parses(monkeypatch)
    _invoke(["run", str(study), "--out", str(tmp_path / "out"), "--launcher", launcher])
    assert len(parses) == 1, parses
    assert (tmp_path / "out" / "summary.md").is_file()


def test_summarize_after_opening_once_writes_the_golden_bytes(tmp_path):
    root = _campaign(tmp_path)
    for name in ("summary.json", "summary.md", "verdicts.csv", "verdicts.json"):
        (root / name).unlink()
    summarize_campaign(root)
    for name in ("summary.json", "summary.md", "verdicts.csv", "verdicts.json"):
        assert (root / name).read_bytes() == (GOLDEN / name).read_bytes(), name


def test_verify_reads_the_bundled_raw_csv_once(tmp_path, monkeypatch):
    """``verify`` opens the bundled campaign once (its checks, BUNDLE.json's claims and the re-derived files all
    from the one Campaign); before: 3 reads of raw.csv."""
    bundle = Path(__file__).resolve().parents[1] / "data" / "golden_bundle.tar.gz"
    reads = count_raw_reads(monkeypatch)
    parses = count_study_parses(monkeypatch)
    _invoke(["verify", str(bundle)])
    assert len(reads) == 1, reads
    assert reads[0].endswith("campaign/raw.csv"), reads
    assert len(parses) == 1, parses  # before: 2 (the checks' parse, then the re-derivation's)


def test_bundle_reads_the_campaigns_raw_csv_once(tmp_path, monkeypatch):
    """``bundle`` checks, types and packs raw.csv from one read (before: 4 reads of the campaign's raw.csv); the
    one other read is of the new archive's own copy, which it verifies before keeping it."""
    root = _campaign(tmp_path)
    reads = count_raw_reads(monkeypatch)
    _invoke(["bundle", str(root), "-o", str(tmp_path / "b.tar.gz")])
    assert [read for read in reads if read.startswith(str(root))] == [str(root / "raw.csv")], reads
    assert len(reads) == 2, reads
    monkeypatch.undo()
    _invoke(["verify", str(tmp_path / "b.tar.gz")])
