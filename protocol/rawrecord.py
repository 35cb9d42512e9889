"""One row of the raw table, typed: :class:`RawRecord` has one attribute per ``raw.csv`` column.

A cell is text in the file; here it is ``str``, ``int | None``, ``float | None`` or ``bool | None``
by its column, and an empty cell is ``None`` (its reason is in ``empty_reasons``), never a zero.
Text columns stay ``str`` (an empty cell is ``""``).

:meth:`RawRecord.from_cells` keeps the cells it was read from, so :meth:`RawRecord.cells` gives back
exactly what the file held (the chain digest is over those cells); each typed column is converted
the first time it is read, so a reader that looks at five columns of 100,000 rows converts five.
A record built from values (:meth:`RawRecord.from_values`, what a trial's gather writes) makes its
cells the way the table is written: empty for None, ``true``/``false``, floats by ``repr``, so a
row read back and written again gives the same bytes.

Example::

    row = RawRecord.from_cells(cells)       # cells: one list of raw.csv, RAW_COLUMNS order
    row.pass_s                              # 12.5, or None when the pass did not complete
    row.empty_reason("pass_s")              # "pass not completed (status oom)"
    row.cells() == cells                    # True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from protocol.raw_columns import RAW_COLUMNS
from protocol.records import csv_cell


@dataclass(frozen=True)
class RawRecord:
    """One attempted pass, as the raw table holds it (columns in :data:`protocol.records.RAW_COLUMNS` order)."""

    __slots__ = ("_cells", *RAW_COLUMNS)  # a slot per column (set when converted) and the cells read

    trial_id: str
    variant_id: str
    repetition: int | None
    order_index: int | None
    status: str
    pass_s: float | None
    expected_ids: int | None
    observed_ids: int | None
    ids_match: bool | None
    corpus_accepted: bool | None
    notes: str
    attempt: int | None
    completed: int | None
    metric: str
    metric_value: float | None
    quality_verdict: str
    stack: str
    device: str
    precision: str
    quantization: str
    compile: bool | None
    attention: str
    batch_size: int | None
    padding: str
    max_length: int | None
    length_grouping: str
    resume: str
    threads: int | None
    seed: int | None
    deterministic: bool | None
    verify_s: float | None
    imports_s: float | None
    load_s: float | None
    warmup_s: float | None
    gpu_pass_s: float | None
    write_s: float | None
    trial_s: float | None
    launch_overhead_s: float | None
    peak_rss_bytes: int | None
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    device_used_bytes: int | None
    truncated_count: int | None
    oom_events: int | None
    launcher: str
    image_id: str
    image_digest: str
    exit_code: int | None
    started_at: str
    ended_at: str
    predictions_path: str
    empty_reasons: str
    device_busy_share: float | None
    pass_compilations: int | None
    gpu_energy_j: float | None
    cpu_energy_j: float | None
    device_used_max_bytes: int | None
    spec_sha256: str
    manifest_sha256: str
    status_sha256: str
    outputs_sha256: str
    batches_sha256: str
    # Slurm
    queue_s: float | None
    node: str
    job_id: str
    allocated_gpu: str
    chain_sha256: str

    @classmethod
    def from_cells(cls, cells: Sequence[str]) -> RawRecord:
        """A row as read from raw.csv (one cell per column). Each column converts when first read: a malformed
        cell raises ``ValueError`` there, naming the column."""
        if len(cells) != len(RAW_COLUMNS):
            raise ValueError(f"a raw row has {len(RAW_COLUMNS)} cells, not {len(cells)}")
        record = object.__new__(cls)
        _set_cells(record, tuple(cells))
        return record

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RawRecord:
        """A row from typed values by column name; a missing column is empty (None, or "" for text)."""
        unknown = set(values) - _COLUMN_SET
        if unknown:
            raise ValueError(f"unknown raw columns: {sorted(unknown)}")
        return cls(**{name: _value(name, values.get(name)) for name in RAW_COLUMNS})

    @classmethod
    def from_text(cls, cells: Mapping[str, str]) -> RawRecord:
        """A row from cell text by column name (what csv.DictReader gives); a missing column is an empty cell."""
        unknown = set(cells) - _COLUMN_SET
        if unknown:
            raise ValueError(f"unknown raw columns: {sorted(unknown)}")
        return cls.from_cells([cells.get(name) or "" for name in RAW_COLUMNS])

    def cells(self) -> list[str]:
        """The row's cells in column order, as written to raw.csv (exactly the cells it was read from)."""
        cells = _cells_of(self)
        if cells is not None:
            return list(cells)
        return [csv_cell(getattr(self, name)) for name in RAW_COLUMNS]

    @property
    def values(self) -> dict[str, Any]:
        """Column name → typed value (None for an empty cell): for code that handles every column alike; read a
        known column as an attribute."""
        return {name: getattr(self, name) for name in RAW_COLUMNS}

    def cell(self, column: str) -> str:
        """The text of one column as raw.csv holds it (what integrity checks compare)."""
        cells = _cells_of(self)
        if cells is not None:
            return str(cells[_INDEX[column]])
        return csv_cell(getattr(self, column))

    def empty_reason(self, column: str) -> str:
        """Why ``column`` is empty in this row, from ``empty_reasons`` (``column: reason; …``); "" if unsaid."""
        for part in self.empty_reasons.split("; "):
            key, _, reason = part.partition(": ")
            if key == column:
                return reason
        return ""

    if not TYPE_CHECKING:  # the lazy conversion of the columns; type checkers see the fields above

        def __getattr__(self, name: str) -> Any:
            converter = _CONVERTERS.get(name)
            cells = _cells_of(self) if converter is not None else None
            if cells is None or converter is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            index, convert, kind = converter
            try:
                value = convert(cells[index])
            except ValueError:
                trial_id = cells[0]
                raise ValueError(f"raw.csv column {name} of trial {trial_id}: {cells[index][:40]!r} is "
                                 f"not {kind}") from None
            _SETTERS[name](self, value)
            return value


