"""Rentals are facts recorded when they are known: ``DIR/rentals.jsonl``, appended, never edited.

``isocost rental DIR --gpu rtx-4090 --lots 2`` appends one line; the latest
line wins. ``decide`` prices a campaign from its latest recorded rental, else
from the rental given to ``isocost run --gpu/--lots`` (kept in campaign.json),
and its memo says when the rental was recorded.

Line format (schema_version 1)::

    {"schema_version": 1, "recorded_at": "2026-12-01T09:00:00Z", "gpu": "rtx-4090", "lots": 2,
     "plan_start": "2026-12-01T08:00" | null, "host": "..." (optional)}

Example::

    record_rental(Path("results/mine"), "rtx-4090", 2, plan_start=None)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.costing.catalog_file import load_catalog
from protocol.errors import UserError

RENTALS_FILE = "rentals.jsonl"
RENTAL_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RentalRecord:
    recorded_at: str
    gpu: str
    lots: int
    plan_start: str | None = None
    host: str | None = None
    schema_version: int = RENTAL_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema_version": self.schema_version, "recorded_at": self.recorded_at,
                                "gpu": self.gpu, "lots": self.lots, "plan_start": self.plan_start}
        if self.host is not None:
            data["host"] = self.host
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> RentalRecord:
        if data.get("schema_version") != RENTAL_SCHEMA_VERSION:
            raise UserError(f"rental line has schema_version {data.get('schema_version')!r}", where,
                            f"This isocost reads {RENTAL_SCHEMA_VERSION}; use the version that wrote it.")
        lots = data.get("lots")
        gpu = data.get("gpu")
        if (not isinstance(gpu, str) or not gpu.strip() or not isinstance(lots, int) or isinstance(lots, bool)
                or lots < 1):
            raise UserError("rental line needs a gpu name and a positive integer lots", where,
                            "Record the rental again with `isocost rental DIR --gpu GPU --lots N`.")
        return cls(recorded_at=str(data.get("recorded_at", "")), gpu=gpu, lots=lots,
                   plan_start=data.get("plan_start"), host=data.get("host"))


def _frozen_catalog_gpus(root: Path) -> tuple[str, ...]:
    from runner.campaign_dir.layout import FROZEN_CATALOG

    path = root / FROZEN_CATALOG
    return load_catalog(path).gpus if path.is_file() else ()


def record_rental(root: Path, gpu: str, lots: int, plan_start: str | None = None, host: str | None = None,
                  now: datetime | None = None) -> RentalRecord:
    """Append a rental to ``root/rentals.jsonl`` (fsync'd). ``root`` must hold a campaign."""
    from runner.campaign_dir.layout import load_record

    load_record(root)
    gpu = gpu.strip().lower()
    if lots < 1:
        raise UserError("--lots must be at least 1", "isocost rental")
    known = _frozen_catalog_gpus(root)
    if known and gpu not in known:
        raise UserError(f"GPU {gpu!r} is not in the campaign's plan catalog", str(root / "catalog.csv"),
                        f"Known GPUs: {', '.join(known)}. Name the GPU as the catalog does.")
    if plan_start is not None:
        try:
            datetime.fromisoformat(plan_start)
        except ValueError:
            raise UserError(f"--plan-start {plan_start!r} is not an ISO date-time", "isocost rental",
                            'Write it as "2026-12-01T09:00" (local) or with an offset.') from None
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = RentalRecord(recorded_at=stamp, gpu=gpu, lots=lots, plan_start=plan_start, host=host)
    with open(root / RENTALS_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record.to_dict(), sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return record


def read_rentals(root: Path) -> tuple[RentalRecord, ...]:
    """Every recorded rental, in the order recorded (a torn last line from a crash is skipped)."""
    path = root / RENTALS_FILE
    if not path.is_file():
        return ()
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                continue
            raise UserError("rentals.jsonl has a line that is not JSON", f"{path}, line {number}",
                            "It is append-only: restore it from the bundle, or move it away.") from None
        if not isinstance(data, dict):
            raise UserError("rentals.jsonl line is not an object", f"{path}, line {number}")
        records.append(RentalRecord.from_dict(data, f"{path}, line {number}"))
    return tuple(records)


def latest_rental(root: Path) -> RentalRecord | None:
    records = read_rentals(root)
    return records[-1] if records else None
