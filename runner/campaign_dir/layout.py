"""The campaign directory: its file names, campaign.json, the raw table reader, the writer lock, events.

Readers take typed records: :func:`load_record` gives campaign.json as a
:class:`~protocol.records.stages.CampaignRecord`, :func:`read_rows` the raw table as
:class:`~protocol.records.raw_record.RawRecord` rows, the chain checked. :func:`read_raw` gives the same
rows as text (column → cell, exactly as in the file): a forensic view for tests and tools, not for
the stages, which read typed rows.

Example::

    record = load_record(Path("results/quick"))      # UserError: not a campaign, or another schema
    rows = read_rows(Path("results/quick"))          # the directory or its raw.csv
    [row.pass_s for row in rows if row.status == "ok"]
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from protocol.errors import UserError
from protocol.io.csvio import read_dicts
from protocol.io.safe_write import UnwritablePath, open_fd
from protocol.records.codec import read_record, to_dict
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CAMPAIGN_SCHEMA_VERSION, CampaignEvent, CampaignRecord
from runner.campaign_dir.appendlog import LogRead, append_line, log_records, read_log
from runner.campaign_dir.raw_table import read_records

__all__ = ["CAMPAIGN_SCHEMA_VERSION"]  # campaign.json's version, read here (defined beside its record)


#: The plan catalog in force when the campaign started, copied into its directory.
FROZEN_CATALOG = "catalog.csv"
EVENTS_FILE = "events.jsonl"
#: Every file at the top of a campaign directory, by the stage that writes it (ARCHITECTURE.md's campaign-directory
#: block lists each: tests/unit/test_architecture_doc.py). Besides them: ``trials/<id>/`` and ``NAME.partial-N`` (a
#: cut last row or line, kept by the next writer).
RUN_FILES = ("campaign.json", "study.toml", "corpus_index.csv", "schedule.csv", EVENTS_FILE, "raw.csv", ".lock",
             FROZEN_CATALOG, "queries.jsonl")  # queries.jsonl: an embedding study's frozen query sets
RENTAL_FILES = ("rentals.jsonl",)  # `isocost rental`
ANALYSIS_FILES = ("verdicts.csv", "verdicts.json", "summary.md", "summary.json")  # `isocost validate`, `summarize`
CAMPAIGN_FILES = RUN_FILES + RENTAL_FILES + ANALYSIS_FILES  # `isocost decide` writes under its --out, never here
_EVENTS_FIX = ("events.jsonl is append-only: restore it from a backup or bundle. A last line cut while it was "
               "written is kept in events.jsonl.partial-N by `isocost run STUDY --out DIR --resume`.")


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
        return self.root / EVENTS_FILE

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id




def read_rows(path_or_root: Path, *, allow_inconsistent: bool = False) -> list[RawRecord]:
    """Every row of raw.csv, typed, its chain checked (see :mod:`runner.campaign_dir.raw_table`); [] when there is
    none yet. ``path_or_root``: the raw.csv file or the campaign directory holding it.

    ``allow_inconsistent`` (forensics): rows that break the chain are read as they are.
    """
    path = CampaignPaths(path_or_root).raw if path_or_root.is_dir() else path_or_root
    return read_records(path, verify=not allow_inconsistent)


def read_raw(path: Path, *, allow_inconsistent: bool = False) -> list[dict[str, str]]:
    """The raw table as text: one dict per row, column → the cell exactly as written (chain checked).

    A forensic view for tests and tools that assert on the file's cells; the stages read typed
    rows with :func:`read_rows`.
    """
    return [dict(zip(row.columns, row.cells(), strict=True))
            for row in read_records(path, verify=not allow_inconsistent)]


#: The writer lock inside a campaign directory; it holds the pid and host of the last writer.
LOCK_NAME = ".lock"


@contextmanager
def writer_lock(root: Path) -> Iterator[None]:
    """Hold the campaign directory's writer lock (``flock`` on DIR/.lock) for the block.

    The kernel releases it when the holder exits or dies, so a killed run never leaves a stale
    lock. Readers (validate, summarize, decide, bundle) take no lock.
    """
    path = root / LOCK_NAME
    fd = open_fd(path, os.O_RDWR | os.O_CREAT, root, "Remove the link or file in the way of DIR/.lock.")
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
        record = {"pid": os.getpid(), "host": os.uname().nodename, "since": now_iso()}
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


def log_event(paths: CampaignPaths, kind: str, *, trial_id: str | None = None, job_id: str | None = None) -> str:
    """Append one timestamped campaign event (used for the campaign period), chained to the one before
    (:mod:`runner.campaign_dir.appendlog`); returns its time. A cut last line is first kept in
    ``events.jsonl.partial-N``."""
    event = CampaignEvent(at=now_iso(), event=kind, trial_id=trial_id, job_id=job_id)
    try:
        append_line(paths.events, to_dict(event), root=paths.root, chained=True, what=EVENTS_FILE)
    except UnwritablePath:
        raise  # a link or a directory in its place: never written through, never ignored
    except (OSError, UserError):
        # Best effort: the rows carry their own timestamps; a full disk must not lose the trial's row.
        pass
    return event.at


def read_events_log(path: Path, *, verify: bool = True) -> LogRead:
    """events.jsonl, every line checked and chained (UserError naming the line); a cut last line is returned."""
    return read_log(path, EVENTS_FILE, chained=True, verify=verify, fix=_EVENTS_FIX)


def read_events(path: Path, *, verify: bool = True) -> tuple[tuple[CampaignEvent, ...], LogRead]:
    """events.jsonl's lines as events, the one reader of the file: a line that is not JSON, not chained
    (``verify``) or not an event is a UserError naming the line and the key; a cut last line is in the
    :class:`LogRead` (whoever reads the events says what it does with one)."""
    read = read_events_log(path, verify=verify)
    return log_records(read, CampaignEvent, path, _EVENTS_FIX), read


def load_record(root: Path) -> CampaignRecord:
    """campaign.json of the campaign directory ``root``, typed; UserError when absent, of another schema_version
    or malformed."""
    paths = CampaignPaths(root)
    if not paths.campaign.exists():
        raise UserError("not a campaign directory (no campaign.json)", str(root), "Pass the --out of `isocost run`.")
    return read_record(paths.campaign, CampaignRecord,
                       fix="It was changed after `isocost run` wrote it: restore it from a backup or bundle.")


def now_iso() -> str:
    """The time now, UTC, ISO-8601 to the millisecond: how campaign files stamp events."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """A CSV file isocost wrote (corpus_index.csv, schedule.csv, verdicts.csv), its header checked (no column
    twice, no row wider than it): UserError naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path.name} is not UTF-8 text", str(path), "Restore it from a backup or bundle.") from None
    return [row for _, row in read_dicts(text, path.name, str(path))]


def writer_active(root: Path) -> bool:
    """Is an ``isocost run`` writing this directory now (its writer lock held)?"""
    try:
        fd = os.open(root / ".lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


