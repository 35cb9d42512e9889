"""The vector files of a sentence-embedding pass: float32 rows in a binary file, their ids in a JSONL file beside it.

``vectors.f32`` starts with a 16-byte header (the 8 bytes ``ISOVF32\\n``, the dimension as a little-endian
uint32, 4 reserved zero bytes), then one row of ``dimension`` little-endian float32 values per input, in the
order of ``vector_ids.jsonl`` (one ``{"id": …}`` object a line). The trial appends both per batch and flushes
them (the vectors first), so a crash keeps every completed row. The same format holds the query vectors
(``query_vectors.f32``, ``query_ids.jsonl``).

:func:`read_vectors` never raises on a bad file: it returns what it could read and one message per problem
(no header, a cut last row, rows and ids that do not pair up, a malformed id line), so that a pass with a bad
file is a rejected row with its reason, never a traceback. numpy is imported when a file is read, not before:
the module imports without it.

Example::

    found = read_vectors(Path("trials/t/vectors.f32"), Path("trials/t/vector_ids.jsonl"))
    found.ids, found.dimension, found.problems      # ('a', 'b'), 384, []
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.io.jsonio import DuplicateKeyError, loads_unique

MAGIC = b"ISOVF32\n"
_HEADER = struct.Struct("<8sII")
HEADER_BYTES = _HEADER.size
#: The widest vector accepted (a header claiming more is a corrupt file, not a model).
MAX_DIMENSION = 65536
#: An ids file larger than this is not a pass's (a million ids of 200 characters is about 200 MiB).
MAX_IDS_BYTES = 2**30


def header(dimension: int) -> bytes:
    """The 16 bytes a vector file starts with."""
    if not 0 < dimension <= MAX_DIMENSION:
        raise ValueError(f"dimension {dimension} outside 1..{MAX_DIMENSION}")
    return _HEADER.pack(MAGIC, dimension, 0)


def id_lines(ids: Sequence[str]) -> str:
    """The ``vector_ids.jsonl`` lines of ``ids``."""
    return "".join(json.dumps({"id": ident}) + "\n" for ident in ids)


@dataclass
class VectorFile:
    """What one vector file and its ids file hold: ids in file order, the rows paired with them (float32,
    ``len(ids)`` × ``dimension``; None when they do not pair up), and every problem found."""

    ids: tuple[str, ...]
    vectors: Any  # numpy.ndarray | None
    dimension: int | None
    rows: int
    problems: list[str] = field(default_factory=list)


def read_vectors(vectors_path: Path, ids_path: Path, what: str = "vectors") -> VectorFile:
    """Read a vector file and its ids; problems are described (prefixed with ``what``), never raised."""
    ids, problems = read_ids(ids_path)
    dimension, rows, matrix, more = _read_matrix(vectors_path)
    problems += more
    if matrix is not None and rows != len(ids):
        problems.append(f"{rows} vector row(s) in {vectors_path.name} for {len(ids)} id(s) in {ids_path.name}")
        matrix = None
    return VectorFile(ids=ids, vectors=matrix, dimension=dimension, rows=rows,
                      problems=[f"{what}: {p}" for p in problems])


def read_ids(path: Path) -> tuple[tuple[str, ...], list[str]]:
    """The ids of a ``*_ids.jsonl`` file in file order, and a message per malformed line."""
    try:
        if os.path.islink(path) or not path.is_file():
            return (), [f"{path.name} is missing" if not os.path.lexists(path) else f"{path.name} is not a file"]
        if path.stat().st_size > MAX_IDS_BYTES:
            return (), [f"{path.name} is larger than {MAX_IDS_BYTES} bytes"]
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return (), [f"{path.name} unreadable ({type(exc).__name__})"]
    lines = text.split("\n")
    cut = lines.pop() if lines else ""
    problems: list[str] = []
    ids = _fast_ids(lines)
    if ids is None:
        ids, problems = _ids_line_by_line(lines, path.name)
    if cut:
        problems.append(f"{path.name} line {len(lines) + 1}: cut short (no line end): {cut[:60]!r}")
    return ids, problems


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise DuplicateKeyError(next(key for key, _ in pairs if sum(k == key for k, _ in pairs) > 1))
    return found


def _fast_ids(lines: list[str]) -> tuple[str, ...] | None:
    """Every line a ``{"id": "…"}`` object (as the trial writes them), read in one call; None otherwise."""
    if not lines:
        return ()
    try:
        items = json.loads("[" + ",".join(lines) + "]", object_pairs_hook=_unique_pairs)
    except (ValueError, RecursionError):
        return None
    if len(items) != len(lines):
        return None
    try:
        ids = tuple(item["id"] for item in items)
    except (TypeError, KeyError):
        return None
    if any(type(ident) is not str or len(item) != 1 for ident, item in zip(ids, items, strict=True)):
        return None
    return ids


def _ids_line_by_line(lines: list[str], name: str) -> tuple[tuple[str, ...], list[str]]:
    ids: list[str] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        try:
            item = loads_unique(line)
        except (ValueError, RecursionError) as exc:
            problems.append(f"{name} line {number}: not JSON ({str(exc)[:80]})")
            continue
        if not isinstance(item, dict) or set(item) != {"id"} or not isinstance(item["id"], str):
            problems.append(f"{name} line {number}: expected {{\"id\": \"…\"}}, got {line[:60]!r}")
            continue
        ids.append(item["id"])
    return tuple(ids), problems


def _read_matrix(path: Path) -> tuple[int | None, int, Any, list[str]]:
    """(dimension, complete rows, the rows as float32 or None, problems) of one vector file."""
    import numpy as np

    try:
        if os.path.islink(path) or not path.is_file():
            return None, 0, None, [f"{path.name} is missing" if not os.path.lexists(path) else
                                   f"{path.name} is not a file"]
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(HEADER_BYTES)
            if len(head) < HEADER_BYTES or head[:8] != MAGIC:
                return None, 0, None, [f"{path.name} has no isocost vector header (cut, or not a vector file)"]
            _, dimension, _ = _HEADER.unpack(head)
            if not 0 < dimension <= MAX_DIMENSION:
                return None, 0, None, [f"{path.name} header names dimension {dimension}"]
            row_bytes = 4 * dimension
            rows, trailing = divmod(size - HEADER_BYTES, row_bytes)
            matrix = np.fromfile(handle, dtype="<f4", count=rows * dimension).reshape(rows, dimension)
    except (OSError, ValueError) as exc:
        return None, 0, None, [f"{path.name} unreadable ({type(exc).__name__}: {str(exc)[:80]})"]
    problems = []
    if trailing:
        problems.append(f"{path.name} is cut: {trailing} byte(s) after the last complete row of {dimension} "
                        "float32 values")
    return dimension, rows, matrix, problems
