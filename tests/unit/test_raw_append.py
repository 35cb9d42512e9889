from __future__ import annotations

import errno
import os

import pytest

from protocol.errors import UserError
from protocol.records import RawRow
from runner.campaign import append_row, read_raw


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
