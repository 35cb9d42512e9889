"""Is a campaign directory what its writer left? One consistency check for every reading command.

``validate``, ``summarize``, ``decide`` and ``period`` call :func:`check_evidence` before they
read anything; ``bundle`` and ``verify`` call :func:`check_campaign`, which adds the deep checks
(schedule, every trial's spec, manifest, status and predictions, verdicts and summary).
The evidence checks:

- ``study.toml`` hashes to the ``study_sha256`` of ``campaign.json``;
- ``corpus_index.csv`` hashes to the ``corpus.index_sha256`` recorded at the start, and, where the
  corpus file is readable with its frozen fingerprint, holds exactly its ids and labels;
- ``raw.csv``: every row matches its chain digest (:mod:`runner.campaign_dir.rawtable`), no cut last row,
  trial ids safe and unique;
- trial directories ↔ rows: each row has its directory, each directory its row;
- ``events.jsonl``: well-formed, in time order, starting with the set-up the campaign recorded,
  every row's trial bracketed by its own start and end events, nothing in the future
  (``rentals.jsonl`` is not an event file and is not read).

A failed check names the file, the field and what differs (:class:`Discrepancy`). Readers refuse
with ``Error:`` unless given ``--allow-inconsistent`` (forensics), and then say so first.

Example::

    report = check_evidence(Path("results/quick"))
    report.ok                 # True
    report.require(allow_inconsistent=False)   # raises UserError naming the first discrepancy
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from protocol.corpus import read_corpus
from protocol.errors import UserError
from protocol.fingerprint import fingerprint_path, sha256_bytes
from protocol.jsonio import read_json
from protocol.paths import check_safe_name
from protocol.records import RAW_COLUMNS, TrialSpec, TrialStatus, Variant, csv_cell
from protocol.schedule import Slot, rotated_schedule
from protocol.study import Study, parse_study
from protocol.validate import Reference, check_pass, parse_predictions
from runner.campaign_dir.rawtable import is_host_stopped, scan

#: Clocks of a remote host or a container may differ from the host CLI's by this much.
CLOCK_SKEW = timedelta(minutes=10)
#: A first line of every output made with ``--allow-inconsistent``.
INCONSISTENT_BANNER = "INCONSISTENT CAMPAIGN DIRECTORY (--allow-inconsistent, forensics only): "


@dataclass(frozen=True)
class Discrepancy:
    """One thing that does not add up, named precisely: the file, the field, what differs."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "field": self.field, "message": self.message}



def read_csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def read_event_lines(path: Path) -> list[Any]:
    events: list[Any] = []
    if not path.exists():
        return events
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            events.append(None)
    return events


def planned_slots(description: dict[str, Any]) -> tuple[Slot, ...]:
    variants = tuple(Variant.from_dict(v) for v in description["variants"])
    return rotated_schedule(variants, int(description["repetitions"]))


def slot_of(trial_id: str, slots_by_id: dict[str, Slot]) -> tuple[Slot | None, int]:
    if trial_id in slots_by_id:
        return slots_by_id[trial_id], 1
    base, sep, number = trial_id.rpartition("-a")
    if sep and number.isdigit() and base in slots_by_id and int(number) >= 2:
        return slots_by_id[base], int(number)
    return None, 0


def unfinished_slots(rows: list[dict[str, str]], slots: tuple[Slot, ...]) -> list[str]:
    """Planned passes without a final row (the campaign stopped before them), by slot trial id."""
    slots_by_id = {slot.trial_id: slot for slot in slots}
    finished = set()
    for row in rows:
        slot, _ = slot_of(row.get("trial_id", ""), slots_by_id)
        if slot is not None and not is_host_stopped(row):
            finished.add(slot.trial_id)
    return [slot.trial_id for slot in slots if slot.trial_id not in finished]


_STATUS_MISSING_NOTE = "the trial wrote no status.json"
#: What malformed (or hostile) content can raise while it is read; a verifier reports it, never crashes.
MALFORMED = (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError, RecursionError, UserError,
              csv.Error, UnicodeDecodeError, tomllib.TOMLDecodeError)
