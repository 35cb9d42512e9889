"""raw.csv's formats: the one isocost 1.x reads (5), and the refused others: the pre-release 1 to 4 (isocost 0.x) and
a newer isocost's, each refused with the format named and what to do, never read as another format.

Format 5's digests cover each row's text as written; the format a table's rows chain by is the one its
campaign.json declares (none beside it: the current one).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.records.raw_columns import RAW_COLUMNS, RAW_COLUMNS_1_0, RAW_COLUMNS_6, RAW_SCHEMA_VERSION
from protocol.records.raw_record import RawRecord
from runner.campaign_dir.raw_format import READABLE_FORMATS, genesis, row_digest
from runner.campaign_dir.raw_frame import read_frame
from runner.campaign_dir.raw_table import append_row, check_chain, read_records

SLURM_COLUMNS = ("queue_s", "node", "job_id", "allocated_gpu")
FORMAT_3 = tuple(c for c in RAW_COLUMNS_1_0 if c not in SLURM_COLUMNS)  # isocost 0.x's format 3, before the Slurm block


def write_table(path: Path, columns: tuple[str, ...], rows: list[dict[str, str]], previous: str = "") -> None:
    """A chained table with these columns, of plain cells, chained from ``previous`` ("": no campaign.json beside
    it) as format 5 chains rows."""
    lines = [",".join(columns)]
    for row in rows:
        cells = [row.get(column, "") for column in columns[:-1]]
        previous = row_digest(previous, cells) if "chain_sha256" in columns else ""
        lines.append(",".join([*cells, previous] if "chain_sha256" in columns else [*cells, row.get(columns[-1], "")]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


ROWS = [{"trial_id": "001-r1-a", "variant_id": "a", "order_index": "1", "attempt": "1", "status": "ok",
         "pass_s": "1.5", "ids_match": "true", "notes": "n"},
        {"trial_id": "002-r1-b", "variant_id": "b", "order_index": "2", "attempt": "1", "status": "oom",
         "ids_match": "false", "empty_reasons": "pass_s: pass not completed (status oom)"}]


def test_the_slurm_block_is_last_before_the_chain_digest_in_1_0_and_engine_then_rate_after_it_in_1_1() -> None:
    assert RAW_COLUMNS_1_0[-5:-1] == SLURM_COLUMNS
    assert RAW_COLUMNS_6 == (*RAW_COLUMNS_1_0[:-1], "engine", "chain_sha256")
    assert RAW_COLUMNS == (*RAW_COLUMNS_1_0[:-1], "engine", "rate_qps", "chain_sha256")


def test_a_table_without_the_slurm_block_is_refused_as_pre_release_format_3(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_table(path, FORMAT_3, ROWS)
    before = path.read_bytes()
    for attempt in (lambda: read_records(path), lambda: read_frame(path),
                    lambda: append_row(path, RawRecord.from_values({"trial_id": "003-r2-a", "status": "ok"}))):
        with pytest.raises(UserError) as caught:
            attempt()
        assert "raw table format 3" in caught.value.what and "isocost 0.x" in caught.value.fix
    assert path.read_bytes() == before


def test_a_table_with_the_slurm_block_reads_and_takes_rows(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_table(path, RAW_COLUMNS, [{**ROWS[0], "queue_s": "2.0", "node": "n1"}])
    append_row(path, RawRecord.from_values({"trial_id": "002-r1-b", "variant_id": "b", "status": "ok"}))
    assert [(row.queue_s, row.node) for row in read_records(path)] == [(2.0, "n1"), (None, "")]


@pytest.mark.parametrize(("columns", "format_named"), [
    (tuple(c for c in RAW_COLUMNS_1_0 if c != "chain_sha256"), "format 1"),
    (tuple(c for c in FORMAT_3 if not c.endswith("_sha256") or c == "chain_sha256"), "format 2"),
])
def test_formats_1_and_2_are_refused_with_what_to_do(tmp_path: Path, columns: tuple[str, ...],
                                                     format_named: str) -> None:
    path = tmp_path / "raw.csv"
    write_table(path, columns, ROWS)
    for read in (read_records, read_frame):
        with pytest.raises(UserError) as caught:
            read(path)
        assert format_named in caught.value.what
        assert "isocost 0.x" in caught.value.fix and "start a new campaign" in caught.value.fix


def test_a_malformed_cell_is_named_by_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_table(path, RAW_COLUMNS, [ROWS[0], {**ROWS[1], "order_index": "two"}])
    for read in (read_records, read_frame):
        with pytest.raises(UserError) as caught:
            read(path)
        assert "row 2" in caught.value.what and "order_index" in caught.value.what and "'two'" in caught.value.what


# -- format 5: each row's digest covers its bytes as written -------------------------------------------------------


def _declare(directory: Path, version: int | None) -> None:
    """A campaign.json beside the table declaring its raw format (its anchor is what the first row chains to)."""
    description = {"campaign_id": "c-formats"} if version is None else {"campaign_id": "c-formats",
                                                                          "raw_schema_version": version}
    (directory / "campaign.json").write_text(json.dumps(description), encoding="utf-8")


def test_the_current_format_is_7_and_formats_5_and_6_are_still_read() -> None:
    assert RAW_SCHEMA_VERSION == 7 and READABLE_FORMATS == (5, 6, 7)


def test_a_format_5_digest_is_the_sha256_of_the_previous_digest_and_the_row_text_as_written(tmp_path: Path) -> None:
    """What anyone can check with a shell: sha256(previous digest, a newline, the row up to its last comma)."""
    _declare(tmp_path, RAW_SCHEMA_VERSION)
    path = tmp_path / "raw.csv"
    for row in ({**ROWS[0], "notes": 'a comma, and a "quote"'}, ROWS[1]):
        append_row(path, RawRecord.from_values(row))
    previous = genesis(path)
    lines = path.read_bytes().split(b"\n")
    assert b',"a comma, and a ""quote""",' in lines[1] and lines[-1] == b""  # hashed as written: quoted
    for line in lines[1:-1]:
        body, _, digest = line.rpartition(b",")
        previous = hashlib.sha256(previous.encode() + b"\n" + body).hexdigest()
        assert digest.decode() == previous
    assert check_chain(path).last_digest == previous


