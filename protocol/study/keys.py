"""What one declared study key is: its type, default, bounds and help (:class:`StudyKey`), written one row each.

The table of every key is :data:`protocol.study.schema.KEYS` (the common keys, each task's and each engine's own);
a task or an engine declares its own keys with these types alone, so that it never imports the table that
gathers them.

Example::

    key_rows(("engines.relay.mode", "string", '"same"', None, "test fixture"))[0].value   # "same"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

#: The declared types (``kind``): what the TOML value is.
KINDS = ("integer", "number", "string", "boolean", "array", "table")


@dataclass(frozen=True)
class Bounds:
    """The closed range a number must lie in (``low_open``/``high_open``: that end excluded)."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def words(self) -> str:
        """Example: ``Bounds(0, 1, low_open=True).words() == "> 0, ≤ 1"``."""
        low, high = ">" if self.low_open else "≥", "<" if self.high_open else "≤"
        return f"{low} {plain(self.low)}, {high} {plain(self.high)}"


def plain(number: float) -> str:
    if not float(number).is_integer():
        return f"{number:g}"
    value = int(number)
    for exponent in (64, 50, 32, 20, 16):
        for offset in (0, -1):
            if value == 2**exponent + offset:
                return f"2^{exponent}" + (" - 1" if offset else "")
    return f"{value:,}"


@dataclass(frozen=True)
class StudyKey:
    key: str  # dotted path; "[]" marks an array of tables
    kind: str  # one of KINDS
    default: str  # "required", or the default as TOML text / words
    bounds: Bounds | None  # the range a number must lie in (None: not a number, or any)
    meaning: str

    @property
    def required(self) -> bool:
        return self.default == "required"

    @property
    def value(self) -> Any:
        """The default as the parser gives it: ``...`` for a required key (also "required in [deadline]"), the
        TOML literal's value (``'"rotate"'`` → ``"rotate"``), or None for a default in words ("none: …")."""
        if self.default.startswith("required"):
            return ...
        try:
            return tomllib.loads(f"v = {self.default}")["v"]
        except tomllib.TOMLDecodeError:
            return None


def key_rows(*rows: tuple[str, str, str, Bounds | None, str]) -> tuple[StudyKey, ...]:
    """A task's own keys, written as the rows above: (key, kind, default, bounds, meaning)."""
    return tuple(StudyKey(*row) for row in rows)
