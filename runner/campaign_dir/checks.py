"""The consistency checks of one campaign directory: :class:`CampaignChecks`, the unit every reader calls.

Two depths. The evidence checks (``deep=False``; what ``validate``, ``summarize``, ``decide`` and
``period`` run before they read anything):

- ``study.toml`` hashes to the ``study_sha256`` of ``campaign.json``;
- ``corpus_index.csv`` hashes to the ``corpus.index_sha256`` recorded at the start, and, where the
  corpus file is readable with its frozen fingerprint, holds exactly its ids and labels;
- ``raw.csv``: every row matches its chain digest (:mod:`runner.campaign_dir.raw_table`), no cut last row,
  trial ids safe and unique;
- trial directories ↔ rows: each row has its directory, each directory its row;
- each row's trial files (spec, manifest, status, predictions, batches) hash to the sha256 its row sealed
  (:mod:`runner.campaign_dir.seal`);
- ``catalog.csv`` hashes to the ``catalog.sha256`` of ``campaign.json`` (a deleted catalog is named: the
  decision is never priced from another one without a word);
- ``events.jsonl``: every line chained, none cut, in time order, starting with the set-up the campaign
  recorded, every row's trial bracketed by its own start and end events, nothing in the future;
- ``rentals.jsonl``: every line a chained rental anchored to this campaign, none cut
  (:mod:`runner.campaign_dir.rentals`).

The deep checks (``deep=True``; ``bundle`` and ``verify``) add the schedule, every trial's spec,
status, manifest and predictions (:mod:`runner.campaign_dir.trial_checks`), verdicts and summary.
:mod:`runner.campaign_dir.integrity` turns the findings into a report a reader can refuse on.

Example::

    checks = CampaignChecks(Path("results/quick"), deep=False)
    checks.run()
    checks.problems          # [] when consistent, else Discrepancy(file, field, message), first named first
"""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from protocol.corpus import read_corpus
from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path, sha256_bytes
from protocol.io.paths import check_safe_name
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignEvent, CampaignRecord, InputFacts, VerdictsRecord
from protocol.records.summary import SummaryRecord
from protocol.study.load import Study, parse_study, study_from_bytes
from protocol.study.schedule import Slot
from protocol.tasks import Task, index_fields, study_task
from runner.campaign_dir.findings import MALFORMED, Findings
from runner.campaign_dir.layout import EVENTS_FILE, FROZEN_CATALOG, read_csv_rows, read_events, writer_active
from runner.campaign_dir.raw_format import declared_format
from runner.campaign_dir.raw_table import RawTable, scan
from runner.campaign_dir.rentals import RENTALS_FILE, read_rentals
from runner.campaign_dir.seal import SEAL_COLUMNS, seal_findings, sealed_outputs
from runner.campaign_dir.slots import planned_slots, slot_of
from runner.campaign_dir.trial_checks import TrialChecks

#: Clocks of a remote host or a container may differ from the host CLI's by this much.
CLOCK_SKEW = timedelta(minutes=10)
#: Clocks may step back a little (NTP); more than this is an edited event.
_BACKWARDS = timedelta(seconds=2)


