"""CSV files isocost reads and writes: one header check for every reader, one cell rule for every writer.

Reading: ``csv.DictReader`` keeps the LAST of two columns with one name, so a header naming ``label``
twice would silently relabel a corpus. :func:`check_header` refuses a repeated (or empty) column name,
naming the file, the line and the column; :func:`read_dicts` is ``DictReader`` with that check and a
row that has more cells than the header refused (``DictReader`` would hide them under the key None).

Writing: a spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return as a formula (CSV injection). :func:`safe_cell` prefixes such a text with ``'`` (what
spreadsheets themselves do to show a formula as text); numbers, and text that is exactly a number
such as ``-12.50``, are left as they are. Every CSV isocost writes goes through it: :func:`csv_writer`
(corpus_index.csv, schedule.csv, verdicts.csv, ``decide --format csv``, the agreement table), and raw.csv's
cells are made by :func:`protocol.records.stages.csv_cell`, which calls it (a test keeps every other use of
``csv.writer`` out of the code).

Example::

    rows = read_dicts(text, "corpus file", "corpus.csv", required=("id", "text", "label"))
    safe_cell("=HYPERLINK(\\"http://x\\")")  # "'=HYPERLINK(\\"http://x\\")"
    safe_cell("-12.50")                    # "-12.50"
    csv_writer(handle).writerow(["a", "=1+1"])  # a,'=1+1
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from protocol.errors import UserError

#: First characters a spreadsheet reads as the start of a formula (OWASP's list).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def check_header(columns: Sequence[str], what: str, where: str) -> None:
    """Refuse a header that names a column twice or leaves one unnamed (``where``: the file and line)."""
    seen: set[str] = set()
    for number, name in enumerate(columns, start=1):
        key = name.strip()
        if not key:
            raise UserError(f"{what} header has an empty column name (column {number})", where,
                            "Name every column once in the first line.")
        if key in seen:
            raise UserError(f"{what} header names column {key!r} twice", where,
                            "Name every column once: with a repeated name one column would silently replace "
                            "the other.")
        seen.add(key)


def read_dicts(text: str, what: str, where: str, *, required: Iterable[str] = (),
               line_note: str = "") -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, row)`` for every row of a CSV text with a header, the header checked first.

    A row with more cells than the header is refused; one with fewer gets empty cells for the rest.
    Every problem is a :class:`UserError` naming ``where`` and the line (``line_note`` after the number: how
    the lines were counted, when the file ends them in CR alone).
    """
    reader = csv.reader(io.StringIO(text, newline=""))

    def at() -> str:
        return f"{where}, line {reader.line_num}{line_note}"

    try:
        header = next(reader, None)
        if header is None:
            raise UserError(f"{what} is empty", where, "The first line must name the columns.")
        check_header(header, what, at())
        columns = [name.strip() for name in header]
        missing = [name for name in required if name not in columns]
        if missing:
            raise UserError(f"{what} header lacks {sorted(missing)}", at(),
                            f"The header must name {', '.join(required)}.")
        for cells in reader:
            if not cells:
                continue  # a blank line
            if len(cells) > len(columns):
                raise UserError(f"row has {len(cells)} cells, the header names {len(columns)}",
                                at(), "Quote a cell that holds a comma.")
            yield reader.line_num, dict(zip(columns, [*cells, *[""] * (len(columns) - len(cells))], strict=True))
    except csv.Error as exc:
        raise UserError(f"not valid CSV: {exc}", at(),
                        "Quote cells that hold commas, quotes or newlines; no NUL bytes.") from None


def safe_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as written: text starting like a formula gets a leading ``'``.

    Example: ``safe_cell("@SUM(A1)") == "'@SUM(A1)"``; ``safe_cell(-3) == -3``; ``safe_cell("-3") == "-3"``.
    """
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) and not _NUMBER.match(value):
        return "'" + value
    return value


def safe_row(values: Iterable[Any]) -> list[Any]:
    """:func:`safe_cell` of every cell. Example: ``safe_row(["=1+1", 2]) == ["'=1+1", 2]``."""
    return [safe_cell(value) for value in values]


class SafeWriter:
    """``csv.writer`` whose every cell goes through :func:`safe_cell` (None: an empty cell): what every CSV
    isocost writes is written with (:func:`csv_writer`)."""

    def __init__(self, handle: Any) -> None:
        self._writer = csv.writer(handle, lineterminator="\n")

    def writerow(self, values: Iterable[Any]) -> None:
        self._writer.writerow(safe_row("" if value is None else value for value in values))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(handle: Any) -> SafeWriter:
    """The CSV writer of every table isocost writes (``\n`` line ends): no cell is ever a formula.

    Example: ``csv_writer(handle).writerow(["a", "=1+1", 3])`` writes ``a,'=1+1,3``.
    """
    return SafeWriter(handle)
