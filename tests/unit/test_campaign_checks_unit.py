"""CampaignChecks, the consistency checks of a campaign directory, called directly (no CLI)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from fakecampaign import FakeLauncher, fake_workspace

from protocol.records.raw_columns import RAW_COLUMNS
from protocol.records.raw_record import RawRecord
from runner.analysis.summarize import summarize_campaign
from runner.campaign.run import run_campaign
from runner.campaign_dir.checks import CampaignChecks
from runner.campaign_dir.findings import Discrepancy
from runner.campaign_dir.layout import load_record, read_rows
from runner.campaign_dir.raw_frame import frame_of, read_frame
from runner.campaign_dir.slots import planned_slots, slot_of, unfinished_slots


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checks")
    out = root / "out"
    run_campaign(fake_workspace(root / "ws", repetitions=2), out, FakeLauncher())
    summarize_campaign(out)  # verdicts and summary: what a finished `isocost run` leaves
    return out


@pytest.fixture
def campaign(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "campaign"
    shutil.copytree(built, copy)
    return copy


def problems(root: Path, deep: bool = True, prefix: str = "") -> list[Discrepancy]:
    checks = CampaignChecks(root, prefix, deep=deep)
    checks.run()
    return checks.problems


def test_a_fresh_campaign_is_consistent_at_both_depths(campaign: Path) -> None:
    assert problems(campaign) == []
    assert problems(campaign, deep=False) == []


def test_the_schedule_is_a_deep_check_only(campaign: Path) -> None:
    (campaign / "schedule.csv").unlink()
    assert problems(campaign, deep=False) == []
    assert [str(p) for p in problems(campaign)] == ["schedule.csv: presence: missing"]


def test_an_edited_study_is_named_with_the_prefix(campaign: Path) -> None:
    with open(campaign / "study.toml", "a", encoding="utf-8") as handle:
        handle.write("\n# edited\n")
    first = problems(campaign, deep=False, prefix="campaign/")[0]
    assert (first.file, first.field) == ("campaign/study.toml", "sha256")
    assert "campaign.json field study_sha256 says" in first.message


def test_a_campaign_json_of_unknown_shape_is_one_discrepancy(campaign: Path) -> None:
    data = json.loads((campaign / "campaign.json").read_text(encoding="utf-8"))
    data["colour"] = "blue"
    (campaign / "campaign.json").write_text(json.dumps(data), encoding="utf-8")
    assert [(p.file, p.field) for p in problems(campaign)] == [("campaign.json", "content")]
    assert problems(campaign)[0].message == "unknown key 'colour'"


def test_a_row_whose_trial_directory_is_gone(campaign: Path) -> None:
    first = read_rows(campaign)[0]
    shutil.rmtree(campaign / "trials" / first.trial_id)
    found = [str(p) for p in problems(campaign, deep=False)]
    assert found == [f"trials/{first.trial_id}/: presence: raw.csv row 1 ({first.trial_id}) names this trial, "
                     "its directory is missing"]


def test_a_trial_status_that_disagrees_with_its_row(campaign: Path) -> None:
    first = read_rows(campaign)[0]
    status_path = campaign / "trials" / first.trial_id / "status.json"
    status = json.loads(status_path.read_text(encoding="utf-8"))
    status["completed"] = 999
    status_path.write_text(json.dumps(status), encoding="utf-8")
    # The evidence checks every reader runs compare the file with the sha256 its row sealed (issue 20).
    [sealed] = problems(campaign, deep=False)
    assert (sealed.file, sealed.field) == (f"trials/{first.trial_id}/status.json", "sha256")
    assert sealed.message.startswith("changed after the trial: it hashes to ")
    # The deep checks (bundle, verify) first say which field differs from the row, then that the seal broke.
    found = problems(campaign)
    assert [(f.file, f.field) for f in found] == [(f"trials/{first.trial_id}/status.json", "completed"),
                                                 (f"trials/{first.trial_id}/status.json", "sha256")]


def test_slots_of_the_record(built: Path) -> None:
    slots = planned_slots(load_record(built))
    by_id = {slot.trial_id: slot for slot in slots}
    assert len(slots) == load_record(built).slots_planned
    assert slot_of(slots[0].trial_id + "-a2", by_id) == (slots[0], 2)
    assert slot_of("nonsense", by_id) == (None, 0)
    rows = read_rows(built)
    assert unfinished_slots(rows, slots) == []
    assert unfinished_slots(rows[:-1], slots) == [slots[-1].trial_id]


def test_the_frame_holds_the_rows_attributes(built: Path) -> None:
    rows = read_rows(built)
    names = ("trial_id", "pass_s", "repetition", "corpus_accepted", "peak_rss_bytes", "notes")
    expected = {name: [getattr(row, name) for row in rows] for name in names}
    frame = read_frame(built / "raw.csv", names)
    assert {name: [None if pd.isna(v) else v for v in frame[name].tolist()] for name in names} == expected
    built_rows = [RawRecord.from_values(row.values) for row in rows]
    assert frame_of(built_rows, names).equals(frame)
    copied = [RawRecord.from_cells(row.cells()) for row in rows]
    assert copied == rows
    assert [row.cells() for row in copied] == [row.cells() for row in rows]
    assert len(rows[0].cells()) == len(RAW_COLUMNS)


def test_an_event_in_a_cut_last_line_is_unknown_to_every_check(campaign: Path) -> None:
    """The checks read events.jsonl through one reader: an event whose line was cut while it was written (no line
    end) is not read as an event by one check while another names the line cut."""
    last = read_rows(campaign)[-1]
    path = campaign / "events.jsonl"
    lines = path.read_bytes().split(b"\n")
    start = next(i for i, line in enumerate(lines)
                 if json.loads(line).get("event") == "trial_start" and json.loads(line)["trial_id"] == last.trial_id)
    path.write_bytes(b"\n".join(lines[: start + 1]))  # the last row's trial_start is the cut last line
    found = {(p.file, p.field): p.message for p in problems(campaign, deep=False)}
    assert found[("events.jsonl", f"line {start + 1}")].startswith("cut while it was written")
    rows = len(read_rows(campaign))
    assert found[("events.jsonl", "trial_start")] == f"no trial_start event for raw.csv row {rows} ({last.trial_id})"


def test_an_events_line_that_is_not_an_event_is_named_with_its_key(campaign: Path) -> None:
    path = campaign / "events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    from runner.campaign_dir.appendlog import line_digest
    entry = {"at": "2026-12-01T00:00:00+00:00", "evnt": "trial_start", "schema_version": 2}  # misspelt, chained
    entry["chain_sha256"] = line_digest(json.loads(lines[-1])["chain_sha256"], entry)
    path.write_text("\n".join([*lines, json.dumps(entry)]) + "\n", encoding="utf-8")
    found = [(p.file, p.field, p.message) for p in problems(campaign, deep=False)]
    assert ("events.jsonl", f"line {len(lines) + 1}", "unknown key 'evnt'") in found


@pytest.mark.parametrize(("edit", "key"), [
    (lambda d: d.update(colour="blue"), "colour"),
    (lambda d: d.update(rows_total="many"), "rows_total"),
    (lambda d: d.update(schema_version=2), "schema_version"),
])
def test_a_verdicts_json_of_unknown_shape_is_one_discrepancy(campaign: Path, edit, key: str) -> None:
    path = campaign / "verdicts.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    [found] = problems(campaign)
    assert (found.file, found.field) == ("verdicts.json", "content")
    assert found.message.startswith("not a verdicts record (") and key in found.message


def test_a_verdicts_json_of_another_campaign_is_named(campaign: Path) -> None:
    path = campaign / "verdicts.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["campaign_id"] = "another"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert [(p.file, p.field) for p in problems(campaign)] == [("verdicts.json", "campaign_id")]
