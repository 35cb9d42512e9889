"""What the campaign-directory checks report: one :class:`Discrepancy` per thing that does not add up.

:class:`Findings` collects them in a fixed order (the first is the one a refusal names) and reads
the JSON files the checks need without ever crashing on hostile content: a file that cannot be
read is itself a discrepancy.

Example::

    findings = Findings(Path("results/quick"), prefix="campaign/")
    spec = findings.json("trials/0001-r1-batch_size=1/spec.json")   # None (and a discrepancy) if unreadable
    findings.problems                                               # [Discrepancy(...), ...]
"""

from __future__ import annotations

import csv
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from protocol.errors import UserError
from protocol.io.jsonio import read_json
from protocol.records import codec

#: What malformed (or hostile) content can raise while it is read; a verifier reports it, never crashes.
MALFORMED = (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError, RecursionError, UserError,
             csv.Error, UnicodeDecodeError, tomllib.TOMLDecodeError)

T = TypeVar("T")


@dataclass(frozen=True)
class Discrepancy:
    """One thing that does not add up, named precisely: the file, the field, what differs."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


class Findings:
    """The discrepancies found in one campaign directory so far, in the order found."""

    def __init__(self, root: Path, prefix: str = "") -> None:
        self.root = root
        self.prefix = prefix  # prepended to every file name (a campaign inside a bundle: "campaign/")
        self.problems: list[Discrepancy] = []

    def add(self, file: str, field_name: str, message: str) -> None:
        self.problems.append(Discrepancy(self.prefix + file, field_name, message))

    def json(self, name: str) -> Any:
        """The JSON file ``name`` (relative to the root), or None with a discrepancy when missing or unreadable."""
        path = self.root / name
        if not path.is_file():
            self.add(name, "presence", "missing")
            return None
        try:
            return read_json(path)
        except UserError as exc:
            self.add(name, "content", exc.what)
        except (ValueError, RecursionError) as exc:  # huge integers, absurd nesting: hostile, not a crash
            self.add(name, "content", f"unreadable JSON ({type(exc).__name__})")
        return None

    def record(self, name: str, cls: type[T], what: str = "") -> T | None:
        """The JSON file ``name`` as a ``cls`` record, or None with a discrepancy (``what`` it is not, and why)."""
        data = self.json(name)
        if data is None:
            return None
        try:
            return codec.from_dict(cls, data, name)
        except UserError as exc:
            self.add(name, "content", f"not {what} ({exc.what})" if what else exc.what)
        return None