_HOST_OVERRIDES = {"timeout", "oom"}  # outside evidence the host records over any trial status


class _Checks:
    """Collects discrepancies of one campaign directory, in a fixed order (the first is the one named)."""

    def __init__(self, root: Path, prefix: str, deep: bool = True) -> None:
        self.root = root
        self.prefix = prefix
        self.deep = deep  # False: the evidence checks only (see the module docstring)
        self.problems: list[Discrepancy] = []

    def add(self, file: str, field_name: str, message: str) -> None:
        self.problems.append(Discrepancy(self.prefix + file, field_name, message))

    def json(self, name: str) -> Any:
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

    def run(self) -> None:
        description = self.json("campaign.json")
        if not isinstance(description, dict):
            if description is not None:
                self.add("campaign.json", "content", "not a JSON object")
            return
        try:
            self._run(description)
        except MALFORMED as exc:
            self.add("campaign.json", "content", f"malformed campaign ({type(exc).__name__}: {str(exc)[:200]})")

    def _run(self, d: dict[str, Any]) -> None:
        study = self._study(d)
        try:
            slots = planned_slots(d)
        except (KeyError, TypeError, ValueError, UserError) as exc:
            self.add("campaign.json", "variants", f"unreadable ({exc})")
            return
        reference = self._corpus_index(d)
        if self.deep:
            self._schedule(slots)
        rows = self._raw(d, slots, study, reference)
        if rows is None:
            return
        self._trial_dirs(rows)
        self._events(rows)
        self._event_times(d, rows)
        if not self.deep:
            return
        self._verdicts(d, rows)
        summary = self.json("summary.json")
        if isinstance(summary, dict):
            for key in ("campaign_id", "study_sha256"):
                if summary.get(key) != d.get(key):
                    self.add("summary.json", key, f"{summary.get(key)!r}, campaign.json says {d.get(key)!r}")

    def _study(self, d: dict[str, Any]) -> Study | None:
        path = self.root / "study.toml"
        if not path.is_file():
            self.add("study.toml", "presence", "missing")
            return None
        data = path.read_bytes()
        actual = sha256_bytes(data)
        if actual != d.get("study_sha256"):
            self.add("study.toml", "sha256",
                     f"the file hashes to {actual}, campaign.json field study_sha256 says {d.get('study_sha256')}")
        try:
            parsed = tomllib.loads(data.decode("utf-8"))
            return parse_study(parsed, path=Path(str(d.get("study_path") or path)), sha256=actual)
        except MALFORMED as exc:
            self.add("study.toml", "content", f"not a valid study: {str(exc)[:300]}")
            return None

    def _corpus_index(self, d: dict[str, Any]) -> Reference | None:
        path = self.root / "corpus_index.csv"
        if not path.is_file():
            self.add("corpus_index.csv", "presence", "missing")
            return None
        rows = read_csv_rows(path)
        ids = [row.get("id", "") for row in rows]
        if len(set(ids)) != len(ids):
            self.add("corpus_index.csv", "id", "an id appears twice")
        corpus = d.get("corpus") or {}
        expected = corpus.get("inputs")
        if expected != len(rows):
            self.add("corpus_index.csv", "rows", f"{len(rows)} inputs, campaign.json corpus.inputs says {expected}")
        recorded = corpus.get("index_sha256")
        if recorded is not None and fingerprint_path(path) != recorded:
            self.add("corpus_index.csv", "sha256", f"the file hashes to {fingerprint_path(path)}, campaign.json "
                     f"corpus.index_sha256 (frozen at the start) says {recorded}")
        self._corpus_labels(rows, corpus)
        return Reference(ids=tuple(ids), labels={row.get("id", ""): row.get("label", "") for row in rows}, groups={})

    def _corpus_labels(self, rows: list[dict[str, str]], corpus: dict[str, Any]) -> None:
        """Where the corpus is readable with its frozen fingerprint: the index holds its ids and labels."""
        source = Path(str(corpus.get("path") or ""))
        if not source.is_absolute() or not source.is_file() or fingerprint_path(source) != corpus.get("fingerprint"):
            return  # not on this host (a bundle verified elsewhere): the index's own hash is the check
        records = read_corpus(source)
        if len(records) != len(rows):
            self.add("corpus_index.csv", "rows", f"{len(rows)} inputs, the corpus {source} holds {len(records)}")
            return
        for number, (row, record) in enumerate(zip(rows, records, strict=True), start=1):
            for key, value in (("id", record.id), ("label", record.label)):
                if row.get(key) != value:
                    self.add("corpus_index.csv", f"row {number}, column {key}",
                             f"{row.get(key)!r}, the frozen corpus {source} says {value!r}")
                    return

    def _schedule(self, slots: tuple[Slot, ...]) -> None:
        path = self.root / "schedule.csv"
        if not path.is_file():
            self.add("schedule.csv", "presence", "missing")
            return
        rows = read_csv_rows(path)
        if len(rows) != len(slots):
            self.add("schedule.csv", "rows", f"{len(rows)} slots, the study's rotation plans {len(slots)}")
        for number, (row, slot) in enumerate(zip(rows, slots, strict=False), start=1):
            planned = {"order_index": str(slot.order_index), "trial_id": slot.trial_id,
                       "variant_id": slot.variant_id, "repetition": str(slot.repetition)}
            for key, value in planned.items():
                if row.get(key) != value:
                    self.add("schedule.csv", f"row {number}, column {key}",
                             f"{row.get(key)!r}, the study's rotated schedule gives {value!r}")

    def _raw(
        self, d: dict[str, Any], slots: tuple[Slot, ...], study: Study | None, reference: Reference | None
    ) -> list[dict[str, str]] | None:
        path = self.root / "raw.csv"
        if not path.is_file():
            self.add("raw.csv", "presence", "missing")
            return None
        try:
            table = scan(path)
        except UserError as exc:
            self.add("raw.csv", "chain", exc.what)
            return None
        if table.partial:
            self.add("raw.csv", f"row {table.partial_row}",
                     f"cut while it was written (from byte {table.intact_bytes}): `isocost run STUDY --out DIR "
                     "--resume` keeps its bytes in raw.csv.partial-N and records that trial again")
        rows = [dict(zip(RAW_COLUMNS, row.cells(), strict=True)) for row in table.rows]
        slots_by_id = {slot.trial_id: slot for slot in slots}
        seen: set[str] = set()
        good: list[dict[str, str]] = []
        for number, row in enumerate(rows, start=1):
            trial_id = row.get("trial_id") or ""
            where = f"row {number} ({trial_id})"
            if any(value is None for value in row.values()) or None in row:
                self.add("raw.csv", where, "the row has a different number of cells than the header")
                continue
            try:
                check_safe_name(trial_id, what="trial id")
            except UserError as exc:
                self.add("raw.csv", f"{where}, column trial_id", exc.what)
                continue
            if trial_id in seen:
                self.add("raw.csv", f"{where}, column trial_id", "this trial id has an earlier row")
                continue
            seen.add(trial_id)
            good.append(row)
            if not self.deep:
                if not (self.root / "trials" / trial_id).is_dir():
                    self.add(f"trials/{trial_id}/", "presence",
                             f"raw.csv {where} names this trial, its directory is missing")
                continue
            slot, attempt = slot_of(trial_id, slots_by_id)
            if slot is None:
                self.add("raw.csv", f"{where}, column trial_id", "no planned slot of schedule.csv has this trial id")
            else:
                planned = {"variant_id": slot.variant_id, "repetition": str(slot.repetition),
                           "order_index": str(slot.order_index), "attempt": str(attempt)}
                for key, value in planned.items():
                    if row[key] != value:
                        self.add("raw.csv", f"{where}, column {key}", f"{row[key]!r}, schedule.csv gives {value!r}")
            expected_path = f"trials/{trial_id}/predictions.jsonl"
            if row["predictions_path"] != expected_path:
                self.add("raw.csv", f"{where}, column predictions_path",
                         f"{row['predictions_path']!r}, expected {expected_path!r}")
            self._trial(d, row, number, study, reference)
        return good

    def _trial(
        self, d: dict[str, Any], row: dict[str, str], number: int, study: Study | None, reference: Reference | None
    ) -> None:
        trial_id = row["trial_id"]
        where = f"row {number} ({trial_id})"
        base = f"trials/{trial_id}/"
        trial_dir = self.root / "trials" / trial_id
        if not trial_dir.is_dir():
            self.add(base, "presence", f"raw.csv {where} names this trial, its directory is missing")
            return
        spec_data = self.json(base + "spec.json")
        if spec_data is not None:
            try:
                spec = TrialSpec.from_dict(spec_data)
            except (UserError, KeyError, TypeError, ValueError) as exc:
                self.add(base + "spec.json", "content", f"not a trial spec ({exc})")
            else:
                self._spec(d, row, where, base, spec)
        status_path = trial_dir / "status.json"
        manifest_path = trial_dir / "manifest.json"
        if not status_path.is_file():
            if _STATUS_MISSING_NOTE not in row["notes"]:
                self.add(base + "status.json", "presence",
                         f"missing, and raw.csv {where} does not say the trial wrote none")
        else:
            if _STATUS_MISSING_NOTE in row["notes"]:
                self.add(base + "status.json", "presence",
                         f"present, but raw.csv {where} says the trial wrote none")
            status_data = self.json(base + "status.json")
            if status_data is not None:
                try:
                    status = TrialStatus.from_dict(status_data)
                except (UserError, KeyError, TypeError, ValueError) as exc:
                    self.add(base + "status.json", "content", f"not a trial status ({exc})")
                else:
                    self._status(row, where, base, status)
            if not manifest_path.is_file():
                self.add(base + "manifest.json", "presence", "missing (the trial writes it before its status)")
        if manifest_path.is_file():
            manifest = self.json(base + "manifest.json")
            if isinstance(manifest, dict):
                self._manifest(d, row, base, manifest)
            elif manifest is not None:
                self.add(base + "manifest.json", "content", "not a JSON object")
        if study is not None and reference is not None:
            self._predictions(row, where, base, study, reference)

    def _spec(self, d: dict[str, Any], row: dict[str, str], where: str, base: str, spec: TrialSpec) -> None:
        expected = {
            "trial_id": (spec.trial_id, row["trial_id"], "raw.csv"),
            "variant.variant_id": (spec.variant.variant_id, row["variant_id"], "raw.csv"),
            "repetition": (str(spec.repetition), row["repetition"], "raw.csv"),
            "order_index": (str(spec.order_index), row["order_index"], "raw.csv"),
            "attempt": (str(spec.attempt), row["attempt"], "raw.csv"),
            "launcher": (spec.launcher, row["launcher"], "raw.csv"),
            "campaign_id": (spec.campaign_id, d.get("campaign_id"), "campaign.json"),
            "study_sha256": (spec.study_sha256, d.get("study_sha256"), "campaign.json"),
            "corpus_fingerprint": (spec.corpus_fingerprint, (d.get("corpus") or {}).get("fingerprint"),
                                   "campaign.json corpus.fingerprint"),
            "model_fingerprint": (spec.model_fingerprint, (d.get("model") or {}).get("fingerprint"),
                                  "campaign.json model.fingerprint"),
        }
        for key, value in spec.variant.config().items():
            expected[f"variant.{key}"] = (csv_cell(value), row[key], "raw.csv")
        if spec.image_id and row["image_id"]:
            expected["image_id"] = (spec.image_id, row["image_id"], "raw.csv")
        for key, (ours, theirs, source) in expected.items():
            if ours != theirs:
                said_by = f"raw.csv {where}" if source == "raw.csv" else source
                self.add(base + "spec.json", key, f"{ours!r}, {said_by} says {theirs!r}")

    def _status(self, row: dict[str, str], where: str, base: str, status: TrialStatus) -> None:
        if status.trial_id != row["trial_id"]:
            self.add(base + "status.json", "trial_id", f"{status.trial_id!r}, raw.csv {where} says {row['trial_id']!r}")
        final = row["status"]
        allowed = final == status.status or final in _HOST_OVERRIDES or (final == "error" and status.status == "ok")
        if not allowed:
            self.add(base + "status.json", "status",
                     f"{status.status!r}, raw.csv {where} says {final!r} (the host only overrides with "
                     "timeout, oom, or error for a non-zero exit)")
        if str(status.completed) != row["completed"]:
            self.add(base + "status.json", "completed",
                     f"{status.completed}, raw.csv {where} column completed says {row['completed']}")

    def _manifest(self, d: dict[str, Any], row: dict[str, str], base: str, manifest: dict[str, Any]) -> None:
        variant: dict[str, Any] = manifest["variant"] if isinstance(manifest.get("variant"), dict) else {}
        expected = {
            "trial_id": (manifest.get("trial_id"), row["trial_id"], "raw.csv"),
            "variant.variant_id": (variant.get("variant_id"), row["variant_id"], "raw.csv"),
            "campaign_id": (manifest.get("campaign_id"), d.get("campaign_id"), "campaign.json"),
            "study_sha256": (manifest.get("study_sha256"), d.get("study_sha256"), "campaign.json"),
            "corpus_fingerprint": (manifest.get("corpus_fingerprint"), (d.get("corpus") or {}).get("fingerprint"),
                                   "campaign.json"),
            "model_fingerprint": (manifest.get("model_fingerprint"), (d.get("model") or {}).get("fingerprint"),
                                  "campaign.json"),
        }
        for key in ("repetition", "order_index", "attempt"):
            expected[key] = (csv_cell(manifest.get(key)), row[key], "raw.csv")
        for key, (ours, theirs, source) in expected.items():
            if ours != theirs:
                said_by = f"raw.csv row of {row['trial_id']}" if source == "raw.csv" else source
                self.add(base + "manifest.json", key, f"{ours!r}, {said_by} says {theirs!r}")

    def _predictions(self, row: dict[str, str], where: str, base: str, study: Study, reference: Reference) -> None:
        try:
            parsed = parse_predictions(self.root / "trials" / row["trial_id"] / "predictions.jsonl")
        except (ValueError, OverflowError, RecursionError) as exc:  # see the report: validate.py should absorb these
            self.add(base + "predictions.jsonl", "content", f"unparseable ({type(exc).__name__})")
            return
        check = check_pass(parsed, reference, study.quality.metric, study.quality.minimum)
        derived = {
            "observed_ids": str(check.observed_ids),
            "expected_ids": str(check.expected_ids),
            "ids_match": csv_cell(check.ids_match),
            "corpus_accepted": csv_cell(row["status"] == "ok" and check.accepted),
            "metric_value": csv_cell(check.metric_value),
        }
        for key, value in derived.items():
            if row[key] != value:
                self.add(base + "predictions.jsonl", key,
                         f"re-derived {value!r} from the file, raw.csv {where} column {key} says {row[key]!r}")

    def _trial_dirs(self, rows: list[dict[str, str]]) -> None:
        trials = self.root / "trials"
        if not trials.is_dir():
            return
        known = {row["trial_id"] for row in rows}
        children = sorted(trials.iterdir(), key=lambda p: p.name)
        if children and writer_active(self.root) and children[-1].name not in known:
            children = children[:-1]  # the trial running now: its row comes when it ends
        for child in children:
            if not child.is_dir():
                self.add(f"trials/{child.name}", "presence", "a file where only trial directories belong")
            elif child.name not in known:
                self.add(f"trials/{child.name}/", "raw row", "this trial directory has no row in raw.csv")

    def _events(self, rows: list[dict[str, str]]) -> None:
        events = read_event_lines(self.root / "events.jsonl")
        started: set[str] = set()
        ended: list[str] = []
        for number, event in enumerate(events, start=1):
            if not isinstance(event, dict) or "event" not in event or "at" not in event:
                self.add("events.jsonl", f"line {number}", "not a campaign event")
                continue
            if event["event"] == "trial_start":
                started.add(str(event.get("trial_id")))
            elif event["event"] == "trial_end":
                ended.append(str(event.get("trial_id")))
        known = {row["trial_id"] for row in rows}
        for number, row in enumerate(rows, start=1):
            if row["trial_id"] not in started:
                self.add("events.jsonl", "trial_start",
                         f"no trial_start event for raw.csv row {number} ({row['trial_id']})")
        for trial_id in ended:
            if trial_id not in known:
                self.add("events.jsonl", "trial_end", f"trial {trial_id!r} ended but has no row in raw.csv")

    def _event_times(self, d: dict[str, Any], rows: list[dict[str, str]]) -> None:
        """Events in time order, from the recorded set-up on, none in the future; each row inside its events."""
        stamped: list[tuple[int, dict[str, Any], datetime]] = []
        for number, event in enumerate(read_event_lines(self.root / "events.jsonl"), start=1):
            if isinstance(event, dict) and "at" in event:
                moment = _instant(event["at"])
                if moment is None:
                    self.add("events.jsonl", f"line {number}", f"time {str(event['at'])[:40]!r} is not ISO-8601")
                else:
                    stamped.append((number, event, moment))
        if not stamped:
            return
        started = _instant(d.get("setup_started_at"))
        first_number, first_event, first_at = stamped[0]
        if started is not None and (first_event.get("event") != "setup_start" or first_at != started):
            self.add("events.jsonl", f"line {first_number}",
                     f"{first_event.get('event')!r} at {first_event.get('at')}, campaign.json says the set-up "
                     f"started at {d.get('setup_started_at')}")
        later_than = datetime.now(UTC) + CLOCK_SKEW
        previous: tuple[int, datetime] | None = None
        for number, event, moment in stamped:
            if previous is not None and moment < previous[1] - _BACKWARDS:
                self.add("events.jsonl", f"line {number}",
                         f"{event['at']} is earlier than line {previous[0]} ({previous[1].isoformat()}): events are "
                         "appended in time order")
            if moment > later_than:
                self.add("events.jsonl", f"line {number}", f"{event['at']} is in the future")
            previous = (number, moment)
        starts = {str(e.get("trial_id")): m for _, e, m in stamped if e.get("event") == "trial_start"}
        ends = {str(e.get("trial_id")): m for _, e, m in stamped if e.get("event") == "trial_end"}
        for number, row in enumerate(rows, start=1):
            trial_id = row["trial_id"]
            began, ended = _instant(row.get("started_at")), _instant(row.get("ended_at"))
            if began is not None and trial_id in starts and began < starts[trial_id] - CLOCK_SKEW:
                self.add("events.jsonl", "trial_start",
                         f"raw.csv row {number} ({trial_id}) started at {row['started_at']}, before its trial_start "
                         f"event ({starts[trial_id].isoformat()})")
            if ended is not None and trial_id in ends and ended > ends[trial_id] + CLOCK_SKEW:
                self.add("events.jsonl", "trial_end",
                         f"raw.csv row {number} ({trial_id}) ended at {row['ended_at']}, after its trial_end "
                         f"event ({ends[trial_id].isoformat()})")

    def _verdicts(self, d: dict[str, Any], rows: list[dict[str, str]]) -> None:
        path = self.root / "verdicts.csv"
        if path.is_file():
            verdicts = read_csv_rows(path)
            if [v.get("trial_id") for v in verdicts] != [r["trial_id"] for r in rows]:
                self.add("verdicts.csv", "trial_id",
                         f"{len(verdicts)} verdict(s) whose trial ids differ from raw.csv's {len(rows)} row(s)")
            else:
                for number, (verdict, row) in enumerate(zip(verdicts, rows, strict=True), start=1):
                    for key in ("variant_id", "status", "expected_ids", "observed_ids", "ids_match"):
                        if verdict.get(key) != row[key]:
                            self.add("verdicts.csv", f"row {number} ({row['trial_id']}), column {key}",
                                     f"{verdict.get(key)!r}, raw.csv says {row[key]!r}")
        data = self.json("verdicts.json") if (self.root / "verdicts.json").is_file() else None
        if isinstance(data, dict) and data.get("campaign_id") != d.get("campaign_id"):
            self.add("verdicts.json", "campaign_id",
                     f"{data.get('campaign_id')!r}, campaign.json says {d.get('campaign_id')!r}")


