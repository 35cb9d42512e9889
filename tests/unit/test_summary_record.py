"""summary.json is a typed record: read back through the codec, written again byte for byte, edits refused by key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.codec import read_record, to_dict
from protocol.errors import UserError
from protocol.jsonio import dumps
from protocol.stats import SummaryRecord, VariantSummary

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign" / "summary.json"


def test_the_golden_summary_reads_as_a_record_and_writes_the_same_bytes() -> None:
    record = read_record(GOLDEN, SummaryRecord)
    assert isinstance(record.variants[0], VariantSummary)
    assert record.rows_total == sum(variant.attempts for variant in record.variants)
    assert dumps(to_dict(record)) == GOLDEN.read_text(encoding="utf-8")


@pytest.mark.parametrize(("edit", "key"), [
    (lambda d: d.update(rows_total="15"), "rows_total"),
    (lambda d: d.update(shortcut=True), "shortcut"),
    (lambda d: d["variants"][0].update(median_pass_s="fast"), "variants[0].median_pass_s"),
    (lambda d: d.pop("campaign_id"), "campaign_id"),
    (lambda d: d.update(schema_version=9), "schema_version"),
])
def test_an_edited_summary_is_refused_naming_the_key(tmp_path: Path, edit, key: str) -> None:
    data = json.loads(GOLDEN.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_record(path, SummaryRecord)
    assert key in caught.value.what and caught.value.where == str(path)
