"""The campaign directory: its file names, campaign.json, the raw table reader, the writer lock, events."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.jsonio import read_json
from runner.campaign_dir.rawtable import read_rows

CAMPAIGN_SCHEMA_VERSION = 1


#: The plan catalog in force when the campaign started, copied into its directory.
FROZEN_CATALOG = "catalog.csv"


@dataclass(frozen=True)
class CampaignPaths:
    root: Path

    @property
    def campaign(self) -> Path:
        return self.root / "campaign.json"

    @property
    def study(self) -> Path:
        return self.root / "study.toml"

    @property
    def raw(self) -> Path:
        return self.root / "raw.csv"

    @property
    def schedule(self) -> Path:
        return self.root / "schedule.csv"

    @property
    def corpus_index(self) -> Path:
        return self.root / "corpus_index.csv"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id


@dataclass(frozen=True)
class Rental:
    """The flat plan this campaign's host is rented under (matched against the catalog by `decide`)."""

    gpu: str
    lots: int

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "lots": self.lots}


def read_raw(path: Path, *, allow_inconsistent: bool = False) -> list[dict[str, str]]:
    """Every row of raw.csv with its chain checked (see :mod:`runner.campaign_dir.rawtable`); [] when there is none yet.

    ``allow_inconsistent`` (forensics): rows that break the chain are read as they are.
    """
    return read_rows(path, verify=not allow_inconsistent)


#: The writer lock inside a campaign directory; it holds the pid and host of the last writer.
LOCK_NAME = ".lock"


@contextmanager
def writer_lock(root: Path) -> Iterator[None]:
    """Hold the campaign directory's writer lock (``flock`` on DIR/.lock) for the block.

    The kernel releases it when the holder exits or dies, so a killed run never leaves a stale
    lock. Readers (validate, summarize, decide, bundle) take no lock.
    """
    path = root / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(fd)
        os.close(fd)
        raise UserError(
            f"another isocost run is writing this campaign: {holder}",
            str(root),
            "Two writers would run the same passes twice. Wait for that run to finish or stop it; reading "
            "commands (validate, summarize, decide, bundle) need no lock.",
        ) from None
    try:
        os.ftruncate(fd, 0)
        record = {"pid": os.getpid(), "host": os.uname().nodename, "since": _now()}
        os.pwrite(fd, (json.dumps(record, sort_keys=True) + "\n").encode(), 0)
        os.fsync(fd)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays, naming the last writer


def _lock_holder(fd: int) -> str:
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        return f"pid {int(record['pid'])} on host {record['host']}, since {record.get('since', '?')}"
    except (ValueError, KeyError, TypeError):
        return "pid and host not yet written"


def log_event(paths: CampaignPaths, kind: str, **fields: Any) -> str:
    """Append one timestamped campaign event (used for the campaign period); returns its time."""
    record = {"at": _now(), "event": kind, **fields}
    try:
        with open(paths.events, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError:
        # Best effort: the rows carry their own timestamps; a full disk must not lose the trial's row.
        pass
    return str(record["at"])


def load_campaign(root: Path) -> dict[str, Any]:
    paths = CampaignPaths(root)
    if not paths.campaign.exists():
        raise UserError("not a campaign directory (no campaign.json)", str(root), "Pass the --out of `isocost run`.")
    data = read_json(paths.campaign)
    if data.get("schema_version") != CAMPAIGN_SCHEMA_VERSION:
        raise UserError(
            f"campaign.json has schema_version {data.get('schema_version')!r}",
            str(paths.campaign),
            f"This isocost reads {CAMPAIGN_SCHEMA_VERSION}; use the version that wrote it.",
        )
    return data


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


