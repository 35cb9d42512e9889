"""JSON files: sorted keys, atomic writes; one strict reader for every JSON isocost reads (records:
protocol.records.codec).

Reading (:func:`read_json` for a file, :func:`parse_json` for a line or a text, :func:`loads_unique` for
callers that describe problems themselves) refuses an object that names one key twice: Python's ``json``
keeps the last value silently, so ``{"label": "x", "label": "y"}`` would relabel an input without a word.
Deep nesting, integers over the digit limit and invalid UTF-8 are errors naming the file, never tracebacks.

Example::

    parse_json('{"id": "a", "label": "x", "label": "y"}', "corpus.jsonl, line 3")
    # UserError: duplicate key 'label' in a JSON object (corpus.jsonl, line 3). …
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io import safe_write


def dumps(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_json_atomic(path: Path, data: Any, root: Path | None = None, fix: str = "") -> None:
    """Write JSON so that a reader sees either the old file or the whole new one (never through a symbolic link;
    ``root``: no directory below it may be one either, see :mod:`protocol.io.safe_write`)."""
    write_text_atomic(path, dumps(data), root, fix)


def write_text_atomic(path: Path, text: str, root: Path | None = None, fix: str = "") -> None:
    safe_write.write_text_atomic(path, text, root, fix)


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (``json`` alone would keep the last value silently)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"duplicate key {key!r} in a JSON object")


DUPLICATE_KEY_FIX = "Name each key once per object: a repeated key would silently replace the first value."


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"not valid JSON: {name} is not a number JSON allows (a measurement is finite)")


def loads_unique(text: str | bytes) -> Any:
    """``json.loads`` that refuses an object naming one key twice, and ``NaN``, ``Infinity`` and ``-Infinity``
    (Python's extension of JSON: no file isocost reads may hold them).

    Raises what ``json.loads`` raises (``ValueError``, ``RecursionError``) and :class:`DuplicateKeyError`
    (a ``ValueError``): for callers that turn every problem into their own description.
    """
    return json.loads(text, object_pairs_hook=_unique_object, parse_constant=_no_constant)


def json_problem(exc: BaseException) -> str:
    """What was wrong with a JSON text, in words (for an exception :func:`loads_unique` raised)."""
    if isinstance(exc, DuplicateKeyError):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "not valid JSON here: nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: invalid byte(s) at byte {exc.start}"
    if str(exc).startswith("not valid JSON: "):
        return str(exc)
    return f"not valid JSON here: {str(exc)[:120]}"  # an integer of thousands of digits


def parse_json(text: str | bytes, where: str) -> Any:
    """One JSON text (a file, a line of a JSONL file), every problem a :class:`UserError` naming ``where``.

    Bytes are strict UTF-8 (``json.loads`` alone would guess UTF-16 or UTF-32 from the first bytes).
    """
    try:
        return loads_unique(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (ValueError, RecursionError) as exc:
        fix = DUPLICATE_KEY_FIX if isinstance(exc, DuplicateKeyError) else "Fix or restore the file."
        raise UserError(json_problem(exc), where, fix) from None


def read_json(path: Path) -> Any:
    """A JSON file (campaign.json, spec.json, status.json, summary.json, …), strictly: see :func:`parse_json`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise UserError("file not found", str(path)) from None
    except OSError as exc:  # a directory in its place, no permission
        raise UserError(f"cannot be read: {exc.strerror or exc}", str(path), "Restore the file.") from None
    return parse_json(data, str(path))

