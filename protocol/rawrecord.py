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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from protocol.records import RAW_COLUMNS, csv_cell


@dataclass(frozen=True)
class RawRecord:
    """One attempted pass, as the raw table holds it (columns in :data:`protocol.records.RAW_COLUMNS` order)."""

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
    chain_sha256: str

    @classmethod
    def from_cells(cls, cells: Sequence[str]) -> RawRecord:
        """A row as read from raw.csv (one cell per column). Typed columns convert when first read:
        a malformed cell raises ``ValueError`` there, naming the column."""
        if len(cells) != len(RAW_COLUMNS):
            raise ValueError(f"a raw row has {len(RAW_COLUMNS)} cells, not {len(cells)}")
        record = object.__new__(cls)
        state = record.__dict__
        state["_cells"] = cells = tuple(cells)
        state.update(zip(_TEXT_NAMES, _text_cells(cells), strict=True))
        return record

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RawRecord:
        """A row from typed values by column name; a missing column is empty (None, or "" for text)."""
        unknown = set(values) - _COLUMN_SET
        if unknown:
            raise ValueError(f"unknown raw columns: {sorted(unknown)}")
        return cls(**{name: _value(name, values.get(name)) for name in RAW_COLUMNS})

    def cells(self) -> list[str]:
        """The row's cells in column order, as written to raw.csv (exactly the cells it was read from)."""
        cells = self.__dict__.get("_cells")
        if cells is not None:
            return list(cells)
        return [csv_cell(getattr(self, name)) for name in RAW_COLUMNS]

    def empty_reason(self, column: str) -> str:
        """Why ``column`` is empty in this row, from ``empty_reasons`` (``column: reason; …``); "" if unsaid."""
        for part in self.empty_reasons.split("; "):
            key, _, reason = part.partition(": ")
            if key == column:
                return reason
        return ""

    if not TYPE_CHECKING:  # the lazy conversion of typed columns; type checkers see the fields above

        def __getattr__(self, name: str) -> Any:
            cells = self.__dict__.get("_cells")
            converter = _CONVERTERS.get(name)
            if cells is None or converter is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            index, convert = converter
            try:
                value = convert(cells[index])
            except ValueError:
                raise ValueError(f"raw.csv column {name} of trial {self.trial_id}: {cells[index][:40]!r} is "
                                 f"not {_KIND[name]}") from None
            self.__dict__[name] = value
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


_READERS: dict[str, tuple[Callable[[str], Any], str]] = {
    "int | None": (_int, "an integer"), "float | None": (_float, "a number"), "bool | None": (_bool, "true or false"),
}
_FIELDS = dataclasses.fields(RawRecord)
if tuple(f.name for f in _FIELDS) != RAW_COLUMNS:
    raise RuntimeError("RawRecord's fields must be RAW_COLUMNS, in order")  # a new column goes in both
_COLUMN_SET = frozenset(RAW_COLUMNS)
#: Typed columns: name → (cell index, converter); text columns are set when the row is read.
_CONVERTERS = {f.name: (i, _READERS[str(f.type)][0]) for i, f in enumerate(_FIELDS) if f.type != "str"}
_KIND = {f.name: _READERS[str(f.type)][1] for f in _FIELDS if f.type != "str"}
_TEXT_NAMES = tuple(f.name for f in _FIELDS if f.type == "str")
_text_cells = itemgetter(*(i for i, f in enumerate(_FIELDS) if f.type == "str"))


def _value(name: str, value: Any) -> Any:
    if name in _CONVERTERS:
        return value
    return "" if value is None else str(value)
