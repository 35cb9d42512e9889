from __future__ import annotations

import errno
import os

import pytest

from protocol.errors import UserError
from protocol.records import RawRow
from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.rawtable import append_row


def test_rows_are_appended_with_one_header(tmp_path):
    path = tmp_path / "raw.csv"
    append_row(path, RawRow(values={"trial_id": "a", "notes": "x, with comma"}))
    append_row(path, RawRow(values={"trial_id": "b", "notes": ""}))
    rows = read_raw(path)
    assert [r["trial_id"] for r in rows] == ["a", "b"]
    assert rows[0]["notes"] == "x, with comma"


def test_a_failed_append_leaves_no_partial_row(tmp_path, monkeypatch):
    path = tmp_path / "raw.csv"
    append_row(path, RawRow(values={"trial_id": "a"}))
    before = path.read_bytes()
    real_write = os.write
    calls = {"n": 0}

    def write_then_fail(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, data[:10])  # a partial write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", write_then_fail)
    with pytest.raises(UserError, match="could not append the row of trial b.*No space left.*--resume"):
        append_row(path, RawRow(values={"trial_id": "b"}))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [r["trial_id"] for r in read_raw(path)] == ["a"]


# -- the chain (issue 11) -------------------------------------------------------------------------


def _table(tmp_path, n=3):
    path = tmp_path / "raw.csv"
    for i in range(n):
        append_row(path, RawRow(values={"trial_id": f"t{i}", "notes": f"line one\nline two of {i}"}))
    return path


def test_every_row_carries_a_chain_digest_in_the_last_column(tmp_path):
    from protocol.records import RAW_COLUMNS
    from runner.campaign_dir.rawtable import genesis, row_digest

    path = _table(tmp_path)
    rows = read_raw(path)
    assert RAW_COLUMNS[-1] == "chain_sha256"
    previous = genesis(path)
    for row in rows:
        cells = [row[c] for c in RAW_COLUMNS]
        assert row["chain_sha256"] == row_digest(previous, cells[:-1])
        previous = row["chain_sha256"]


def test_every_cut_inside_the_last_row_is_a_partial_row_and_quarantined_byte_for_byte(tmp_path):
    from runner.campaign_dir.rawtable import quarantine_partial, scan

    path = _table(tmp_path)
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\nt2,") + 1
    for at in range(start + 1, len(data)):  # every byte of the last row, its quoted newline included
        path.write_bytes(data[:at])
        table = scan(path)
        assert (table.partial, table.partial_row, table.intact_bytes) == (data[start:at], 3, start), at
        with pytest.raises(UserError, match=r"ends in a partial row \(row 3"):
            read_raw(path)
    side = quarantine_partial(path)
    assert side is not None and side.name == "raw.csv.partial-1"
    assert side.read_bytes() == data[start:len(data) - 1]
    assert path.read_bytes() == data[:start]
    assert [r["trial_id"] for r in read_raw(path)] == ["t0", "t1"]


def test_a_quarantine_interrupted_before_the_truncation_is_not_kept_twice(tmp_path):
    from runner.campaign_dir.rawtable import quarantine_partial

    path = _table(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    cut = data[data.rstrip(b"\n").rfind(b"\nt2,") + 1:-10]
    (tmp_path / "raw.csv.partial-1").write_bytes(cut)  # written, then the host died before truncating
    assert quarantine_partial(path) == tmp_path / "raw.csv.partial-1"
    assert not (tmp_path / "raw.csv.partial-2").exists()
    assert [r["trial_id"] for r in read_raw(path)] == ["t0", "t1"]


@pytest.mark.parametrize("edit", ["cell", "swap", "duplicate", "drop middle"])
def test_an_edited_table_is_refused_naming_the_row(tmp_path, edit):
    path = _table(tmp_path)
    header, *rows = path.read_bytes().split(b"\nt")
    rows = [b"t" + r for r in rows]
    if edit == "cell":
        rows[1] = rows[1].replace(b"line two of 1", b"line two of 9")
    elif edit == "swap":
        rows[0], rows[1] = rows[1], rows[0]
    elif edit == "duplicate":
        rows.insert(1, rows[0])
    else:
        del rows[1]
    path.write_bytes(b"\n".join([header, *rows]))
    with pytest.raises(UserError, match=r"raw.csv row [12] \(t\d\) does not match its chain digest"):
        read_raw(path)
    with pytest.raises(UserError, match="does not match its chain digest"):
        append_row(path, RawRow(values={"trial_id": "t9"}))


def test_a_table_from_before_the_chain_is_refused_with_a_clear_message(tmp_path):
    from protocol.records import RAW_COLUMNS

    path = tmp_path / "raw.csv"
    path.write_text(",".join(RAW_COLUMNS[:-1]) + "\n" + "a" + "," * (len(RAW_COLUMNS) - 2) + "\n")
    with pytest.raises(UserError, match="no chain_sha256 column: it was written before raw rows were chained"):
        read_raw(path)
