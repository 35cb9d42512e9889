"""summary.json and verdicts.json are typed records: read back through the codec, written again byte for byte,
edits refused by key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import UserError
from protocol.io.jsonio import dumps
from protocol.records.codec import read_record, to_dict
from protocol.records.stages import VerdictsRecord
from protocol.records.summary import SummaryRecord, VariantSummary

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"
RECORDS = {"summary.json": SummaryRecord, "verdicts.json": VerdictsRecord}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_the_golden_file_reads_as_a_record_and_writes_the_same_bytes(name: str) -> None:
    assert dumps(to_dict(read_record(GOLDEN / name, RECORDS[name]))) == (GOLDEN / name).read_text(encoding="utf-8")


def test_the_golden_records_hold_what_their_readers_take() -> None:
    summary = read_record(GOLDEN / "summary.json", SummaryRecord)
    assert isinstance(summary.variants[0], VariantSummary) and summary.inconsistent is None
    assert summary.rows_total == sum(variant.attempts for variant in summary.variants)
    verdicts = read_record(GOLDEN / "verdicts.json", VerdictsRecord)
    assert verdicts.rows_total == len(verdicts.verdicts) and verdicts.inconsistent is None
    assert verdicts.accepted_trials == {v["trial_id"] for v in verdicts.verdicts if v["corpus_accepted"]}


EDITS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    *((name, edit, key) for name in sorted(RECORDS) for edit, key in (
        (lambda d: d.update(rows_total="15"), "rows_total"),
        (lambda d: d.update(shortcut=True), "shortcut"),
        (lambda d: d.pop("campaign_id"), "campaign_id"),
        (lambda d: d.update(schema_version=9), "schema_version"))),
    ("summary.json", lambda d: d["variants"][0].update(median_pass_s="fast"), "variants[0].median_pass_s"),
    ("verdicts.json", lambda d: d.update(verdicts={}), "verdicts"),
    ("verdicts.json", lambda d: d["verdicts"][0].update(corpus_accepted="yes"), "verdicts[0].corpus_accepted"),
    ("verdicts.json", lambda d: d["verdicts"][1].pop("trial_id"), "verdicts[1].trial_id"),
]


@pytest.mark.parametrize(("name", "edit", "key"), EDITS)
def test_an_edited_file_is_refused_naming_the_key(tmp_path: Path, name: str, edit, key: str) -> None:
    data = json.loads((GOLDEN / name).read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_record(path, RECORDS[name])
    assert key in caught.value.what and caught.value.where == str(path)
