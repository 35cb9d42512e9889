"""A campaign's timestamps as intervals: events.jsonl and raw.csv times → phases, trials, host sessions.

Every timestamp carries its UTC offset (:func:`parse_instant`); ``X_start``
pairs with the next ``X_end`` of the same trial id (:func:`phase_intervals`);
a session on the host runs from ``setup_start`` or ``resume`` to
``trials_end``, or to its last timestamp when the host stopped
(:func:`host_sessions`); a raw row's ``started_at``/``ended_at`` is the
trial's own clock (:func:`row_interval`). The period built from them is
:mod:`protocol.costing.period`.

Example: ``trial_intervals(events, rows)["t1"]`` lists trial t1's event interval and its own raw.csv clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from protocol.errors import UserError
from protocol.records.raw_record import RawRecord

#: Events that open a session on the host, and the one that closes it.
SESSION_OPENERS = ("setup_start", "resume")
SESSION_CLOSER = "trials_end"


Interval = tuple[datetime, datetime]


def parse_instant(text: str, where: str) -> datetime:
    """An ISO 8601 timestamp WITH a UTC offset, as an aware UTC datetime.

    Example: ``parse_instant("2026-11-02T09:00:00+01:00", "x").hour == 8``.
    """
    try:
        moment = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise UserError(
            f"timestamp {text!r} is not ISO 8601",
            where,
            "Campaign timestamps are written by `isocost run`; restore the file from the results bundle.",
        ) from None
    if moment.utcoffset() is None:
        raise UserError(
            f"timestamp {text!r} has no UTC offset",
            where,
            "A campaign timestamp must carry its offset (isocost writes UTC, e.g. 2026-11-02T09:00:00+00:00).",
        )
    return moment.astimezone(UTC)


def trial_intervals(events: Sequence[Mapping[str, Any]], rows: Sequence[RawRecord]) -> dict[str, list[Interval]]:
    """Every trial's intervals: its start/end events and its own clock from the raw table.

    Example: a trial with events 09:30 → 11:30 and raw times 09:31 → 11:29 yields both intervals
    (they merge to 2 h).
    """
    found: dict[str, list[Interval]] = {}
    for (phase, key), spans in phase_intervals(parsed_events(events), [])[0].items():
        if phase == "trial" and key:
            found.setdefault(key, []).extend(spans)
    for index, row in enumerate(rows):
        span = row_interval(row, index)
        if span is not None:
            found.setdefault(row.trial_id, []).append(span)
    return found


@dataclass(frozen=True)
class Event:
    """One line of events.jsonl, parsed: when, which event, for which trial id (``""`` for none), and its line."""

    at: datetime
    kind: str
    key: str
    index: int


def parsed_events(events: Sequence[Mapping[str, Any]]) -> list[Event]:
    """The events in time order (ties in file order); an event without ``at`` or ``event`` is refused."""
    parsed = []
    for index, event in enumerate(events):
        where = f"events.jsonl line {index + 1}"
        if "at" not in event or "event" not in event:
            raise UserError("event lacks 'at' or 'event'", where, "Restore events.jsonl from the results bundle.")
        parsed.append(Event(parse_instant(event["at"], where), str(event["event"]),
                             str(event.get("trial_id", "") or ""), index))
    parsed.sort(key=lambda e: (e.at, e.index))
    return parsed


def phase_intervals(
    events: list[Event], notes: list[str]
) -> tuple[dict[tuple[str, str], list[Interval]], list[tuple[str, str, datetime]]]:
    """Pair ``X_start`` with the next ``X_end`` of the same key (trial id)."""
    open_: dict[tuple[str, str], datetime] = {}
    spans: dict[tuple[str, str], list[Interval]] = {}
    for event in events:
        if event.kind in SESSION_OPENERS[1:] or event.kind == SESSION_CLOSER:
            continue
        if event.kind.endswith("_start"):
            key = (event.kind.removesuffix("_start"), event.key)
            if key in open_:
                notes.append(f"{key[0]} {key[1]} started twice without an end; the first start is kept".strip())
                continue
            open_[key] = event.at
        elif event.kind.endswith("_end"):
            key = (event.kind.removesuffix("_end"), event.key)
            if key not in open_:
                notes.append(f"{event.kind} {event.key} at {iso_utc(event.at)} has no start event; ignored".replace(
                    "  ", " "))
                continue
            spans.setdefault(key, []).append((open_.pop(key), event.at))
    unmatched = [(phase, key, at) for (phase, key), at in open_.items()]
    return spans, unmatched


def host_sessions(
    events: list[Event], raw_spans: list[Interval], unmatched: list[tuple[str, str, datetime]], notes: list[str]
) -> tuple[list[Interval], int]:
    """Sessions of the host CLI: opener → trials_end; a session cut short ends at its last timestamp."""
    stamps = sorted([e.at for e in events] + [end for _, end in raw_spans] + [at for _, _, at in unmatched])
    sessions: list[Interval] = []
    resumes = sum(1 for e in events if e.kind == "resume")
    current: datetime | None = None
    for event in events:
        if event.kind in SESSION_OPENERS:
            if current is not None:
                last = max((s for s in stamps if current <= s < event.at), default=current)
                sessions.append((current, last))
                notes.append(f"session started {iso_utc(current)} has no trials_end (the host stopped); it is counted "
                             f"up to its last timestamp {iso_utc(last)}")
            current = event.at
        elif event.kind == SESSION_CLOSER and current is not None:
            sessions.append((current, event.at))
            current = None
    if current is not None:
        last = max((s for s in stamps if s >= current), default=current)
        sessions.append((current, last))
        notes.append(f"the last session (from {iso_utc(current)}) has no trials_end: the campaign is unfinished or the "
                     f"host stopped; counted up to its last timestamp {iso_utc(last)}")
    return sessions, resumes


def row_interval(row: RawRecord, index: int, notes: list[str] | None = None) -> Interval | None:
    """A raw row's own clock (``started_at`` → ``ended_at``); ``None`` when absent or running backwards.

    ``index`` is the row's place among the data rows (0 is raw.csv line 2, after the header).
    """
    started, ended = row.started_at, row.ended_at
    if not started or not ended:
        return None
    where = f"raw.csv row {index + 2} ({row.trial_id})"
    begin, end = parse_instant(started, where), parse_instant(ended, where)
    if end < begin:
        if notes is not None:
            notes.append(f"{where}: ended_at is before started_at (clock change?); not counted")
        return None
    return begin, end


def iso_utc(moment: datetime | None) -> str | None:
    """Example: ``iso_utc(datetime(2026, 11, 2, 9, tzinfo=UTC)) == "2026-11-02T09:00:00.000Z"``."""
    if moment is None:
        return None
    spec = "milliseconds" if moment.microsecond % 1000 == 0 else "microseconds"
    return moment.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")


