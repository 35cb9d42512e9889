from __future__ import annotations

import errno
import os

import pytest

from protocol.errors import UserError
from protocol.records.raw_record import RawRecord
from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.raw_table import append_row


def test_rows_are_appended_with_one_header(tmp_path):
    path = tmp_path / "raw.csv"
    append_row(path, RawRecord.from_values({"trial_id": "a", "notes": "x, with comma"}))
    append_row(path, RawRecord.from_values({"trial_id": "b", "notes": ""}))
    rows = read_raw(path)
    assert [r["trial_id"] for r in rows] == ["a", "b"]
    assert rows[0]["notes"] == "x, with comma"


def test_a_failed_append_leaves_no_partial_row(tmp_path, monkeypatch):
    path = tmp_path / "raw.csv"
    append_row(path, RawRecord.from_values({"trial_id": "a"}))
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
        append_row(path, RawRecord.from_values({"trial_id": "b"}))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [r["trial_id"] for r in read_raw(path)] == ["a"]


# -- the chain (issue 11) -------------------------------------------------------------------------


def _table(tmp_path, n=3):
    path = tmp_path / "raw.csv"
    for i in range(n):
        append_row(path, RawRecord.from_values({"trial_id": f"t{i}", "notes": f"line one\nline two of {i}"}))
    return path


def test_every_row_carries_a_chain_digest_in_the_last_column(tmp_path):
    from protocol.records.raw_columns import RAW_COLUMNS
    from runner.campaign_dir.raw_format import genesis, row_digest

    path = _table(tmp_path)
    rows = read_raw(path)
    assert RAW_COLUMNS[-1] == "chain_sha256"
    previous = genesis(path)
    for row in rows:
        cells = [row[c] for c in RAW_COLUMNS]
        assert row["chain_sha256"] == row_digest(previous, cells[:-1])
        previous = row["chain_sha256"]


def test_every_cut_inside_the_last_row_is_a_partial_row_and_quarantined_byte_for_byte(tmp_path):
    from runner.campaign_dir.raw_table import quarantine_partial, scan

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
    from runner.campaign_dir.raw_table import quarantine_partial

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
        append_row(path, RawRecord.from_values({"trial_id": "t9"}))


def test_a_table_from_before_the_chain_is_refused_with_a_clear_message(tmp_path):
    from protocol.records.raw_columns import RAW_COLUMNS

    path = tmp_path / "raw.csv"
    path.write_text(",".join(RAW_COLUMNS[:-1]) + "\n" + "a" + "," * (len(RAW_COLUMNS) - 2) + "\n")
    with pytest.raises(UserError, match="no chain_sha256 column: it was written before raw rows were chained"):
        read_raw(path)


# -- the fast reading paths give what the csv and json modules give -------------------------------


def _records_by_csv_module(data: bytes):
    """The reference: every record read by the csv module alone (how raw.csv was read before the fast path)."""
    import csv

    lines = data.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    reader = csv.reader((line.decode("utf-8", errors="replace") for line in lines), strict=True)
    consumed = 0
    while consumed < len(lines):
        start = offsets[consumed]
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error:
            cells = None
        consumed = max(reader.line_num, consumed + 1)
        yield start, offsets[consumed], cells
        if cells is None:
            return


def test_fast_record_reading_matches_the_csv_module():
    import csv
    import io
    import random

    from runner.campaign_dir.raw_table import _records

    rng = random.Random(7)
    alphabet = ["a", "b", ",", '"', "\n", "\r", "\\", "é", "\x00", " ", "1", ".", "\t", "\u2028"]
    for _ in range(400):
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator=rng.choice(["\n", "\n", "\r\n"]))
        for _ in range(rng.randrange(0, 6)):
            writer.writerow(["".join(rng.choices(alphabet, k=rng.randrange(0, 4))) for _ in range(rng.randrange(1, 5))])
        data = buffer.getvalue().encode("utf-8")
        for cut in {len(data), rng.randrange(0, len(data) + 1)}:
            sample = data[:cut] + rng.choice([b"", b"\n", b'x"y\n', b"\xff\n"])
            assert list(_records(sample)) == list(_records_by_csv_module(sample)), sample