def test_a_format_5_row_re_quoted_with_the_same_cells_breaks_the_chain(tmp_path: Path) -> None:
    _declare(tmp_path, RAW_SCHEMA_VERSION)
    path = tmp_path / "raw.csv"
    for row in ROWS:
        append_row(path, RawRecord.from_values(row))
    data = path.read_bytes()
    assert data.count(b",n,") == 1
    path.write_bytes(data.replace(b",n,", b',"n",'))  # the csv module reads the same cells
    with pytest.raises(UserError, match=r"row 1 \(001-r1-a\) does not match its chain digest"):
        read_records(path)


@pytest.mark.parametrize("version", [3, 4, None])
def test_a_pre_release_campaign_is_refused_naming_its_format_and_the_fix(tmp_path: Path, version: int | None) -> None:
    """A campaign started by isocost 0.x in raw format 3 or 4 (or 3 that declared none) is refused by every reader
    and by the writer, naming the format and what to do: never chained as format 5 (its rows would look edited)."""
    _declare(tmp_path, version)
    path = tmp_path / "raw.csv"
    write_table(path, RAW_COLUMNS, ROWS, previous="")
    before = path.read_bytes()
    for attempt in (lambda: read_records(path), lambda: read_frame(path), lambda: check_chain(path),
                    lambda: append_row(path, RawRecord.from_values({"trial_id": "003-r2-a", "status": "ok"}))):
        with pytest.raises(UserError) as caught:
            attempt()
        named = "no raw table format (pre-release format 3)" if version is None else f"raw table format {version}"
        assert named in caught.value.what and "pre-release" in caught.value.what
        assert "does not match" not in caught.value.what
        assert "Re-run with isocost 0.x" in caught.value.fix and "start a new campaign" in caught.value.fix
    assert path.read_bytes() == before


def test_the_frozen_facts_are_anchored_a_changed_one_breaks_the_first_row(tmp_path: Path) -> None:
    _declare(tmp_path, RAW_SCHEMA_VERSION)
    path = tmp_path / "raw.csv"
    for row in ROWS:
        append_row(path, RawRecord.from_values(row))
    changed = {"campaign_id": "c-formats", "raw_schema_version": RAW_SCHEMA_VERSION, "study_sha256": "changed"}
    (tmp_path / "campaign.json").write_text(json.dumps(changed), encoding="utf-8")
    with pytest.raises(UserError, match=r"row 1 \(001-r1-a\) does not match its chain digest"):
        read_records(path)


def test_a_format_5_table_with_control_characters_in_cells_reads_the_same_by_row_and_by_frame(tmp_path: Path) -> None:
    """Read whole (no quote, carriage return or NUL in it), its frame has the cells the csv module reads."""
    path = tmp_path / "raw.csv"
    notes = ["tab\there", "unit\x1fsep", "vt\x0bff\x0c", "back\\slash é", "line\u2028sep"]
    for i, note in enumerate(notes):
        append_row(path, RawRecord.from_values({"trial_id": f"t{i}", "notes": note}))
    assert isinstance(check_chain(path).records[0], str)  # read as a plain table
    assert [row.notes for row in read_records(path)] == notes
    assert read_frame(path, ("trial_id", "notes"))["notes"].tolist() == notes