def check_campaign(root: Path, prefix: str = "") -> list[Discrepancy]:
    """Every internal inconsistency of a campaign directory, in a fixed order (empty = consistent)."""
    checks = _Checks(root, prefix)
    checks.run()
    return checks.problems


@dataclass(frozen=True)
class IntegrityReport:
    """The evidence checks of one campaign directory (:func:`check_evidence`)."""

    root: Path
    discrepancies: tuple[Discrepancy, ...]

    @property
    def ok(self) -> bool:
        return not self.discrepancies

    def headline(self) -> str:
        first = str(self.discrepancies[0]) if self.discrepancies else "consistent"
        more = len(self.discrepancies) - 1
        return first + (f" (and {more} more)" if more > 0 else "")

    def require(self, allow_inconsistent: bool = False) -> str:
        """"" when consistent; with ``allow_inconsistent`` the banner line to print first; else UserError."""
        if self.ok:
            return ""
        if allow_inconsistent:
            return f"{INCONSISTENT_BANNER}{self.root}: {self.headline()}"
        raise UserError(
            f"the campaign directory is not consistent: {self.headline()}",
            str(self.root),
            "Reading commands check the evidence before using it. A trial left unrecorded by a host crash, or a "
            "cut last row, is repaired by `isocost run STUDY --out DIR --resume`; anything else was changed after "
            "it was written: restore it from a backup or bundle. --allow-inconsistent reads it anyway "
            "(forensics; the output says so first).",
        )

    def to_dict(self) -> dict[str, Any]:
        return {"consistent": self.ok, "discrepancies": [d.to_dict() for d in self.discrepancies]}


