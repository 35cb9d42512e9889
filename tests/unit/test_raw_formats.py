"""raw.csv's formats: the current one (4), format 3 with and without the Slurm block, and the refused 1 and 2.

Format 3 gained the Slurm block (queue_s, node, job_id, allocated_gpu) without a bump; format 4 names it. A
format-3 table without the block is read, its four cells empty, and nothing is appended to it; formats 1 and 2
are refused with what to do.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from protocol.errors import UserError
from protocol.raw_columns import RAW_COLUMNS, RAW_SCHEMA_VERSION
from protocol.rawrecord import RawRecord
from runner.campaign_dir.raw_frame import read_frame
from runner.campaign_dir.rawtable import SLURM_COLUMNS, append_row, read_records, row_digest

FORMAT_3 = tuple(c for c in RAW_COLUMNS if c not in SLURM_COLUMNS)


def write_table(path: Path, columns: tuple[str, ...], rows: list[dict[str, str]]) -> None:
    """A chained table with these columns (no campaign.json beside it: the chain starts from "")."""
    previous = ""
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


def test_the_current_format_is_4() -> None:
    assert RAW_SCHEMA_VERSION == 4 and RAW_COLUMNS[-5:-1] == SLURM_COLUMNS


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


def test_a_format_3_table_with_the_slurm_block_reads_and_takes_rows(tmp_path: Path) -> None:
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
