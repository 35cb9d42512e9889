"""Forge a campaign the way anyone can: edit raw.csv's cells or a sealed trial file, then recompute the seal and
the whole sha256 chain with isocost's own chain code. What the chain cannot catch, the readers must (issue 38).

Example::

    rechain(root, lambda rows: rows[0].update(pass_s="-5"))       # row 1's pass_s, the chain recomputed
    reseal(root, trial_id, "status.json")                          # after editing that file
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

from runner.campaign_dir.raw_format import anchor, row_digest, row_text
from runner.campaign_dir.seal import SEALED_FILES, file_sha256, parse_outputs_cell


def rechain(root: Path, change: Callable[[list[dict[str, str]]], None]) -> None:
    """Let ``change`` edit raw.csv's rows (column → cell), then write every row again with its digest recomputed."""
    path = root / "raw.csv"
    with open(path, encoding="utf-8", newline="") as handle:
        header, *body = list(csv.reader(handle))
    rows = [dict(zip(header, cells, strict=True)) for cells in body]
    change(rows)
    previous = anchor(path)[0]
    lines = [row_text(header)]
    for row in rows:
        cells = [row[name] for name in header]
        cells[-1] = previous = row_digest(previous, cells[:-1])
        lines.append(row_text(cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def reseal(root: Path, trial_id: str, name: str) -> None:
    """Record the current sha256 of the trial's file ``name`` in its raw row, and re-chain the table."""
    digest = file_sha256(root / "trials" / trial_id / name) or ""
    column = {file: column for column, file in SEALED_FILES.items()}.get(name, "outputs_sha256")

    def change(rows: list[dict[str, str]]) -> None:
        for row in rows:
            if row["trial_id"] != trial_id:
                continue
            if column != "outputs_sha256":
                row[column] = digest
            else:
                named = parse_outputs_cell(row[column]) | {name: digest}
                row[column] = ";".join(f"{key}={value}" for key, value in named.items())
    rechain(root, change)
