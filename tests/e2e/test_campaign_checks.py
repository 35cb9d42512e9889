"""Every reading command checks the evidence first (defect 5 of issue 11): validate, summarize, decide.

A finished fake campaign (real host code, fake trials: tests/fakecampaign.py), then one edit each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fakecampaign import FakeLauncher, fake_workspace

from runner.analysis.summarize import summarize_campaign
from runner.campaign.run import run_campaign
from runner.campaign_dir.integrity import INCONSISTENT_BANNER, check_evidence
from runner.cli import main

pytestmark = pytest.mark.e2e

READERS = (["validate"], ["summarize"], ["decide"])


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    study = fake_workspace(tmp_path / "ws", repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    run_campaign(study, out, FakeLauncher())
    summarize_campaign(out)
    return out


def isocost(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def refused_by_every_reader(out: Path, expected: str) -> None:
    for command in READERS:
        result = isocost(*command, str(out))
        assert result.exit_code == 2, (command, result.output)
        assert result.output.startswith(f"Error: the campaign directory is not consistent: {expected}"), (
            command, result.output)
        assert "Traceback" not in result.output


def test_a_consistent_campaign_is_read_by_every_reader(campaign):
    assert check_evidence(campaign).ok, check_evidence(campaign).headline()
    for command in READERS:
        result = isocost(*command, str(campaign))
        # decide: no rental recorded, so the memo answers no (exit 3)
        assert result.exit_code == (3 if command[0] == "decide" else 0), (command, result.output)
        assert not result.output.startswith(INCONSISTENT_BANNER)


def test_edited_labels_in_the_corpus_index_are_refused(campaign):
    index = campaign / "corpus_index.csv"
    index.write_text(index.read_text().replace(",x,", ",Q,", 1))
    refused_by_every_reader(campaign, "corpus_index.csv: sha256: the file hashes to sha256:")
    fields = [d.field for d in check_evidence(campaign).discrepancies if d.file == "corpus_index.csv"]
    assert any(f.endswith("column label") for f in fields), fields  # recomputed against the frozen corpus


def test_a_forged_duplicate_row_is_refused(campaign):
    raw = campaign / "raw.csv"
    lines = raw.read_text().splitlines(keepends=True)
    forged = lines[1].replace("001-r1-batch_size-1", "003-r1-batch_size-1", 1)
    raw.write_text("".join(lines) + forged)
    refused_by_every_reader(campaign, "raw.csv: chain: raw.csv row 3 (003-r1-batch_size-1) does not match its "
                                      "chain digest")


def test_an_edited_minimum_in_the_frozen_study_is_refused(campaign):
    study = campaign / "study.toml"
    study.write_text(study.read_text().replace("minimum = 0.0", "minimum = 0.9"))
    refused_by_every_reader(campaign, "study.toml: sha256: the file hashes to sha256:")


def test_a_deleted_raw_table_is_refused_and_the_summary_kept(campaign):
    before = (campaign / "summary.md").read_bytes()
    (campaign / "raw.csv").unlink()
    refused_by_every_reader(campaign, "raw.csv: presence: missing")
    result = isocost("summarize", str(campaign), "--allow-inconsistent")
    assert result.exit_code == 2
    assert "the existing summary.json was computed from 2 raw row(s), raw.csv now gives 0" in result.output
    assert (campaign / "summary.md").read_bytes() == before


@pytest.mark.parametrize("line", [0, 3])
def test_a_back_dated_event_is_refused(campaign, line):
    path = campaign / "events.jsonl"
    events = [json.loads(text) for text in path.read_text().splitlines()]
    events[line]["at"] = "1970-01-02T00:00:00.000+00:00"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    refused_by_every_reader(campaign, f"events.jsonl: line {line + 1}: ")


def test_allow_inconsistent_says_so_on_the_first_line(campaign):
    study = campaign / "study.toml"
    study.write_text(study.read_text().replace("minimum = 0.0", "minimum = 0.9"))
    for command in ([*c, "--allow-inconsistent"] for c in (*READERS, ["summarize", "--json"],
                                                                 ["decide", "--json"])):
        result = isocost(*command, str(campaign))
        # decide: no rental recorded, so the memo answers no (exit 3), after the banner
        assert result.exit_code == (3 if command[0] == "decide" else 0), (command, result.output)
        first = result.stdout.splitlines()[0]
        assert first.startswith(INCONSISTENT_BANNER), (command, first)
        assert "study.toml: sha256" in first
    assert (campaign / "summary.md").read_text().startswith(INCONSISTENT_BANNER)
    assert json.loads((campaign / "summary.json").read_text())["inconsistent"].startswith(INCONSISTENT_BANNER)


def test_a_trial_directory_without_its_row_is_named(campaign):
    (campaign / "trials" / "009-r1-batch_size-1").mkdir()
    refused_by_every_reader(campaign, "trials/009-r1-batch_size-1/: raw row: this trial directory has no row")
