"""verdicts.json is a typed record: read back through the codec, written again byte for byte, edits refused by key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.codec import read_record, to_dict
from protocol.errors import UserError
from protocol.jsonio import dumps
from protocol.records import VerdictsRecord

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign" / "verdicts.json"


def test_the_golden_verdicts_read_as_a_record_and_write_the_same_bytes() -> None:
    record = read_record(GOLDEN, VerdictsRecord)
    assert record.rows_total == len(record.verdicts) and record.inconsistent is None
    assert record.accepted_trials == {v["trial_id"] for v in record.verdicts if v["corpus_accepted"]}
    assert dumps(to_dict(record)) == GOLDEN.read_text(encoding="utf-8")


@pytest.mark.parametrize(("edit", "key"), [
    (lambda d: d.update(rows_total="15"), "rows_total"),
    (lambda d: d.update(shortcut=True), "shortcut"),
    (lambda d: d.update(verdicts={}), "verdicts"),
    (lambda d: d["verdicts"][0].update(corpus_accepted="yes"), "verdicts[0].corpus_accepted"),
    (lambda d: d["verdicts"][1].pop("trial_id"), "verdicts[1].trial_id"),
    (lambda d: d.pop("campaign_id"), "campaign_id"),
    (lambda d: d.update(schema_version=9), "schema_version"),
])
def test_an_edited_verdicts_file_is_refused_naming_the_key(tmp_path: Path, edit, key: str) -> None:
    data = json.loads(GOLDEN.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_record(path, VerdictsRecord)
    assert key in caught.value.what and caught.value.where == str(path)