@pytest.mark.parametrize("declared", [8, 99, 0, "5", True])
def test_a_declared_raw_format_this_isocost_cannot_read_is_refused_not_read_as_another(
        tmp_path: Path, declared: object) -> None:
    """A campaign.json naming a raw format other than 5 (a newer isocost's, or none that ever existed) is
    refused by every reader and writer, never chained as another format, which would call its rows edited."""
    path = tmp_path / "raw.csv"
    for row in ROWS:
        append_row(path, RawRecord.from_values(row))
    description = json.loads((tmp_path / "campaign.json").read_text()) if (tmp_path / "campaign.json").exists() \
        else {"campaign_id": "c-formats"}
    (tmp_path / "campaign.json").write_text(json.dumps({**description, "raw_schema_version": declared}),
                                            encoding="utf-8")
    before = path.read_bytes()
    for attempt in (lambda: read_records(path), lambda: read_frame(path), lambda: check_chain(path),
                    lambda: append_row(path, RawRecord.from_values({"trial_id": "003-r2-a"}))):
        with pytest.raises(UserError) as caught:
            attempt()
        assert f"raw table format {declared!r}" in caught.value.what
        assert "does not match" not in caught.value.what  # not called an edited row
        assert "isocost version that started it" in caught.value.fix
    assert path.read_bytes() == before


# -- format 5 (isocost 1.0) read by 1.1: every row ran the default engine; nothing is appended to it ------------


def test_a_1_0_table_reads_with_the_default_engine_and_is_never_appended_to(tmp_path: Path) -> None:
    _declare(tmp_path, 5)
    path = tmp_path / "raw.csv"
    write_table(path, RAW_COLUMNS_1_0, ROWS, genesis(path))
    before = path.read_bytes()
    rows = read_records(path)
    assert [row.engine for row in rows] == ["transformers", "transformers"]
    assert [row.rate_qps for row in rows] == [None, None]
    assert [row.trial_id for row in rows] == ["001-r1-a", "002-r1-b"]
    assert rows[0].cells() == before.decode().splitlines()[1].split(",")  # the cells as written, format 5's
    assert read_frame(path, ("trial_id", "engine"))["engine"].tolist() == ["transformers", "transformers"]
    with pytest.raises(UserError) as caught:
        append_row(path, RawRecord.from_values({"trial_id": "003-r2-a"}))
    assert "format 5" in caught.value.what and "isocost 1.0" in caught.value.fix
    assert path.read_bytes() == before


def test_a_1_0_header_under_a_1_1_campaign_json_is_refused_not_read(tmp_path: Path) -> None:
    _declare(tmp_path, 6)
    path = tmp_path / "raw.csv"
    write_table(path, RAW_COLUMNS_1_0, ROWS, genesis(path))
    with pytest.raises(UserError) as caught:
        read_records(path)
    assert "not that of raw table format 6" in caught.value.what


# -- format 6 (isocost 1.1 with engines, before rate_qps) read: every row's rate is empty; nothing is appended ----


def test_a_format_6_table_reads_with_an_empty_rate_and_is_never_appended_to(tmp_path: Path) -> None:
    _declare(tmp_path, 6)
    path = tmp_path / "raw.csv"
    rows = [{**row, "engine": "onnxruntime"} for row in ROWS]
    write_table(path, RAW_COLUMNS_6, rows, genesis(path))
    before = path.read_bytes()
    read = read_records(path)
    assert [(row.engine, row.rate_qps) for row in read] == [("onnxruntime", None)] * 2
    assert read[0].cells() == before.decode().splitlines()[1].split(",")  # the cells as written, format 6's
    frame = read_frame(path, ("trial_id", "engine", "rate_qps"))
    assert frame["engine"].tolist() == ["onnxruntime"] * 2 and frame["rate_qps"].isna().all()
    with pytest.raises(UserError) as caught:
        append_row(path, RawRecord.from_values({"trial_id": "003-r2-a"}))
    assert "format 6" in caught.value.what and "before the rate_qps column" in caught.value.fix
    assert path.read_bytes() == before


def test_a_format_7_row_keeps_its_rate(tmp_path: Path) -> None:
    _declare(tmp_path, RAW_SCHEMA_VERSION)
    path = tmp_path / "raw.csv"
    append_row(path, RawRecord.from_values({**ROWS[0], "rate_qps": 2.5}))
    assert read_records(path)[0].rate_qps == 2.5 and read_records(path)[0].cell("rate_qps") == "2.5"
    assert read_frame(path, ("trial_id", "rate_qps"))["rate_qps"].tolist() == [2.5]
