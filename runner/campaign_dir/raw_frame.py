"""The raw table as one typed pandas frame, read after its chain is checked: what the host's tables are made of.

:func:`read_frame` checks raw.csv's chain (:func:`runner.campaign_dir.raw_table.check_chain`: hashlib over every
row's cells, the evidence), then reads the same bytes into a frame, one column per raw column, typed by
:class:`protocol.records.raw_record.RawRecord`'s fields: text as ``str`` ("" for an empty cell), integers as ``Int64``,
numbers as ``float64`` and flags as ``boolean``, an empty cell being ``<NA>``/NaN, never a zero. ``columns``
reads only those (a summary reads a dozen of the seventy). A number outside its column's domain (``pass_s = -5``,
``inf``, ``nan``, a peak of 10^30 bytes: :func:`protocol.records.raw_columns.raw_domain`) is a :class:`UserError` naming
its row and column. Host side only: ``protocol/`` and the trial images never import pandas.

Example::

    frame = read_frame(Path("results/quick/raw.csv"), columns=("trial_id", "variant_id", "pass_s"))
    frame["pass_s"].median()
"""

from __future__ import annotations

import csv
import io
from collections import namedtuple
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from protocol.errors import UserError
from protocol.records.raw_columns import ABSENT_CELLS, RAW_COLUMNS, raw_domain
from protocol.records.raw_record import COLUMN_TYPES, RawRecord
from runner.campaign_dir.raw_table import _EDITED_FIX, _RESUME_FIX, RawChain, check_chain

#: The pandas dtype of each kind of raw column.
_DTYPES: dict[str, Any] = {"str": "str", "int | None": "Int64", "float | None": "float64", "bool | None": "boolean"}


def read_frame(path: Path, columns: Sequence[str] | None = None, *, allow_inconsistent: bool = False) -> \
        pd.DataFrame:
    """raw.csv's rows (a cut last row is an error; ``--resume`` repairs it) as a typed frame of ``columns``
    (default: every raw column), in file order. ``allow_inconsistent`` (forensics): rows that break the chain
    are read as they are."""
    chain = check_chain(path, verify=not allow_inconsistent)
    if chain.partial and not allow_inconsistent:
        raise UserError(f"raw.csv ends in a partial row (row {chain.partial_row}, byte {len(chain.data)})",
                        str(path), _RESUME_FIX)
    return typed_frame(chain, columns, str(path))


def typed_frame(chain: RawChain, columns: Sequence[str] | None, where: str) -> pd.DataFrame:
    """The intact rows of a checked chain as the typed frame of ``columns`` (:func:`read_frame`'s second half); a
    malformed cell is a :class:`UserError` naming its row and column."""
    wanted = tuple(columns or RAW_COLUMNS)
    unknown = [name for name in wanted if name not in COLUMN_TYPES]
    if unknown:
        raise ValueError(f"unknown raw columns: {unknown}")
    try:
        frame = _parse(chain, wanted)
    except (ValueError, TypeError, OverflowError):
        _name_the_bad_cell(chain, where)
        raise
    if not _in_domains(frame):  # a number no run can produce: the row and column named, never summarised
        _name_the_bad_cell(chain, where)
    return frame


def frame_of(rows: Sequence[RawRecord], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The same frame from rows in memory (what a caller holding :class:`RawRecord` rows, or a test, hands on)."""
    wanted = tuple(columns or RAW_COLUMNS)
    data = {name: pd.array([getattr(row, name) for row in rows], dtype=_dtype(name)) for name in wanted}
    return pd.DataFrame(data, columns=list(wanted))


def frame_rows(frame: pd.DataFrame, columns: Sequence[str]) -> list[Any]:
    """The frame's rows as named tuples of Python values (None for an empty cell), for a stage that handles a
    row at a time (one trial's files): ``row.trial_id``, ``row.pass_s``."""
    row = namedtuple("row", columns)  # type: ignore[misc]  # noqa: PYI024 (the columns are the caller's)
    values = [[None if value is pd.NA or value != value else value for value in frame[name].tolist()]
              for name in columns]
    return list(map(row._make, zip(*values, strict=True))) if columns else []


def _dtype(name: str) -> Any:
    return _DTYPES[COLUMN_TYPES[name]]


def _parse(chain: RawChain, wanted: tuple[str, ...]) -> pd.DataFrame:
    present = [name for name in wanted if name in chain.columns]
    if not chain.data or not chain.records:
        return frame_of([], wanted)
    options: dict[str, Any] = {
        "dtype": {name: _dtype(name) for name in present}, "keep_default_na": False,
        "na_values": {name: [""] for name in present if COLUMN_TYPES[name] != "str"},
        "true_values": ["true"], "false_values": ["false"]}
    if isinstance(chain.records[0], str):  # a plain table: its bytes as they are
        source: Any = io.BytesIO(chain.data)
    else:  # quoted cells: the cells the chain check read (csv module), written again plainly for the parser
        source = io.StringIO(_rewrite(chain))
    frame = pd.read_csv(source, usecols=present, **options)
    for name in wanted:
        if name not in frame:  # a column the table's older format lacks: empty, or the value its rows all have
            frame[name] = pd.array([None] * len(frame), dtype=_dtype(name)) if COLUMN_TYPES[name] != "str" \
                else ABSENT_CELLS.get(name, "")
    return frame[list(wanted)]


def _in_domains(frame: pd.DataFrame) -> bool:
    """Whether every number of the frame lies in its column's domain (:func:`protocol.records.raw_columns.raw_domain`;
    ``nan`` in a cell already failed the parse)."""
    for name in frame.columns:
        if COLUMN_TYPES[name] in ("int | None", "float | None"):
            domain = raw_domain(name)
            values = frame[name].dropna()
            if not values.between(domain.low, domain.high).all():  # inf too: no domain reaches it
                return False
    return True


def _rewrite(chain: RawChain) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(chain.columns)
    writer.writerows(chain.records)
    return buffer.getvalue()


def _name_the_bad_cell(chain: RawChain, where: str) -> None:
    """Raise the error that names the first malformed cell (pandas says only that a column would not convert)."""
    for number, cells in enumerate(chain.row_cells(), start=1):
        try:
            RawRecord.from_cells(cells, chain.columns)
        except ValueError as exc:
            raise UserError(f"raw.csv row {number}: {exc}", where, _EDITED_FIX) from None
