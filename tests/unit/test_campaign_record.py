"""campaign.json and raw.csv as typed records: round trips on files a real (fake-trial) campaign wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakecampaign import FakeLauncher, fake_workspace

from protocol.errors import UserError
from protocol.io.jsonio import dumps, read_json
from protocol.records import codec
from protocol.records.raw_columns import RAW_COLUMNS
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignRecord, InputFacts, Rental, Variant
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import load_record, read_raw, read_rows


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("record")
    study = fake_workspace(root / "ws", repetitions=2)
    out = root / "out"
    run_campaign(study, out, FakeLauncher(), rental=Rental(gpu="rtx-4090", lots=2))
    return out


def test_campaign_json_round_trips_exactly(campaign: Path) -> None:
    data = read_json(campaign / "campaign.json")
    record = load_record(campaign)
    assert codec.to_dict(record) == data
    assert dumps(codec.to_dict(record)) == (campaign / "campaign.json").read_text(encoding="utf-8")
    assert codec.from_dict(CampaignRecord, codec.to_dict(record)) == record


def test_campaign_record_is_typed(campaign: Path) -> None:
    record = load_record(campaign)
    data = json.loads((campaign / "campaign.json").read_text(encoding="utf-8"))
    assert record.campaign_id == data["campaign_id"] and len(record.campaign_id) == 32
    assert record.rental == Rental(gpu="rtx-4090", lots=2)
    assert isinstance(record.corpus, InputFacts) and record.corpus.inputs == data["corpus"]["inputs"]
    assert record.corpus_inputs == data["corpus"]["inputs"]
    assert record.tuning is not None and record.tuning.index_sha256 is None
    assert "index_sha256" not in codec.to_dict(record.tuning)
    assert all(isinstance(v, Variant) for v in record.variants)
    assert record.slots_planned == len(data["variants"]) * data["repetitions"]
    assert record.launcher_kind == "process"
    assert record.warmup is not None and record.warmup.inputs == data["warmup"]["inputs"]
    assert record.variant(record.variants[-1].variant_id) is record.variants[-1]
    with pytest.raises(AttributeError):
        record.campaign_id = "x"  # type: ignore[misc]


def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "campaign.json").write_text(json.dumps({"schema_version": 99, "campaign_id": "c"}), encoding="utf-8")
    with pytest.raises(UserError) as typed:
        load_record(tmp_path)
    assert typed.value.what == "campaign.json has schema_version 99; this isocost reads 1 or 2 or 3"
    assert typed.value.where == str(tmp_path / "campaign.json")
    assert "Use the isocost version that wrote it" in str(typed.value)
    with pytest.raises(UserError, match="schema_version 99"):
        codec.from_dict(CampaignRecord, {"schema_version": 99})


def test_no_campaign_json_is_not_a_campaign(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a campaign directory"):
        load_record(tmp_path)


def test_unknown_or_malformed_fields_are_refused() -> None:
    with pytest.raises(UserError, match=r"unknown key 'colour'"):
        codec.from_dict(CampaignRecord, {"schema_version": 1, "colour": "blue"})
    with pytest.raises(UserError, match="key 'repetitions' must be an integer, got 'five'"):
        codec.from_dict(CampaignRecord, {"schema_version": 1, "repetitions": "five"})
    with pytest.raises(UserError, match="key 'corpus.fingerprint' is missing"):
        codec.from_dict(CampaignRecord, {"schema_version": 1, "corpus": {"path": "c"}})


def test_a_sparse_campaign_json_reads_with_defaults() -> None:
    record = codec.from_dict(CampaignRecord, {"schema_version": 1, "campaign_id": "c"})
    assert (record.campaign_id, record.rental, record.variants, record.corpus_inputs) == ("c", None, (), 0)


# -- raw rows ----------------------------------------------------------------------------------------


def test_raw_rows_round_trip_byte_exactly(campaign: Path) -> None:
    rows = read_rows(campaign)
    assert rows == read_rows(campaign / "raw.csv")
    plain = read_raw(campaign / "raw.csv")
    assert len(rows) == len(plain) == 4
    for row, cells in zip(rows, plain, strict=True):
        assert row.cells() == list(cells.values())
        # Typed values written again give the same cells: floats by repr, empty = None, true/false.
        again = RawRecord.from_values({name: getattr(row, name) for name in RAW_COLUMNS})
        assert again.cells() == list(cells.values())
        assert again == row


def test_raw_rows_are_typed(campaign: Path) -> None:
    row = read_rows(campaign)[0]
    assert row.status == "ok" and isinstance(row.trial_id, str)
    assert isinstance(row.pass_s, float) and row.pass_s > 0
    assert isinstance(row.repetition, int) and isinstance(row.batch_size, int)
    assert row.corpus_accepted is True and row.ids_match is True and row.deterministic in (True, False)
    assert row.chain_sha256 == read_raw(campaign / "raw.csv")[0]["chain_sha256"]


def test_empty_cells_are_none_and_text_stays_text() -> None:
    cells = [""] * len(RAW_COLUMNS)
    cells[RAW_COLUMNS.index("trial_id")] = "t1"
    cells[RAW_COLUMNS.index("empty_reasons")] = "pass_s: pass not completed (status oom); peak_rss_bytes: gone"
    row = RawRecord.from_cells(cells)
    assert row.pass_s is None and row.peak_rss_bytes is None and row.corpus_accepted is None
    assert row.notes == "" and row.image_id == ""
    assert row.empty_reason("pass_s") == "pass not completed (status oom)"
    assert row.empty_reason("peak_rss_bytes") == "gone"
    assert row.empty_reason("metric_value") == ""
    assert row.cells() == cells


def test_a_float_written_by_repr_comes_back_exactly() -> None:
    value = 0.1 + 0.2  # 0.30000000000000004
    row = RawRecord.from_values({"trial_id": "t", "pass_s": value, "peak_rss_bytes": 0, "ids_match": False})
    cells = row.cells()
    assert cells[RAW_COLUMNS.index("pass_s")] == "0.30000000000000004"
    assert cells[RAW_COLUMNS.index("peak_rss_bytes")] == "0"  # a measured zero stays a zero
    assert cells[RAW_COLUMNS.index("ids_match")] == "false"
    back = RawRecord.from_cells(cells)
    assert back.pass_s == value and back.peak_rss_bytes == 0 and back.ids_match is False
    assert back.cells() == cells


def test_a_malformed_typed_cell_names_its_column() -> None:
    cells = [""] * len(RAW_COLUMNS)
    cells[0] = "t1"
    cells[RAW_COLUMNS.index("repetition")] = "two"
    with pytest.raises(ValueError, match="column repetition of trial t1: 'two' is not an integer"):
        RawRecord.from_cells(cells)  # every cell converts when the row is read (no lazy column)
    with pytest.raises(ValueError, match="a raw row has"):
        RawRecord.from_cells(cells[:-1])
    with pytest.raises(ValueError, match="unknown raw columns"):
        RawRecord.from_values({"colour": "blue"})
