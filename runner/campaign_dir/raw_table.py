"""The raw table, ``raw.csv``: append-only, one row per attempted pass, every row chained to the one before.

The last column, ``chain_sha256``, is the sha256 of the previous row's digest, a newline, and this
row's text as written up to its last comma (its other cells, as the csv module writes them: raw
table format 5, the one isocost 1.x reads; a campaign.json declaring another is refused:
:mod:`runner.campaign_dir.raw_format`). The first row chains to the
sha256 of the frozen facts of the ``campaign.json`` beside the table (campaign id, dates, study hash, input
fingerprints and the corpus index hash, variants, the raw format; the empty string where there is
no campaign.json), so an edited campaign description breaks the chain too. Each row is written with
its digest in one ``write`` and fsynced before the next trial starts.

So the chain is checked with any sha256 tool, over the bytes of the file: no cell is parsed,
and a row whose bytes changed breaks it even where its cells read the same.

Every read checks the whole chain. A row that does not match its digest is an error naming the
row. A cut last row (the host died while writing it: no final newline, or fewer cells) is
reported as a partial row; ``--resume`` moves its bytes, unchanged, into ``raw.csv.partial-N``
and records that trial again from its trial directory (:func:`quarantine_partial`).

What the chain does not do: anyone who rewrites a row AND every digest after it produces a
valid chain. It catches cut, glued, edited, duplicated or reordered rows; a deliberate forgery is
caught by the SHA-256 of a bundle made before it.

Example::

    append_row(Path("results/quick/raw.csv"), row)    # computes and writes chain_sha256
    read_records(Path("results/quick/raw.csv"))       # list of RawRecord; UserError on any break
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import accumulate, chain
from pathlib import Path

from protocol.errors import UserError
from protocol.io.safe_read import check_regular
from protocol.io.safe_write import append_whole, check_writable_target, open_append, open_fd
from protocol.records.raw_columns import FORMAT_COLUMNS, FORMAT_WRITERS, RAW_COLUMNS, RAW_SCHEMA_VERSION
from protocol.records.raw_record import RawRecord
from runner.campaign_dir.raw_format import (
    HEADER_LINES,
    PLAIN_CELL,
    anchor,
    check_header,
    row_digest,
    row_text,
    text_digest,
)

_RESUME_FIX = ("The host stopped while writing it: `isocost run STUDY --out DIR --resume` keeps the cut bytes in "
               "raw.csv.partial-N and records that trial again from its trial directory.")


@dataclass(frozen=True)
class RawChain:
    """What a check of raw.csv's chain found, before any cell is converted: the intact bytes (header and whole,
    chained rows), the header as written, each intact row's cells (a plain line, split when asked), and the
    cut last row if any."""

    data: bytes
    columns: tuple[str, ...]
    records: tuple[str | list[str], ...]  # a plain line, or the cells the csv module read
    partial: bytes  # the bytes of a cut last row (b"" when the table ends cleanly)
    partial_row: int  # its row number (0: the header itself was cut)
    last_digest: str  # what the next row chains to
    chain_format: int = RAW_SCHEMA_VERSION  # the raw format its digests are of (:func:`row_digest`)

    def row_cells(self) -> Iterator[list[str]]:
        """The cells of each intact row, in the columns of :data:`RAW_COLUMNS`."""
        for record in self.records:
            if isinstance(record, str):  # a whole line: a quoted cell in it is read as the csv module reads it
                yield record.split(",") if '"' not in record else next(csv.reader([record], strict=True))
            else:
                yield record


@dataclass(frozen=True)
class RawTable:
    """What a read of raw.csv found: the intact rows, and the cut last row if any."""

    rows: tuple[RawRecord, ...]
    intact_bytes: int  # header + whole, chained rows
    partial: bytes  # the bytes of a cut last row (b"" when the table ends cleanly)
    partial_row: int  # its row number (0: the header itself was cut)
    last_digest: str  # what the next row chains to
    columns: tuple[str, ...] = RAW_COLUMNS  # the header as written
    chain: RawChain | None = None  # the checked chain the rows were typed from (a frame is made from it too)


def _records(data: bytes) -> Iterator[tuple[int, int, list[str] | None]]:
    """(start byte, end byte, cells or None when unparseable) of each CSV record in ``data``.

    A whole line without quotes, backslashes or control characters is one record of comma-separated cells
    (what the csv module would read, read faster); any other line is read by the csv module, with the lines
    after it when a quoted cell runs on.
    """
    lines = data.splitlines(keepends=True)
    offsets = list(accumulate(map(len, lines), initial=0))
    remaining = iter(lines)
    index = 0
    for line in remaining:
        text = line.decode("utf-8", errors="replace")
        body = text[:-1]
        if text[-1:] == "\n" and body and PLAIN_CELL.search(body) is None:
            yield offsets[index], offsets[index + 1], body.split(",")
            index += 1
            continue
        reader = csv.reader(_decoded(chain((line,), remaining)), strict=True)
        try:
            cells: list[str] | None = next(reader)
        except csv.Error:
            cells = None
        consumed = max(reader.line_num, 1)
        yield offsets[index], offsets[index + consumed], cells
        if cells is None:
            return
        index += consumed


def _decoded(lines: Iterator[bytes]) -> Iterator[str]:
    for line in lines:
        yield line.decode("utf-8", errors="replace")


def read_raw_bytes(path: Path) -> bytes | None:
    """raw.csv's bytes (None when there is none): the one place the table is read from disk, so a reader that
    opens a campaign (:mod:`runner.campaign_dir.campaign`) reads it once and checks and types those bytes."""
    if not path.exists() and not path.is_symlink():
        return None
    check_regular(path, "raw.csv", _EDITED_FIX)  # a FIFO or a device in its place is refused, never read
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"raw.csv cannot be read: {exc.strerror}", str(path), "Check its permissions.") from None


def check_chain(path: Path, verify: bool = True, data: bytes | None = None) -> RawChain:
    """Read raw.csv (or take its bytes, ``data``, read already by :func:`read_raw_bytes`) and check its chain; no
    cell is converted. A cut last row is returned as ``partial``; any other break raises.

    ``verify=False`` (forensics only, ``--allow-inconsistent``): rows that do not match their digest are read
    as they are.
    """
    first, version = anchor(path)
    empty = RawChain(data=b"", columns=RAW_COLUMNS, records=(), partial=b"", partial_row=0, last_digest=first,
                     chain_format=version)
    data = read_raw_bytes(path) if data is None else data
    if data is None:
        return empty
    return _scan_plain(data, empty, verify) or _scan_records(data, empty, verify, str(path))


def scan(path: Path, verify: bool = True, data: bytes | None = None) -> RawTable:
    """Read and check raw.csv, every row typed (:func:`check_chain`, then :meth:`RawRecord.from_cells`)."""
    return typed_table(check_chain(path, verify, data), path)


def typed_table(chain: RawChain, path: Path) -> RawTable:
    """The rows of a checked chain typed (:meth:`RawRecord.from_cells`): a malformed cell is a UserError naming
    its row."""
    rows = []
    for number, cells in enumerate(chain.row_cells(), start=1):
        try:
            rows.append(RawRecord.from_cells(cells, chain.columns))
        except ValueError as exc:
            raise UserError(f"raw.csv row {number}: {exc}", str(path), _EDITED_FIX) from None
    return RawTable(tuple(rows), len(chain.data), chain.partial, chain.partial_row, chain.last_digest,
                    chain.columns, chain)


#: Bytes that make a table not plain: it is then read record by record (a carriage return: a line end to a CSV
#: reader; NUL).
_NEVER_PLAIN = (b"\r", b"\x00")


def _scan_plain(data: bytes, empty: RawChain, verify: bool) -> RawChain | None:
    """The common table, read whole: valid UTF-8, every row one whole line (no line end in a cell), complete
    and chained (from ``empty``'s digest). None for any other table: :func:`_scan_records` then reads it row by
    row and names what is wrong."""
    if not data.endswith(b"\n") or any(byte in data for byte in _NEVER_PLAIN):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    lines.pop()  # after the final line break
    if lines[0] != HEADER_LINES.get(empty.chain_format):
        return None
    columns = FORMAT_COLUMNS[empty.chain_format]
    rows, commas, previous = lines[1:], len(columns) - 1, empty.last_digest
    last = (_chain_text if verify else _last_plain)(rows, commas, previous)
    return None if last is None else RawChain(data, columns, tuple(rows), b"", 0, last, empty.chain_format)


def _chain_text(rows: list[str], commas: int, previous: str) -> str | None:
    """The last digest of plain ``rows`` of ``commas + 1`` cells each chained to the one before (the first to
    ``previous``): the digest of a row's text up to its last comma; None at the first row that is
    not (or whose quoting is not the csv module's own: :func:`_separators`)."""
    sha256 = hashlib.sha256
    for line in rows:
        text, _, digest = line.rpartition(",")
        previous = sha256(f"{previous}\n{text}".encode()).hexdigest()
        if digest != previous or (text.count(",") if '"' not in text else _separators(text)) != commas - 1:
            return None
    return previous


def _separators(line: str) -> int:
    """The commas between the cells of a line with quoted cells, when each quoted cell is whole on it and quoted
    as the csv module quotes it (from a comma or the line's start to a comma or its end, a quote in it
    doubled); -1 for any other line. Split at its quotes, the line's even pieces are outside the quoted cells
    (an empty one between two odd pieces: a doubled quote)."""
    pieces = line.split('"')
    if len(pieces) % 2 == 0:  # a quoted cell not closed on this line, or a stray quote
        return -1
    outside = pieces[0::2]
    first, last = outside[0], outside[-1]
    if (first and first[-1] != ",") or (last and last[0] != ","):
        return -1
    if any(piece and (piece[0] != "," or piece[-1] != ",") for piece in outside[1:-1]):
        return -1
    return sum(piece.count(",") for piece in outside)


def _last_plain(rows: list[str], commas: int, previous: str) -> str | None:
    """The last row's digest as written (``--allow-inconsistent``: the digests are not checked); None when a row
    has not the header's cells (counted as :func:`_chain_text` counts them)."""
    if any((line.count(",") if '"' not in line else _separators(line)) != commas for line in rows):
        return None
    return rows[-1].rpartition(",")[2] if rows else previous


def _scan_records(data: bytes, empty: RawChain, verify: bool, where: str) -> RawChain:
    records: list[str | list[str]] = []
    intact = 0
    columns, previous, version = RAW_COLUMNS, empty.last_digest, empty.chain_format
    all_valid = _utf8(data)  # then every row is (rows end at a line break)
    for number, (start, end, cells) in enumerate(_records(data)):
        whole = data[start:end].endswith(b"\n") and cells is not None
        valid_text = all_valid or _utf8(data[start:end])
        if number == 0:
            if not whole:
                return RawChain(b"", columns, (), data, 0, previous, version)
            columns = check_header(cells or [], where, version)
            intact = end
            continue
        complete = whole and valid_text and cells is not None and len(cells) == len(columns)
        if not complete and end == len(data) and (not data.endswith(b"\n") or cells is None):
            return RawChain(data[:intact], columns, tuple(records), data[start:], number, previous, version)
        trial_id = (cells or [""])[0][:80]
        if not valid_text:
            raise UserError(f"raw.csv row {number} ({trial_id}) is not valid UTF-8", where, _EDITED_FIX)
        if cells is None or len(cells) != len(columns):
            raise UserError(f"raw.csv row {number} ({trial_id}) has {len(cells or [])} cells, the header "
                            f"{len(columns)}", where, _EDITED_FIX)
        # the record's text up to its last comma (a line end is not part of it)
        expected = text_digest(previous, data[start:end].decode("utf-8")[:-1].rpartition(",")[0])
        if cells[-1] != expected and verify:
            raise UserError(f"raw.csv row {number} ({trial_id}) does not match its chain digest "
                            f"({cells[-1][:16] or 'empty'}…, the rows before it give {expected[:16]}…)",
                            where, _EDITED_FIX)
        previous = cells[-1] if not verify else expected
        records.append(cells)
        intact = end
    return RawChain(data[:intact], columns, tuple(records), b"", 0, previous, version)


_EDITED_FIX = ("raw.csv is append-only: this row, or one before it, was changed after it was written. Restore "
               "raw.csv from a backup or bundle; to read it anyway for forensics, pass --allow-inconsistent.")


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_records(path: Path, verify: bool = True) -> list[RawRecord]:
    """Every row of raw.csv, the chain checked; a cut last row is an error (``--resume`` repairs it)."""
    table = scan(path, verify)
    if table.partial and verify:
        raise UserError(f"raw.csv ends in a partial row (row {table.partial_row}, byte {table.intact_bytes})",
                        str(path), _RESUME_FIX)
    return list(table.rows)


def append_row(path: Path, row: RawRecord) -> None:
    """Append one row with its chain digest and fsync; write the header first if the file is new."""
    check_writable_target(path)  # a link in raw.csv's place is refused before it is read
    table = check_chain(path)
    if table.chain_format != RAW_SCHEMA_VERSION:
        writer = FORMAT_WRITERS.get(table.chain_format, "an older isocost")
        raise UserError(f"raw.csv is in raw table format {table.chain_format} ({writer}): this isocost reads it "
                        f"but appends rows in format {RAW_SCHEMA_VERSION} only", str(path),
                        f"Finish this campaign with {writer}, or start a new one: `isocost run STUDY --out NEW_DIR`.")
    if table.partial:
        raise UserError(f"raw.csv ends in a partial row (row {table.partial_row}, byte {len(table.data)})",
                        str(path), _RESUME_FIX)
    cells = row.cells()
    cells[-1] = row_digest(table.last_digest, cells[:-1])
    # The row as row_text writes it: its digest is of exactly this text up to the last comma.
    data = (("" if table.data else row_text(RAW_COLUMNS) + "\n") + row_text(cells) + "\n").encode("utf-8")
    fd = open_append(path, path.parent)
    try:
        try:
            append_whole(fd, data)  # never leaves a partial row behind
        except OSError as exc:
            raise UserError(
                f"could not append the row of trial {cells[0]} to raw.csv: {exc.strerror}",
                str(path),
                "raw.csv is intact up to the previous row. Free space (or fix the disk), then continue with "
                "--resume: the trial is found and recorded.",
            ) from None
    finally:
        os.close(fd)


def quarantine_partial(path: Path) -> Path | None:
    """Move a cut last row, byte for byte, to ``raw.csv.partial-N``; returns that file (None: nothing cut)."""
    table = check_chain(path)
    if not table.partial:
        return None
    number = 1
    while path.with_name(f"{path.name}.partial-{number}").exists():
        number += 1
    previous = path.with_name(f"{path.name}.partial-{number - 1}")
    if number > 1 and previous.read_bytes() == table.partial:
        side = previous  # kept already by a resume that died before it could truncate raw.csv
    else:
        side = path.with_name(f"{path.name}.partial-{number}")
        fd = open_fd(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, path.parent)
        try:
            written = 0
            while written < len(table.partial):
                written += os.write(fd, table.partial[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = open_fd(path, os.O_WRONLY, path.parent)
    try:
        os.ftruncate(fd, len(table.data))
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)
    return side


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: Written into the notes of a trial the host stopped (Ctrl-C, host crash); such a
#: row does not finish its slot, and ``--resume`` runs the slot again.
HOST_STOP_NOTE = "host CLI stopped"


def is_host_stopped(row: RawRecord | Mapping[str, str]) -> bool:
    """Does this raw row leave its pass to be run again? Only a pass the host stopped before it completed.

    A row with status ``ok`` is a completed pass whatever its notes say (the host may have been
    stopping just as the trial finished): its pass is never run again.
    """
    if isinstance(row, RawRecord):
        return HOST_STOP_NOTE in row.notes and row.status != "ok"
    return HOST_STOP_NOTE in row.get("notes", "") and row.get("status") != "ok"


