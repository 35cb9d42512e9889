"""Reading ``DIR/rentals.jsonl``: the rentals recorded for a campaign directory (the latest line wins).

``isocost rental DIR …`` appends one JSON object a line: ``schema_version`` (1), ``recorded_at``
(UTC ISO-8601 ``Z``), ``gpu``, ``lots`` (int), ``plan_start`` (ISO or null), optional ``host``.
A rental given to ``isocost run --gpu/--lots`` (campaign.json) still counts when the file is absent.

Example: ``latest_rental(Path("results/a"))`` is ``{"gpu": "b200", "lots": 1, …}`` or ``None``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from protocol.errors import UserError

RENTALS_FILE = "rentals.jsonl"
SCHEMA_VERSION = 1


def read_rentals(path: Path) -> tuple[dict[str, Any], ...]:
    """Every rental line of ``path`` (empty when absent); a bad line is an error naming file and line."""
    if not path.exists():
        return ()
    rentals = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"rental line is not JSON: {exc.msg}", where, "Record rentals with `isocost rental`.") \
                from None
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise UserError("rental line has no schema_version 1", where, "Record rentals with `isocost rental`.")
        gpu, lots = data.get("gpu"), data.get("lots")
        if not isinstance(gpu, str) or not gpu.strip():
            raise UserError("rental line has no gpu", where, "Record rentals with `isocost rental`.")
        if isinstance(lots, bool) or not isinstance(lots, int) or lots < 1:
            raise UserError(f"rental lots must be a whole number >= 1, got {lots!r}", where,
                            "Record rentals with `isocost rental`.")
        rentals.append(data)
    return tuple(rentals)


def latest_rental(directory: Path) -> dict[str, Any] | None:
    """The latest rental recorded in ``directory/rentals.jsonl`` (``None`` when there is none)."""
    rentals = read_rentals(directory / RENTALS_FILE)
    return rentals[-1] if rentals else None
