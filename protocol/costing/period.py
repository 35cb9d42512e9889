"""The campaign period, measured: the time a campaign really held its host, from set-up to collection.

A pure function of the campaign's timestamps (``events.jsonl`` and the raw
table's ``started_at``/``ended_at``) plus the waiting periods the study
declares. Nothing here reads a file or a clock; the timestamps become
intervals in :mod:`protocol.costing.timeline`.

What counts (the period a rental must cover is the whole access window):

- **sessions**: each run of ``isocost run`` on the host, from ``setup_start``
  (or ``resume``) to ``trials_end``. A session that never logged
  ``trials_end`` (the host stopped) ends at its last timestamp.
- **phases** inside them, each from its ``<phase>_start``/``<phase>_end``
  events: ``setup`` (fingerprints, tokenization, schedule), every trial
  (launch, install/load inside the process or container, warm-up, pass,
  writing), and ``evaluation``/``export`` or any other phase when recorded.
  The trial's own clock (``started_at``/``ended_at`` in ``raw.csv``) is
  merged in, so a trial whose end event was lost still counts.
- **used** = the union of sessions and phases, overlaps counted once
  (:func:`protocol.costing.calendar.merge_intervals`). Host work between phases
  (gathering and validating each trial) is used time too.
- **idle** = span minus used: gaps between sessions (a campaign stopped and
  resumed later). Reported, not counted as used: a rental held across the
  gap would pay for it too, and the note says so.
- **waiting** = the study's declared ``deadline.waiting_h``.
- **needed** = used + waiting: the period a plan must cover.

Example::

    events = [{"at": "2026-11-02T09:00:00+00:00", "event": "setup_start"},
              {"at": "2026-11-02T09:30:00+00:00", "event": "setup_end"},
              {"at": "2026-11-02T09:30:00+00:00", "event": "trial_start", "trial_id": "t1"},
              {"at": "2026-11-02T11:30:00+00:00", "event": "trial_end", "trial_id": "t1"},
              {"at": "2026-11-02T11:30:00+00:00", "event": "trials_end"}]
    measure_period(events, [], waiting_h=10).needed_h == 12.5
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from protocol.costing.calendar import merge_intervals
from protocol.costing.timeline import Interval, host_sessions, iso_utc, parsed_events, phase_intervals, row_interval
from protocol.errors import UserError
from protocol.records.codec import Convert, Schema, options
from protocol.records.raw_record import RawRecord

# Version history: 1 = first format (PeriodComponent, CampaignPeriod).
SCHEMA_VERSION = 1

_HOUR_S = 3600.0


#: Phases reported even when absent, so a reader sees what was not recorded.
EXPECTED_PHASES = ("setup", "trial", "evaluation", "export")

_PHASE_SOURCES = {
    "setup": "events.jsonl setup_start → setup_end (`isocost run` freezing the study: fingerprints, "
             "tokenization, schedule)",
    "trial": "events.jsonl trial_start → trial_end per trial (launch, install/load in the fresh process or "
             "container, warm-up, pass, writing predictions), merged with raw.csv started_at → ended_at",
    "queue": "events.jsonl queue_start → queue_end per Slurm job (submitted → started): waiting in the cluster's "
             "queue, inside the trials above and counted there once; on a flat rental it is rented time",
}
#: Phases shown apart but counted inside another one (the queue lies inside its trial's span).
_INSIDE_OTHERS = frozenset({"queue"})
_NOT_RECORDED = {
    "evaluation": "not recorded: no evaluation_start/evaluation_end events (`isocost validate`/`summarize` log "
                  "none); evaluation inside each trial's gathering is counted under host work between phases",
    "export": "not recorded: no export_start/export_end events (bundle/export logs none)",
    "trial": "no trial timestamps in events.jsonl or raw.csv",
    "setup": "no setup_start/setup_end events",
}


#: A period's start and end: UTC with milliseconds (:func:`protocol.costing.timeline.iso_utc`).
_UTC_TIME = Convert(iso_utc, lambda text: datetime.fromisoformat(text).astimezone(UTC),
                    "an ISO 8601 time like \"2026-11-02T09:00:00.000Z\"")


@dataclass(frozen=True)
class PeriodComponent:
    """One part of the campaign period, in seconds, and where the figure comes from.

    ``seconds`` is ``None`` when the part was not recorded (``source`` says why);
    ``counted`` says whether it is part of ``needed_s``.

    Example: ``PeriodComponent("setup", 1800.0, "events.jsonl …", True).hours == 0.5``.
    """

    name: str
    seconds: float | None
    source: str
    counted: bool
    intervals: int = 0
    CODEC: ClassVar[Schema] = Schema("period component", SCHEMA_VERSION, derived=("hours",))

    @property
    def hours(self) -> float | None:
        """Example: 5400 seconds are ``1.5`` hours."""
        return None if self.seconds is None else self.seconds / _HOUR_S


@dataclass(frozen=True)
class CampaignPeriod:
    """A campaign's measured period. ``needed_s`` is what a rental plan must cover.

    ``used_s``/``needed_s`` are ``None`` when the campaign recorded no
    timestamps at all (``empty_reasons`` says so); no period is guessed.

    Example: one 30-minute setup and one 2-hour trial back to back, 10 h of
    declared waiting: ``used_h == 2.5``, ``needed_h == 12.5``.
    """

    start: datetime | None = field(metadata=options(convert=_UTC_TIME))
    end: datetime | None = field(metadata=options(convert=_UTC_TIME))
    span_s: float | None
    used_s: float | None
    idle_s: float | None
    waiting_s: float
    waiting_source: str
    needed_s: float | None
    overlap_s: float
    sessions: int
    resumes: int
    components: tuple[PeriodComponent, ...]
    notes: tuple[str, ...] = ()
    empty_reasons: dict[str, str] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("campaign period", SCHEMA_VERSION,
                                     derived=("span_h", "used_h", "idle_h", "waiting_h", "needed_h"))

    @property
    def used_h(self) -> float | None:
        """Example: 9000 used seconds are ``2.5`` hours."""
        return None if self.used_s is None else self.used_s / _HOUR_S

    @property
    def needed_h(self) -> float | None:
        """Example: 2.5 h used + 10 h waiting = ``12.5``."""
        return None if self.needed_s is None else self.needed_s / _HOUR_S

    @property
    def span_h(self) -> float | None:
        """First to last timestamp, idle gaps included. Example: ``2.5`` for a campaign without gaps."""
        return None if self.span_s is None else self.span_s / _HOUR_S

    @property
    def idle_h(self) -> float | None:
        """Gaps between sessions. Example: ``0.0`` for a campaign never stopped."""
        return None if self.idle_s is None else self.idle_s / _HOUR_S

    @property
    def waiting_h(self) -> float:
        """Example: ``10.0`` when the study declares ``waiting_h = 10``."""
        return self.waiting_s / _HOUR_S

    def component(self, name: str) -> PeriodComponent | None:
        """Example: ``period.component("setup").seconds == 1800.0``."""
        return next((c for c in self.components if c.name == name), None)



def measure_period(events: Sequence[Mapping[str, Any]], rows: Sequence[RawRecord], waiting_h: float | None,
                   waiting_source: str = "") -> CampaignPeriod:
    """Measure a campaign's period from its events and raw rows (raw.csv's, in file order), plus declared waiting.

    ``waiting_h`` is ``None`` when the study declares no deadline (no waiting is
    assumed, and ``waiting_source`` says so).

    Example: ``measure_period(events, rows, 10).needed_h == 12.5`` for the module example.
    """
    waiting = _waiting(waiting_h, waiting_source)
    parsed = parsed_events(events)
    notes: list[str] = []
    phases, unmatched = phase_intervals(parsed, notes)
    raw_spans = [span for index, row in enumerate(rows) if (span := row_interval(row, index, notes)) is not None]
    open_ended = _open_ended(unmatched, rows, notes)
    sessions, resumes = host_sessions(parsed, raw_spans, unmatched, notes)
    by_phase = _spans_by_phase(phases, raw_spans, open_ended, sessions)
    components = _phase_components(by_phase)
    all_phase_spans = [span for spans in by_phase.values() for span in spans]
    everything = all_phase_spans + sessions
    if not everything:
        return _without_timestamps(components, waiting, resumes, notes)

    phases_union_s = merge_intervals(all_phase_spans) if all_phase_spans else 0.0
    used_s = merge_intervals(everything)
    overlap_s = sum(c.seconds for c in components if c.counted and c.seconds is not None) - phases_union_s
    if overlap_s > 1e-6:
        notes.append(f"phases overlap by {overlap_s:.3f} s; the overlap is counted once")
    components.append(_between_phases(used_s - phases_union_s, len(sessions)))
    components.append(PeriodComponent("waiting (declared)", waiting.seconds, waiting.source, True))

    start = min(begin for begin, _ in everything)
    end = max(finish for _, finish in everything)
    span_s = (end - start).total_seconds()
    idle_s = max(span_s - used_s, 0.0)
    if idle_s > 60:
        notes.append(
            f"{idle_s / _HOUR_S:.2f} h passed between sessions (the campaign was stopped and resumed): not counted "
            "as used; a rental held across that gap pays for it too"
        )
    return CampaignPeriod(start=start, end=end, span_s=span_s, used_s=used_s, idle_s=idle_s, waiting_s=waiting.seconds,
                          waiting_source=waiting.source, needed_s=used_s + waiting.seconds,
                          overlap_s=max(overlap_s, 0.0), sessions=len(sessions), resumes=resumes,
                          components=tuple(components), notes=tuple(notes))


# -- the steps of measure_period ------------------------------------------------------------


@dataclass(frozen=True)
class _Waiting:
    seconds: float
    source: str


def _waiting(waiting_h: float | None, source: str) -> _Waiting:
    """The declared waiting in seconds and where it comes from (none without a deadline table)."""
    if waiting_h is None:
        return _Waiting(0.0, source or "the study declares no deadline table: no waiting period")
    if waiting_h < 0:
        raise UserError(f"waiting_h must be >= 0, got {waiting_h}", "deadline.waiting_h")
    return _Waiting(float(waiting_h) * _HOUR_S, source or "study deadline.waiting_h")


def _open_ended(unmatched: list[tuple[str, str, datetime]], rows: Sequence[RawRecord],
                notes: list[str]) -> list[tuple[str, str, datetime]]:
    """Phases started without an end event that no raw.csv clock covers: counted to the end of their session."""
    timed_trials = {r.trial_id for i, r in enumerate(rows) if row_interval(r, i) is not None}
    open_ended: list[tuple[str, str, datetime]] = []
    for phase, key, started in unmatched:
        label = f"{phase} {key}".strip()
        if phase == "trial" and key in timed_trials:
            notes.append(f"{label} started at {iso_utc(started)} without an end event (the host stopped?): its own "
                         "clock in raw.csv is counted instead")
        else:
            open_ended.append((phase, key, started))
            notes.append(f"{label} started at {iso_utc(started)} without an end event: counted up to the end of its "
                         "session")
    return open_ended


def _spans_by_phase(phases: dict[tuple[str, str], list[Interval]], raw_spans: list[Interval],
                    open_ended: list[tuple[str, str, datetime]], sessions: list[Interval]) -> dict[str, list[Interval]]:
    """Every phase's intervals: its event pairs, the trials' own clocks, and open-ended phases to session end."""
    by_phase: dict[str, list[Interval]] = {}
    for (phase, _key), spans in phases.items():
        by_phase.setdefault(phase, []).extend(spans)
    if raw_spans:
        by_phase.setdefault("trial", []).extend(raw_spans)
    # An end event lost with the host: count the phase to the end of the session that holds its start.
    for phase, _key, started in open_ended:
        close = next((end for begin, end in sessions if begin <= started <= end), started)
        by_phase.setdefault(phase, []).append((started, close))
    return by_phase


def _phase_components(by_phase: dict[str, list[Interval]]) -> list[PeriodComponent]:
    """One component per expected phase (not recorded ones say so), then any other phase, by name."""
    components: list[PeriodComponent] = []
    for phase in (*EXPECTED_PHASES, *sorted(set(by_phase) - set(EXPECTED_PHASES))):
        spans = by_phase.get(phase, [])
        name = "trials" if phase == "trial" else phase
        if not spans:
            components.append(PeriodComponent(name, None, _NOT_RECORDED.get(phase, "not recorded"), False))
            continue
        source = _PHASE_SOURCES.get(phase, f"events.jsonl {phase}_start → {phase}_end")
        components.append(PeriodComponent(name, merge_intervals(spans), source, phase not in _INSIDE_OTHERS,
                                          len(spans)))
    return components


def _between_phases(between_s: float, sessions: int) -> PeriodComponent:
    """Host work between phases: the sessions minus the phases (gathering, validating, bookkeeping)."""
    if not sessions:
        return PeriodComponent("host work between phases", None, "no session events (setup_start/resume)", False,
                               sessions)
    return PeriodComponent(
        "host work between phases", between_s,
        "sessions in events.jsonl (setup_start/resume → trials_end) minus the phases above: gathering and "
        "validating each trial, host bookkeeping", True, sessions,
    )


def _without_timestamps(components: list[PeriodComponent], waiting: _Waiting, resumes: int,
                        notes: list[str]) -> CampaignPeriod:
    """The period of a campaign that recorded no timestamp at all: every measured figure empty, with the reason."""
    reason = "no timestamps: events.jsonl is empty or missing and raw.csv has no started_at/ended_at"
    empty = {"used_s": reason, "needed_s": reason, "span_s": reason, "idle_s": reason}
    components.append(PeriodComponent("host work between phases", None, reason, False))
    components.append(PeriodComponent("waiting (declared)", waiting.seconds, waiting.source, True))
    return CampaignPeriod(start=None, end=None, span_s=None, used_s=None, idle_s=None, waiting_s=waiting.seconds,
                          waiting_source=waiting.source, needed_s=None, overlap_s=0.0, sessions=0, resumes=resumes,
                          components=tuple(components), notes=tuple(notes), empty_reasons=empty)