class CampaignChecks(Findings):
    """Collects the discrepancies of one campaign directory, in a fixed order (the first is the one named).

    ``prefix`` is prepended to every file name (``campaign/`` inside a bundle); ``deep=False`` runs the
    evidence checks only (see the module docstring).
    """

    def __init__(self, root: Path, prefix: str = "", deep: bool = True, *, raw_data: bytes | None = None,
                 study: Study | None = None, frozen_study: bool = False) -> None:
        super().__init__(root, prefix)
        self.deep = deep
        self.output_files: tuple[str, ...] | None = None
        #: raw.csv's bytes, read once by whoever opens the campaign (:mod:`runner.campaign_dir.campaign`).
        self.raw_data = raw_data
        #: The study (given: the one the caller parsed, used when the frozen copy hashes to it; else parsed from the
        #: frozen copy, with its relative paths where the original lived, or, ``frozen_study``, where it is now).
        self.study = study
        self.frozen_study = frozen_study
        #: raw.csv as the checks read it (None: missing or its chain broken).
        self.table: RawTable | None = None
        #: campaign.json as the checks read it (None: missing or malformed).
        self.campaign: CampaignRecord | None = None

    def run(self) -> None:
        campaign = self.campaign = self.record("campaign.json", CampaignRecord)
        if campaign is None:
            return
        # A raw format this isocost does not read is no discrepancy: nothing here can check it (UserError).
        declared_format(campaign.raw_schema_version, str(self.root / "campaign.json"), campaign.isocost_version)
        try:
            self._run(campaign)
        except MALFORMED as exc:
            self.add("campaign.json", "content", f"malformed campaign ({type(exc).__name__}: {str(exc)[:200]})")

    def _run(self, campaign: CampaignRecord) -> None:
        study = self.study = self._study(campaign)
        self.output_files = sealed_outputs(study) if study is not None else None
        slots = planned_slots(campaign)
        reference = self._reference(study, self._corpus_index(campaign, study))
        if self.deep:
            self._schedule(slots)
        rows = self._raw(campaign, slots, study, reference)
        if rows is None:
            return
        self._trial_dirs(rows)
        self._catalog(campaign)
        events = self._event_chain()
        if events is not None:
            self._events(rows, events)
            self._event_times(campaign, rows, events)
        self._rentals()
        if not self.deep:
            return
        self._verdicts(campaign, rows)
        summary = self.record("summary.json", SummaryRecord, "a summary")
        if summary is not None:
            for key in ("campaign_id", "study_sha256"):
                recorded = getattr(campaign, key)
                if getattr(summary, key) != recorded:
                    self.add("summary.json", key, f"{getattr(summary, key)!r}, campaign.json says {recorded!r}")

    def _study(self, campaign: CampaignRecord) -> Study | None:
        path = self.root / "study.toml"
        if not path.is_file():
            self.add("study.toml", "presence", "missing")
            return None
        data = path.read_bytes()
        actual = sha256_bytes(data)
        if actual != campaign.study_sha256:
            self.add("study.toml", "sha256",
                     f"the file hashes to {actual}, campaign.json field study_sha256 says {campaign.study_sha256}")
        if self.study is not None and self.study.sha256 == actual:
            return self.study  # the caller's parse of these very bytes
        try:
            if self.frozen_study:
                return study_from_bytes(data, path)
            parsed = tomllib.loads(data.decode("utf-8"))
            return parse_study(parsed, path=Path(campaign.study_path or path), sha256=actual)
        except MALFORMED as exc:
            self.add("study.toml", "content", f"not a valid study: {str(exc)[:300]}")
            return None

    @staticmethod
    def _reference(study: Study | None, index_rows: list[dict[str, str]] | None) -> Any:
        """What the study's task checks a pass against (None: the study or the index cannot be read)."""
        if study is None or index_rows is None:
            return None
        try:
            return study_task(study).reference(index_rows, study)
        except MALFORMED:
            return None  # the index's own findings name what is wrong with it

    def _corpus_index(self, campaign: CampaignRecord, study: Study | None = None) -> list[dict[str, str]] | None:
        path = self.root / "corpus_index.csv"
        if not path.is_file():
            self.add("corpus_index.csv", "presence", "missing")
            return None
        rows = self._csv(path)
        if rows is None:
            return None
        ids = [row.get("id", "") for row in rows]
        if len(set(ids)) != len(ids):
            self.add("corpus_index.csv", "id", "an id appears twice")
        corpus = campaign.corpus
        expected = corpus.inputs if corpus is not None else None
        if expected != len(rows):
            self.add("corpus_index.csv", "rows", f"{len(rows)} inputs, campaign.json corpus.inputs says {expected}")
        recorded = corpus.index_sha256 if corpus is not None else None
        if recorded is not None and fingerprint_path(path) != recorded:
            self.add("corpus_index.csv", "sha256", f"the file hashes to {fingerprint_path(path)}, campaign.json "
                     f"corpus.index_sha256 (frozen at the start) says {recorded}")
        if corpus is not None:
            self._corpus_labels(rows, corpus, study_task(study) if study is not None else None)
        return rows

    def _corpus_labels(self, rows: list[dict[str, str]], corpus: InputFacts, task: Task | None) -> None:
        """Where the corpus is readable with its frozen fingerprint: the index holds its ids, labels and the
        task's own fields (a generation's references)."""
        source = Path(corpus.path or "")
        if not source.is_absolute() or not source.is_file() or fingerprint_path(source) != corpus.fingerprint:
            return  # not on this host (a bundle verified elsewhere): the index's own hash is the check
        fields = task.corpus_fields if task is not None else ()
        records = read_corpus(source, require_label=False, extra_fields=fields)  # a label "" where none
        if len(records) != len(rows):
            self.add("corpus_index.csv", "rows", f"{len(rows)} inputs, the corpus {source} holds {len(records)}")
            return
        for number, (row, record) in enumerate(zip(rows, records, strict=True), start=1):
            for key, value in (("id", record.id), ("label", record.label),
                               *zip(fields, index_fields(record, fields), strict=True)):
                if row.get(key) != value:
                    self.add("corpus_index.csv", f"row {number}, column {key}",
                             f"{row.get(key)!r}, the frozen corpus {source} says {value!r}")
                    return

    def _csv(self, path: Path) -> list[dict[str, str]] | None:
        """The rows of a CSV file of the directory; None (named) when it cannot be read as isocost wrote it."""
        try:
            return read_csv_rows(path)
        except UserError as exc:
            line = exc.where.rpartition(", ")[2] if ", line " in exc.where else "content"
            self.add(path.name, line, exc.what)
            return None

    def _schedule(self, slots: tuple[Slot, ...]) -> None:
        path = self.root / "schedule.csv"
        if not path.is_file():
            self.add("schedule.csv", "presence", "missing")
            return
        rows = self._csv(path)
        if rows is None:
            return
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
        self, campaign: CampaignRecord, slots: tuple[Slot, ...], study: Study | None, reference: Any
    ) -> list[RawRecord] | None:
        """The rows with a safe, unique trial id, each checked; None when raw.csv is missing or unreadable."""
        path = self.root / "raw.csv"
        if not path.is_file():
            self.add("raw.csv", "presence", "missing")
            return None
        try:
            table = self.table = scan(path, data=self.raw_data)
        except UserError as exc:
            self.add("raw.csv", "chain", exc.what)
            return None
        if table.partial:
            self.add("raw.csv", f"row {table.partial_row}",
                     f"cut while it was written (from byte {table.intact_bytes}): `isocost run STUDY --out DIR "
                     "--resume` keeps its bytes in raw.csv.partial-N and records that trial again")
        slots_by_id = {slot.trial_id: slot for slot in slots}
        trials = TrialChecks(self, campaign, study, reference)
        seen: set[str] = set()
        good: list[RawRecord] = []
        for number, row in enumerate(table.rows, start=1):
            where = f"row {number} ({row.trial_id})"
            try:
                check_safe_name(row.trial_id, what="trial id")
            except UserError as exc:
                self.add("raw.csv", f"{where}, column trial_id", exc.what)
                continue
            if row.trial_id in seen:
                self.add("raw.csv", f"{where}, column trial_id", "this trial id has an earlier row")
                continue
            seen.add(row.trial_id)
            good.append(row)
            present = self._trial_dir(row, where)
            if self.deep:  # what differs, field by field, first; then that the file is not the one sealed
                self._raw_row(row, where, slots_by_id)
                if present:
                    trials.check(row, number)
            if present:
                self._sealed(row, where)
        return good

    def _trial_dir(self, row: RawRecord, where: str) -> bool:
        """The row's trial directory exists (False: named here; the checks of its files would only repeat it)."""
        trial_dir = self.root / "trials" / row.trial_id
        if not trial_dir.is_dir() or trial_dir.is_symlink():
            self.add(f"trials/{row.trial_id}/", "presence", f"raw.csv {where} names this trial, its directory is "
                     + ("a symbolic link" if trial_dir.is_symlink() else "missing"))
            return False
        return True

    def _sealed(self, row: RawRecord, where: str) -> None:
        """Each sealed file of the row's trial is the one the row recorded (:mod:`runner.campaign_dir.seal`)."""
        recorded = {column: row.cell(column) for column in SEAL_COLUMNS}
        for name, message in seal_findings(self.root / "trials" / row.trial_id, recorded, self.output_files):
            self.add(f"trials/{row.trial_id}/{name}", "sha256", f"{message} (raw.csv {where})")

    def _catalog(self, campaign: CampaignRecord) -> None:
        """catalog.csv is the catalog campaign.json froze (the decision and the period price from it)."""
        facts = campaign.catalog
        if facts is None:
            return
        path = self.root / facts.snapshot
        if facts.snapshot != FROZEN_CATALOG:
            self.add("campaign.json", "catalog.snapshot", f"{facts.snapshot!r}, isocost freezes {FROZEN_CATALOG!r}")
            return
        if not path.is_file() or path.is_symlink():
            self.add(FROZEN_CATALOG, "presence", "missing (or not a regular file): campaign.json records the catalog "
                     f"frozen at the start ({facts.sha256}); nothing is priced from another one without a word")
            return
        actual = fingerprint_path(path)
        if actual != facts.sha256:
            self.add(FROZEN_CATALOG, "sha256", f"the file hashes to {actual}, campaign.json field catalog.sha256 "
                     f"(frozen at the start) says {facts.sha256}")

    def _event_chain(self) -> tuple[CampaignEvent, ...] | None:
        """events.jsonl's events, their lines chained and none cut; None when a line is not a chained event (the
        event checks would only repeat it)."""
        try:
            events, read = read_events(self.root / EVENTS_FILE)
        except UserError as exc:
            line = exc.where.rpartition(", ")[2] if ", line " in exc.where else "content"
            self.add(EVENTS_FILE, line, exc.what)
            return None
        if read.cut:
            self.add(EVENTS_FILE, f"line {read.cut_line}",
                     f"cut while it was written ({len(read.cut)} bytes, no line end): `isocost run STUDY --out DIR "
                     "--resume` keeps its bytes in events.jsonl.partial-N")
        return events

    def _rentals(self) -> None:
        try:
            read_rentals(self.root)
        except UserError as exc:
            line = exc.where.rpartition(", ")[2] if ", line " in exc.where else "content"
            self.add(RENTALS_FILE, line, exc.what)

    def _raw_row(self, row: RawRecord, where: str, slots_by_id: dict[str, Slot]) -> None:
        """A row against its planned slot, and where its predictions must be."""
        slot, attempt = slot_of(row.trial_id, slots_by_id)
        if slot is None:
            self.add("raw.csv", f"{where}, column trial_id", "no planned slot of schedule.csv has this trial id")
        else:
            planned = {"variant_id": slot.variant_id, "repetition": str(slot.repetition),
                       "order_index": str(slot.order_index), "attempt": str(attempt)}
            for key, value in planned.items():
                if row.cell(key) != value:
                    self.add("raw.csv", f"{where}, column {key}", f"{row.cell(key)!r}, schedule.csv gives {value!r}")
        expected_path = f"trials/{row.trial_id}/{(self.output_files or ('predictions.jsonl',))[0]}"
        if row.predictions_path != expected_path:
            self.add("raw.csv", f"{where}, column predictions_path",
                     f"{row.predictions_path!r}, expected {expected_path!r}")

    def _trial_dirs(self, rows: list[RawRecord]) -> None:
        trials = self.root / "trials"
        if not trials.is_dir():
            return
        known = {row.trial_id for row in rows}
        children = sorted(trials.iterdir(), key=lambda p: p.name)
        if children and writer_active(self.root) and children[-1].name not in known:
            children = children[:-1]  # the trial running now: its row comes when it ends
        for child in children:
            if not child.is_dir():
                self.add(f"trials/{child.name}", "presence", "a file where only trial directories belong")
            elif child.name not in known:
                self.add(f"trials/{child.name}/", "raw row", "this trial directory has no row in raw.csv")

    def _events(self, rows: list[RawRecord], events: tuple[CampaignEvent, ...]) -> None:
        started: set[str] = set()
        ended: list[str] = []
        for event in events:
            if event.event == "trial_start":
                started.add(str(event.trial_id))
            elif event.event == "trial_end":
                ended.append(str(event.trial_id))
        known = {row.trial_id for row in rows}
        for number, row in enumerate(rows, start=1):
            if row.trial_id not in started:
                self.add("events.jsonl", "trial_start",
                         f"no trial_start event for raw.csv row {number} ({row.trial_id})")
        for trial_id in ended:
            if trial_id not in known:
                self.add("events.jsonl", "trial_end", f"trial {trial_id!r} ended but has no row in raw.csv")

    def _event_times(self, campaign: CampaignRecord, rows: list[RawRecord], events: tuple[CampaignEvent, ...]) -> None:
        """Events in time order, from the recorded set-up on, none in the future; each row inside its events."""
        stamped: list[tuple[int, CampaignEvent, datetime]] = []
        for number, event in enumerate(events, start=1):
            moment = instant(event.at)
            if moment is None:
                self.add("events.jsonl", f"line {number}", f"time {event.at[:40]!r} is not ISO-8601")
            else:
                stamped.append((number, event, moment))
        if not stamped:
            return
        started = instant(campaign.setup_started_at)
        first_number, first_event, first_at = stamped[0]
        if started is not None and (first_event.event != "setup_start" or first_at != started):
            self.add("events.jsonl", f"line {first_number}",
                     f"{first_event.event!r} at {first_event.at}, campaign.json says the set-up "
                     f"started at {campaign.setup_started_at}")
        later_than = datetime.now(UTC) + CLOCK_SKEW
        previous: tuple[int, datetime] | None = None
        for number, event, moment in stamped:
            if previous is not None and moment < previous[1] - _BACKWARDS:
                self.add("events.jsonl", f"line {number}",
                         f"{event.at} is earlier than line {previous[0]} ({previous[1].isoformat()}): events are "
                         "appended in time order")
            if moment > later_than:
                self.add("events.jsonl", f"line {number}", f"{event.at} is in the future")
            previous = (number, moment)
        self._rows_inside_events(stamped, rows)

    def _rows_inside_events(self, stamped: list[tuple[int, CampaignEvent, datetime]], rows: list[RawRecord]) -> None:
        starts = {str(e.trial_id): m for _, e, m in stamped if e.event == "trial_start"}
        ends = {str(e.trial_id): m for _, e, m in stamped if e.event == "trial_end"}
        for number, row in enumerate(rows, start=1):
            trial_id = row.trial_id
            began, ended = instant(row.started_at), instant(row.ended_at)
            if began is not None and trial_id in starts and began < starts[trial_id] - CLOCK_SKEW:
                self.add("events.jsonl", "trial_start",
                         f"raw.csv row {number} ({trial_id}) started at {row.started_at}, before its trial_start "
                         f"event ({starts[trial_id].isoformat()})")
            if ended is not None and trial_id in ends and ended > ends[trial_id] + CLOCK_SKEW:
                self.add("events.jsonl", "trial_end",
                         f"raw.csv row {number} ({trial_id}) ended at {row.ended_at}, after its trial_end "
                         f"event ({ends[trial_id].isoformat()})")

    def _verdicts(self, campaign: CampaignRecord, rows: list[RawRecord]) -> None:
        path = self.root / "verdicts.csv"
        verdicts = self._csv(path) if path.is_file() else None
        if verdicts is not None:
            if [v.get("trial_id") for v in verdicts] != [r.trial_id for r in rows]:
                self.add("verdicts.csv", "trial_id",
                         f"{len(verdicts)} verdict(s) whose trial ids differ from raw.csv's {len(rows)} row(s)")
            else:
                for number, (verdict, row) in enumerate(zip(verdicts, rows, strict=True), start=1):
                    for key in ("variant_id", "status", "expected_ids", "observed_ids", "ids_match"):
                        if verdict.get(key) != row.cell(key):
                            self.add("verdicts.csv", f"row {number} ({row.trial_id}), column {key}",
                                     f"{verdict.get(key)!r}, raw.csv says {row.cell(key)!r}")
        record = (self.record("verdicts.json", VerdictsRecord, "a verdicts record")
                  if (self.root / "verdicts.json").is_file() else None)
        if record is not None and record.campaign_id != campaign.campaign_id:
            self.add("verdicts.json", "campaign_id",
                     f"{record.campaign_id!r}, campaign.json says {campaign.campaign_id!r}")


def instant(value: Any) -> datetime | None:
    """An ISO-8601 time as an aware datetime (UTC when it names no zone); None when empty or not a time."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