def _int(cell: str) -> int | None:
    return int(cell) if cell else None


def _float(cell: str) -> float | None:
    return float(cell) if cell else None


_BOOLS = {"true": True, "false": False, "": None}


def _bool(cell: str) -> bool | None:
    try:
        return _BOOLS[cell]
    except KeyError:
        raise ValueError(cell) from None


def _text(cell: str) -> str:
    return cell


#: How a cell of each column type becomes its value (one cell, and a whole column at once), and what it must be.
_READERS: dict[str, tuple[Callable[[str], Any], Callable[[list[str]], list[Any]], str]] = {
    "str": (_text, lambda cells: cells, "text"),
    "int | None": (_int, lambda cells: [int(c) if c else None for c in cells], "an integer"),
    "float | None": (_float, lambda cells: [float(c) if c else None for c in cells], "a number"),
    "bool | None": (_bool, lambda cells: [_BOOLS[c] for c in cells], "true or false"),
}
_FIELDS = dataclasses.fields(RawRecord)
if tuple(f.name for f in _FIELDS) != RAW_COLUMNS:
    raise RuntimeError("RawRecord's fields must be RAW_COLUMNS, in order")  # a new column goes in both
_COLUMN_SET = frozenset(RAW_COLUMNS)
_INDEX = {name: index for index, name in enumerate(RAW_COLUMNS)}
#: Column → (cell index, converter, what the cell must be).
_CONVERTERS = {f.name: (i, _READERS[str(f.type)][0], _READERS[str(f.type)][2]) for i, f in enumerate(_FIELDS)}
_BULK = {f.name: _READERS[str(f.type)][1] for f in _FIELDS}
_TEXT = frozenset(f.name for f in _FIELDS if f.type == "str")
#: Slot setters: they fill a frozen record's converted columns (the same value a read would cache).
_SETTERS: dict[str, Callable[[RawRecord, Any], None]] = {
    name: vars(RawRecord)[name].__set__ for name in RAW_COLUMNS}
#: The ``_cells`` slot holds the cells read (a tuple) or, for a row read from a plain line, the line itself,
#: split into cells the first time one is needed (a reader of a few columns never holds every cell).
_set_cells: Callable[[RawRecord, tuple[str, ...] | str], None] = vars(RawRecord)["_cells"].__set__
_get_cells = vars(RawRecord)["_cells"].__get__


def _source(record: RawRecord) -> tuple[str, ...] | str | None:
    try:
        return _get_cells(record, RawRecord)  # type: ignore[no-any-return]
    except AttributeError:
        return None  # built from values


def _cells_of(record: RawRecord) -> tuple[str, ...] | None:
    """The cells a record was read from (None: built from values)."""
    source = _source(record)
    if isinstance(source, str):
        source = tuple(source.split(","))
        _set_cells(record, source)
    return source


def records_from_lines(lines: Iterable[str]) -> list[RawRecord]:
    """Rows from lines of plain CSV (no quoted cell, no line break), each with one cell per column: the common
    raw.csv, read without the csv module. The caller checked the cell counts."""
    new, cls, set_cells = object.__new__, RawRecord, _set_cells
    records = []
    for line in lines:
        record = new(cls)
        set_cells(record, line)
        records.append(record)
    return records


def column_values(rows: Sequence[RawRecord], columns: Sequence[str]) -> dict[str, list[Any]]:
    """The typed values of these columns for every row, one list per column (item i is row i's): what a reader
    of many rows uses, converting a column at a time without an attribute lookup per cell. The rows are left
    as they are; a malformed cell raises the error reading its attribute gives, naming the row."""
    try:
        sources = list(map(_get_cells, rows, repeat(RawRecord)))
    except AttributeError:  # rows built from values: read them attribute by attribute
        sources = [None]
    if None in sources or not columns:
        return {name: [getattr(row, name) for row in rows] for name in columns}
    table = _cell_columns(sources, [_INDEX[name] for name in columns])  # type: ignore[arg-type]
    found: dict[str, list[Any]] = {}
    for name, cells in zip(columns, table, strict=True):
        try:
            found[name] = _BULK[name](cells)
        except (ValueError, KeyError):
            found[name] = [getattr(row, name) for row in rows]
    return found


def _cell_columns(sources: list[tuple[str, ...] | str], indexes: list[int]) -> list[list[str]]:
    """The cells at ``indexes`` of every row, a column at a time. Rows read from plain lines are joined and split
    once, so the cells of all rows lie in one list, a row every ``len(RAW_COLUMNS)`` cells: a column is a slice
    (no list or tuple per row)."""
    width = len(RAW_COLUMNS)
    if all(source.__class__ is str for source in sources):
        flat = ",".join(sources).split(",")  # type: ignore[arg-type]
        if len(flat) == width * len(sources):
            return [flat[index::width] for index in indexes]
    rows = [source.split(",") if source.__class__ is str else source for source in sources]
    return [list(map(itemgetter(index), rows)) for index in indexes]  # type: ignore[arg-type]




def _value(name: str, value: Any) -> Any:
    if name not in _TEXT:
        return value
    return "" if value is None else str(value)
