"""raw.csv's formats: the current one (5), 4, format 3 with and without the Slurm block, and the refused 1 and 2.

Format 3 gained the Slurm block (queue_s, node, job_id, allocated_gpu) without a bump; format 4 names it. A
format-3 table without the block is read, its four cells empty, and nothing is appended to it; formats 1 and 2
are refused with what to do. Format 5 has format 4's columns; its digests cover each row's text as written
(format 4's, its cells as a JSON list), and the format a table's rows chain by is the one its campaign.json
declares (none beside it: the current one).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from protocol.errors import UserError
from protocol.raw_columns import RAW_COLUMNS, RAW_SCHEMA_VERSION
from protocol.rawrecord import RawRecord
from runner.campaign_dir.raw_frame import read_frame
from runner.campaign_dir.rawformat import SLURM_COLUMNS, genesis, row_digest
from runner.campaign_dir.rawtable import append_row, check_chain, read_records

FORMAT_3 = tuple(c for c in RAW_COLUMNS if c not in SLURM_COLUMNS)


def write_table(path: Path, columns: tuple[str, ...], rows: list[dict[str, str]], previous: str = "",
                version: int | None = None) -> None:
    """A chained table with these columns, of plain cells, chained from ``previous`` ("": no campaign.json beside
    it) in raw format ``version`` (default: 3 for format 3's columns, else the current one)."""
    version = version or (3 if columns == FORMAT_3 else RAW_SCHEMA_VERSION)
    lines = [",".join(columns)]
    for row in rows:
        cells = [row.get(column, "") for column in columns[:-1]]
        previous = row_digest(previous, cells, version=version) if "chain_sha256" in columns else ""
        lines.append(",".join([*cells, previous] if "chain_sha256" in columns else [*cells, row.get(columns[-1], "")]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


ROWS = [{"trial_id": "001-r1-a", "variant_id": "a", "order_index": "1", "attempt": "1", "status": "ok",
         "pass_s": "1.5", "ids_match": "true", "notes": "n"},
        {"trial_id": "002-r1-b", "variant_id": "b", "order_index": "2", "attempt": "1", "status": "oom",
         "ids_match": "false", "empty_reasons": "pass_s: pass not completed (status oom)"}]


def test_the_slurm_block_is_last_before_the_chain_digest() -> None:
    assert RAW_COLUMNS[-5:-1] == SLURM_COLUMNS


def test_a_format_3_table_without_the_slurm_block_is_read_with_those_cells_empty(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_table(path, FORMAT_3, ROWS)
    rows = read_records(path)
    assert [row.trial_id for row in rows] == ["001-r1-a", "002-r1-b"]
    assert (rows[0].pass_s, rows[0].queue_s, rows[0].node, rows[0].job_id) == (1.5, None, "", "")
    frame = read_frame(path)
    assert list(frame.columns) == list(RAW_COLUMNS)
    assert frame["queue_s"].isna().all() and frame["node"].tolist() == ["", ""]
    assert frame["pass_s"].tolist()[0] == 1.5 and pd.isna(frame["pass_s"].tolist()[1])
    assert frame["ids_match"].tolist() == [True, False]


def test_nothing_is_appended_to_a_format_3_table_without_the_slurm_block(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_table(path, FORMAT_3, ROWS)
    before = path.read_bytes()
    with pytest.raises(UserError) as caught:
        append_row(path, RawRecord.from_values({"trial_id": "003-r2-a", "variant_id": "a", "status": "ok"}))
    assert "raw table format 3" in caught.value.what and "new --out" in caught.value.fix
    assert path.read_bytes() == before


def test_a_table_with_the_slurm_block_reads_and_takes_rows(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    write_table(path, RAW_COLUMNS, [{**ROWS[0], "queue_s": "2.0", "node": "n1"}])
    append_row(path, RawRecord.from_values({"trial_id": "002-r1-b", "variant_id": "b", "status": "ok"}))
    assert [(row.queue_s, row.node) for row in read_records(path)] == [(2.0, "n1"), (None, "")]


@pytest.mark.parametrize(("columns", "format_named"), [
    (tuple(c for c in RAW_COLUMNS if c != "chain_sha256"), "format 1"),
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
        assert "isocost version that started it" in caught.value.fix


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


def test_the_current_format_is_5() -> None:
    assert RAW_SCHEMA_VERSION == 5


def test_a_format_5_digest_is_the_sha256_of_the_previous_digest_and_the_row_text_as_written(tmp_path: Path) -> None:
    """What anyone can check with a shell: sha256(previous digest, a newline, the row up to its last comma)."""
    _declare(tmp_path, 5)
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
    _declare(tmp_path, 5)
    path = tmp_path / "raw.csv"
    for row in ROWS:
        append_row(path, RawRecord.from_values(row))
    data = path.read_bytes()
    assert data.count(b",n,") == 1
    path.write_bytes(data.replace(b",n,", b',"n",'))  # the csv module reads the same cells
    with pytest.raises(UserError, match=r"row 1 \(001-r1-a\) does not match its chain digest"):
        read_records(path)


@pytest.mark.parametrize("version", [4, None])
def test_a_format_4_campaign_is_read_and_appended_to_in_its_own_format(tmp_path: Path, version: int | None) -> None:
    """A campaign started by an isocost that wrote format 4 (or 3 with the Slurm block: no declared format) goes
    on in it: its rows chain by their cells as a JSON list, and so does the row a --resume appends."""
    _declare(tmp_path, version)
    path = tmp_path / "raw.csv"
    write_table(path, RAW_COLUMNS, ROWS, previous=genesis(path), version=4)
    append_row(path, RawRecord.from_values({"trial_id": "003-r2-a", "variant_id": "a", "status": "ok"}))
    rows = read_records(path)
    assert [row.trial_id for row in rows] == ["001-r1-a", "002-r1-b", "003-r2-a"]
    previous = rows[1].chain_sha256
    assert rows[2].chain_sha256 == row_digest(previous, rows[2].cells()[:-1], version=4)
    assert rows[2].chain_sha256 != row_digest(previous, rows[2].cells()[:-1])


def test_the_declared_format_is_anchored_a_changed_one_breaks_the_first_row(tmp_path: Path) -> None:
    _declare(tmp_path, 5)
    path = tmp_path / "raw.csv"
    for row in ROWS:
        append_row(path, RawRecord.from_values(row))
    _declare(tmp_path, 4)  # "read me as format 4"
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


@pytest.mark.parametrize("declared", [6, 99, 2, 0, "5", True])
def test_a_declared_raw_format_this_isocost_cannot_read_is_refused_not_read_as_another(
        tmp_path: Path, declared: object) -> None:
    """A campaign.json naming a raw format other than 3, 4 or 5 (a newer isocost's, or none that ever existed) is
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