def _plain_table(path, rows):
    """``rows`` (cells without the digest) as a raw.csv, each chained as append_row chains it (no campaign.json:
    the chain starts from "")."""
    from protocol.records.raw_columns import RAW_COLUMNS
    from runner.campaign_dir.raw_format import row_digest

    previous, lines = "", [",".join(RAW_COLUMNS)]
    for cells in rows:
        previous = row_digest(previous, cells)
        lines.append(",".join([*cells, previous]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return previous


def test_the_plain_chain_check_gives_the_digests_of_row_digest(tmp_path):
    import random

    from protocol.records.raw_columns import RAW_COLUMNS
    from runner.campaign_dir.raw_table import check_chain

    rng = random.Random(5)
    alphabet = ["a", "1", ".", " ", "é", "😀", "/", ":", "\u2028", "\x7f"]
    for _ in range(50):
        rows = [[f"t{i}", *("".join(rng.choices(alphabet, k=rng.randrange(0, 4))) for _ in RAW_COLUMNS[1:-1])]
                for i in range(rng.randrange(0, 5))]
        last = _plain_table(tmp_path / "raw.csv", rows)
        chain = check_chain(tmp_path / "raw.csv")
        assert chain.last_digest == last and [line.split(",")[:-1] for line in chain.records] == rows


@pytest.mark.parametrize("change", [1, -1])
def test_a_plain_row_of_other_cells_is_refused_though_its_digest_chains(tmp_path, change):
    from protocol.records.raw_columns import RAW_COLUMNS

    cells = ["t0", *(["x"] * (len(RAW_COLUMNS) - 2))]
    _plain_table(tmp_path / "raw.csv", [cells, cells[:change] if change < 0 else [*cells, "y"]])
    with pytest.raises(UserError, match=rf"raw.csv row 2 \(t0\) has {len(RAW_COLUMNS) + change} cells, the header "
                                        rf"{len(RAW_COLUMNS)}"):
        read_raw(tmp_path / "raw.csv")


def test_a_format_5_table_of_any_notes_reads_back_and_any_changed_byte_breaks_it(tmp_path):
    """Rows whose notes hold commas, quotes, line ends and control characters (read record by record): they
    read back as written, and a change of any one byte of the file is refused."""
    import random

    from runner.campaign_dir.raw_table import check_chain

    rng = random.Random(11)
    alphabet = ["a", ",", '"', "\n", "\r", "\\", "é", "\x1f", " ", "😀"]
    path = tmp_path / "raw.csv"
    notes = ["".join(rng.choices(alphabet, k=rng.randrange(0, 8))) for _ in range(6)]
    for i, note in enumerate(notes):
        append_row(path, RawRecord.from_values({"trial_id": f"t{i}", "notes": note}))
    rows = read_raw(path)
    assert [row["notes"] for row in rows] == notes
    assert check_chain(path).last_digest == rows[-1]["chain_sha256"]
    data = path.read_bytes()
    header = data.index(b"\n") + 1
    for at in rng.sample(range(header, len(data)), 40):
        changed = data[:at] + (b"x" if data[at:at + 1] != b"x" else b"y") + data[at + 1:]
        path.write_bytes(changed)
        with pytest.raises(UserError):
            read_raw(path)


def test_the_cells_of_a_line_with_quotes_are_counted_as_the_csv_module_reads_them():
    """``_separators`` either refuses a line (-1: it is then read record by record) or counts its cells as the
    csv module does; every line the csv module writes is counted."""
    import csv
    import random

    from runner.campaign_dir.raw_format import row_text
    from runner.campaign_dir.raw_table import _separators

    rng = random.Random(13)
    for _ in range(3000):
        line = "".join(rng.choices(['"', ",", "a", "é"], k=rng.randrange(1, 9)))
        if '"' not in line:
            continue
        counted = _separators(line)
        if counted != -1:
            assert len(next(csv.reader([line], strict=True))) == counted + 1, line
    for _ in range(1000):
        cells = ["".join(rng.choices(['"', ",", "a", " "], k=rng.randrange(0, 5))) for _ in range(rng.randrange(2, 6))]
        line = row_text(cells)
        if '"' in line:
            assert _separators(line) == len(cells) - 1, (cells, line)


def test_a_format_5_table_with_quoted_cells_is_read_whole_and_as_the_csv_module_reads_it(tmp_path):
    import random

    from runner.campaign_dir.raw_frame import read_frame
    from runner.campaign_dir.raw_table import check_chain

    rng = random.Random(17)
    path = tmp_path / "raw.csv"
    notes = ["".join(rng.choices(['"', ",", "a", " ", "é"], k=rng.randrange(0, 9))) for _ in range(30)]
    for i, note in enumerate(notes):
        append_row(path, RawRecord.from_values({"trial_id": f"t{i}", "notes": note,
                                                "empty_reasons": "x: no GPU, so no counters"}))
    for verify in (True, False):  # False: --allow-inconsistent, which reads the digests as written
        chain = check_chain(path, verify=verify)
        assert all(isinstance(record, str) for record in chain.records)  # one line per row: not record by record
        assert chain.last_digest == read_raw(path)[-1]["chain_sha256"]
    assert [row["notes"] for row in read_raw(path)] == notes
    assert read_frame(path, ("trial_id", "notes"))["notes"].tolist() == notes
