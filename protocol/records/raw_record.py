"""One row of the raw table, typed: :class:`RawRecord` has one attribute per ``raw.csv`` column.

A cell is text in the file; here it is ``str``, ``int | None``, ``float | None`` or ``bool | None``
by its column, and an empty cell is ``None`` (its reason is in ``empty_reasons``), never a zero. A number
outside its column's domain (:data:`protocol.records.raw_columns.RAW_DOMAINS`: ``pass_s = -5``, ``inf``, ``nan``, a
peak of 10^30 bytes) is refused as a malformed cell: the chain proves a row unchanged, not possible.
Text columns stay ``str`` (an empty cell is ``""``).

:meth:`RawRecord.from_cells` converts every cell and keeps the cells it was read from, so
:meth:`RawRecord.cells` gives back exactly what the file held (the chain digest is over those cells).
A record built from values (:meth:`RawRecord.from_values`, what a trial's gather writes) makes its
cells the way the table is written: empty for None, ``true``/``false``, floats by ``repr``, so a
row read back and written again gives the same bytes. A reader of many rows reads the table as one
typed frame instead (:mod:`runner.campaign_dir.raw_frame`, host side).

Example::

    row = RawRecord.from_cells(cells)       # cells: one list of raw.csv, RAW_COLUMNS order
    row.pass_s                              # 12.5, or None when the pass did not complete
    row.empty_reason("pass_s")              # "pass not completed (status oom)"
    row.cells() == cells                    # True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.records.raw_columns import ABSENT_CELLS, RAW_COLUMNS, raw_domain
from protocol.records.stages import csv_cell


@dataclass(frozen=True)
class RawRecord:
    """One attempted pass, as the raw table holds it (columns in :data:`protocol.records.stages.RAW_COLUMNS` order)."""

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
    engine: str
    rate_qps: float | None
    chain_sha256: str
    # The cells the row was read from (None: built from values), and their columns when the table's format is an
    # older one (None: RAW_COLUMNS); not columns, not compared.
    read_cells: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    read_columns: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_cells(cls, cells: Sequence[str], columns: Sequence[str] = RAW_COLUMNS) -> RawRecord:
        """A row as read from raw.csv (one cell per column of its table's format, ``columns``; a column that format
        lacks takes :data:`~protocol.records.raw_columns.ABSENT_CELLS`). A malformed cell raises ``ValueError`` naming
        the column and the trial."""
        if len(cells) != len(columns):
            raise ValueError(f"a raw row has {len(columns)} cells, not {len(cells)}")
        older = tuple(columns) != RAW_COLUMNS
        full = cells
        if older:
            by_name = dict(zip(columns, cells, strict=True))
            full = [by_name[name] if name in by_name else ABSENT_CELLS.get(name, "") for name in RAW_COLUMNS]
        values = {}
        for name, cell in zip(RAW_COLUMNS, full, strict=True):
            convert, kind = _CONVERTERS[name]
            try:
                values[name] = value = convert(cell)
            except ValueError:
                raise ValueError(f"raw.csv column {name} of trial {cells[0]}: {cell[:40]!r} is not {kind}") from None
            problem = _DOMAINS[name].problem(value) if name in _DOMAINS and value is not None else ""
            if problem:
                raise ValueError(f"raw.csv column {name} of trial {cells[0]}: {cell[:40]!r} is {problem}")
        return cls(**values, read_cells=tuple(cells), read_columns=tuple(columns) if older else None)

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
        if self.read_cells is not None:
            return list(self.read_cells)
        return [csv_cell(getattr(self, name)) for name in RAW_COLUMNS]

    @property
    def values(self) -> dict[str, Any]:
        """Column name → typed value (None for an empty cell): for code that handles every column alike; read a
        known column as an attribute."""
        return {name: getattr(self, name) for name in RAW_COLUMNS}

    def cell(self, column: str) -> str:
        """The text of one column as raw.csv holds it (what integrity checks compare)."""
        if self.read_cells is not None and self.read_columns is None:
            return self.read_cells[_INDEX[column]]
        if self.read_cells is not None and self.read_columns is not None and column in self.read_columns:
            return self.read_cells[self.read_columns.index(column)]
        return csv_cell(getattr(self, column))

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns of :meth:`cells`: its table's format's."""
        return self.read_columns or RAW_COLUMNS

    def empty_reason(self, column: str) -> str:
        """Why ``column`` is empty in this row, from ``empty_reasons``; "" if unsaid."""
        return reason_in(self.empty_reasons, column)


def reason_in(reasons: str, column: str) -> str:
    """The first reason ``reasons`` (``column: reason; …``, a row's ``empty_reasons``) gives ``column``; "" if none."""
    parts = (part.partition(": ") for part in reasons.split("; "))
    return next((reason for key, _, reason in parts if key == column), "")


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


#: How a cell of each column type becomes its value, and what it must be.
_READERS: dict[str, tuple[Callable[[str], Any], str]] = {
    "str": (_text, "text"),
    "int | None": (_int, "an integer"),
    "float | None": (_float, "a number"),
    "bool | None": (_bool, "true or false"),
}
_FIELDS = [f for f in dataclasses.fields(RawRecord) if f.name not in ("read_cells", "read_columns")]
if tuple(f.name for f in _FIELDS) != RAW_COLUMNS:
    raise RuntimeError("RawRecord's fields must be RAW_COLUMNS, in order")  # a new column goes in both
#: Column → its type as written in the record ("str", "int | None", "float | None", "bool | None").
COLUMN_TYPES: dict[str, str] = {f.name: str(f.type) for f in _FIELDS}
_COLUMN_SET = frozenset(RAW_COLUMNS)
_INDEX = {name: index for index, name in enumerate(RAW_COLUMNS)}
#: Column → (converter, what the cell must be).
_CONVERTERS = {name: _READERS[kind] for name, kind in COLUMN_TYPES.items()}
_TEXT = frozenset(name for name, kind in COLUMN_TYPES.items() if kind == "str")
#: Numeric column → its domain (:data:`protocol.records.raw_columns.RAW_DOMAINS`): a cell outside it is refused when
#: read.
_DOMAINS = {name: raw_domain(name) for name, kind in COLUMN_TYPES.items() if kind in ("int | None", "float | None")}


def _value(name: str, value: Any) -> Any:
    if name not in _TEXT:
        return value
    return "" if value is None else str(value)
