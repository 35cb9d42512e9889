"""Rentals are facts recorded when they are known: ``DIR/rentals.jsonl``, appended, never edited, chained.

``isocost rental DIR --gpu rtx-4090 --lots 2`` appends one line; the latest
line wins. ``decide`` prices a campaign from its latest recorded rental, else
from the rental given to ``isocost run --gpu/--lots`` (kept in campaign.json),
and its memo says when the rental was recorded.

The file is an append-only log (:mod:`runner.campaign_dir.appendlog`): every line is read or refused by
number, never skipped; each line is chained to the one before, the first to the frozen facts of
campaign.json (the anchor of raw.csv's first row), so an edited, removed or reordered rental, or one
copied from another campaign, is refused by every reading command. A last line cut while it was written
is named, and the next ``isocost rental`` keeps its bytes in ``rentals.jsonl.partial-N``.

Line format (schema_version 2; 1 had no chain and is refused)::

    {"schema_version": 2, "recorded_at": "2026-12-01T09:00:00Z", "gpu": "rtx-4090", "lots": 2,
     "plan_start": "2026-12-01T08:00" | null, "host": "..." (optional), "chain_sha256": "..."}

Example::

    record_rental(Path("results/mine"), "rtx-4090", 2, plan_start=None)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from protocol.costing.catalog_file import load_catalog
from protocol.costing.plans import MAX_LOTS
from protocol.errors import UserError
from protocol.io.names import check_gpu_name, check_plain_text
from protocol.io.safe_write import check_writable_target
from protocol.records import codec
from protocol.records.codec import Schema
from runner.campaign_dir.appendlog import CHAIN_KEY, LogRead, append_line, read_log, require_whole
from runner.campaign_dir.raw_format import genesis

RENTALS_FILE = "rentals.jsonl"
#: History: 1: first version; 2: every line chained (``chain_sha256``), the first to campaign.json's anchor.
RENTAL_SCHEMA_VERSION = 2
_RESTORE = ("rentals.jsonl is append-only: restore it from a backup or bundle, or move it away and record the "
            "rental again with `isocost rental DIR --gpu GPU --lots N`.")
_CUT_FIX = ("The writer stopped while writing it. Record the rental again with `isocost rental DIR --gpu GPU --lots "
            "N`: the cut bytes are kept in rentals.jsonl.partial-N.")


@dataclass(frozen=True)
class RentalRecord:
    """One line of rentals.jsonl (its ``chain_sha256`` belongs to the log); ``host`` is not written when None."""

    recorded_at: str
    gpu: str
    lots: int
    plan_start: str | None = None
    host: str | None = field(default=None, metadata=codec.OMIT_NONE)
    schema_version: int = RENTAL_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("rental line", RENTAL_SCHEMA_VERSION, fix=_RESTORE)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> RentalRecord:
        if data.get("schema_version") == 1:
            raise UserError("rental line has schema_version 1 (written before rentals were chained)", where,
                            "This isocost reads chained rentals only: move rentals.jsonl away and record the rental "
                            "again with `isocost rental DIR --gpu GPU --lots N`.")
        record = codec.from_dict(cls, {k: v for k, v in data.items() if k != CHAIN_KEY}, where)
        if not record.gpu.strip() or not 1 <= record.lots <= MAX_LOTS:
            raise UserError(f"rental line needs a gpu name and an integer lots from 1 to {MAX_LOTS}", where, _RESTORE)
        check_gpu_name(record.gpu, where)
        for key in ("recorded_at", "plan_start", "host"):
            value = getattr(record, key)
            if value is not None:
                check_plain_text(value, f"rental line key {key}", where, max_chars=200)
        return record


@dataclass(frozen=True)
class Recorded:
    """What ``isocost rental`` appended, and where the bytes of a cut last line went (None when there were none)."""

    record: RentalRecord
    kept_cut: Path | None


def _frozen_catalog_gpus(root: Path) -> tuple[str, ...]:
    from runner.campaign_dir.layout import FROZEN_CATALOG

    path = root / FROZEN_CATALOG
    return load_catalog(path).gpus if path.is_file() else ()


def record_rental(root: Path, gpu: str, lots: int, plan_start: str | None = None, host: str | None = None,
                  now: datetime | None = None) -> Recorded:
    """Append a rental to ``root/rentals.jsonl`` (chained, locked, fsync'd). ``root`` must hold a campaign whose
    earlier rentals read back whole."""
    from runner.campaign_dir.layout import load_record

    load_record(root)
    gpu = check_gpu_name(gpu, "--gpu")
    if host is not None:
        check_plain_text(host, "--host", "isocost rental", max_chars=200)
    if not 1 <= lots <= MAX_LOTS:
        raise UserError(f"--lots must be from 1 to {MAX_LOTS}", "isocost rental", "Give the number of lots rented.")
    known = _frozen_catalog_gpus(root)
    if known and gpu not in known:
        raise UserError(f"GPU {gpu!r} is not in the campaign's plan catalog", str(root / "catalog.csv"),
                        f"Known GPUs: {', '.join(known)}. Name the GPU as the catalog does.")
    if plan_start is not None:
        try:
            datetime.fromisoformat(plan_start)
        except ValueError:
            raise UserError(f"--plan-start {plan_start[:60]!r} is not an ISO date-time", "isocost rental",
                            'Write it as "2026-12-01T09:00" (local) or with an offset.') from None
    check_writable_target(root / RENTALS_FILE, root)  # a link is refused before anything is read through it
    read_rentals(root, allow_cut=True)  # every earlier line reads back and chains (a cut last one is kept aside)
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = RentalRecord(recorded_at=stamp, gpu=gpu, lots=lots, plan_start=plan_start, host=host)
    _, side = append_line(root / RENTALS_FILE, codec.to_dict(record), root=root, chained=True,
                          genesis=genesis(root / "raw.csv"), what=RENTALS_FILE,
                          fix="Pass the campaign directory `isocost run --out` wrote.")
    return Recorded(record, side)


def _read(root: Path, verify: bool = True) -> LogRead:
    return read_log(root / RENTALS_FILE, RENTALS_FILE, chained=True, genesis=genesis(root / "raw.csv"),
                    verify=verify, fix=_RESTORE)


def read_rentals(root: Path, *, allow_cut: bool = False, verify: bool = True) -> tuple[RentalRecord, ...]:
    """Every recorded rental, in the order recorded; any line that is not a chained rental is refused by number.
    A cut last line is refused too, unless ``allow_cut`` (the writer, which keeps it aside before appending)."""
    path = root / RENTALS_FILE
    read = _read(root, verify=False)
    records = tuple(RentalRecord.from_dict(entry, f"{path}, line {number}")  # a line of another format: said so
                    for number, entry in enumerate(read.entries, start=1))
    if verify:
        read = _read(root, verify=True)
    if not allow_cut:
        require_whole(read, path, RENTALS_FILE, _CUT_FIX)
    return records


def latest_rental(root: Path, *, verify: bool = True) -> RentalRecord | None:
    records = read_rentals(root, verify=verify)
    return records[-1] if records else None