def check_evidence(root: Path) -> IntegrityReport:
    """The evidence checks every reading command runs (study, corpus index, row chain, trials, events)."""
    checks = _Checks(root, "", deep=False)
    checks.run()
    return IntegrityReport(root=root, discrepancies=tuple(checks.problems))


def require_evidence(root: Path, allow_inconsistent: bool = False) -> str:
    """Run :func:`check_evidence`: "" when consistent, the banner line with ``allow_inconsistent``, else raise."""
    return check_evidence(root).require(allow_inconsistent)


def refuse_less_evidence(previous_path: Path, rows_now: int, what: str) -> None:
    """Never replace ``previous_path`` (summary.json, verdicts.json) with one computed from fewer raw rows."""
    try:
        previous = read_json(previous_path)
    except (UserError, OSError, ValueError, RecursionError):
        return  # absent or unreadable: nothing to protect
    if not isinstance(previous, dict):
        return
    rows_before = previous.get("rows_total")
    if not isinstance(rows_before, int) and isinstance(previous.get("verdicts"), list):
        rows_before = len(previous["verdicts"])
    if not isinstance(rows_before, int) and isinstance(previous.get("variants"), list):
        rows_before = sum(int(v.get("attempts", 0)) for v in previous["variants"] if isinstance(v, dict))
    if isinstance(rows_before, int) and rows_now < rows_before:
        raise UserError(
            f"the existing {previous_path.name} was computed from {rows_before} raw row(s), raw.csv now gives "
            f"{rows_now}: the {what} would rest on less evidence than the one it replaces",
            str(previous_path),
            "raw.csv only grows. Restore the rows from a backup or bundle; the existing file is kept as it is.",
        )


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


#: Clocks may step back a little (NTP); more than this is an edited event.
_BACKWARDS = timedelta(seconds=2)


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
