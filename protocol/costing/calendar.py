"""Access windows on a real calendar: time zones and DST through ``zoneinfo``.

The needed period is the whole access window, from rental setup to artifact
collection. Elapsed time is computed on aware datetimes in UTC, so a window
that crosses a DST change counts the hours that really pass. A local time
that never happens (spring-forward gap) or happens twice (fall-back overlap)
is refused until the user says which instant is meant.

Example: ``access_window("2026-11-02T09:00", "2026-11-06T09:00", "Europe/Paris", None)``
lasts 96 hours. Which plan lengths cover it is :mod:`protocol.costing.coverage`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from protocol.errors import UserError
from protocol.records.codec import Convert, Schema, options

# Version history: 1 = first format (OffsetChange, Window; PlanFit, Coverage in protocol.costing.coverage).
SCHEMA_VERSION = 1

_HOUR_S = 3600
_SCAN_STEP_S = _HOUR_S  # offset changes are located by hourly samples, then bisection

#: How a window writes its times (minutes only when the seconds are zero; UTC as Z) and its UTC offsets; read
#: back, a time keeps the offset written with it.
_TIME = options(convert=Convert(lambda moment: _iso(moment), datetime.fromisoformat, "an ISO 8601 time"))
_UTC_TIME = options(convert=Convert(lambda moment: _iso(moment),
                                    lambda text: datetime.fromisoformat(text).astimezone(UTC), "an ISO 8601 time"))
_OFFSET = options(convert=Convert(lambda offset: format_offset(offset), lambda text: parse_offset(text),
                                  "a UTC offset like \"+01:00\""))


@dataclass(frozen=True)
class OffsetChange:
    """A UTC-offset change inside a window (DST start or end, or a zone's new standard time).

    Example: Europe/Paris on 2026-10-25 has ``at_utc`` 01:00Z, ``+02:00`` before, ``+01:00`` after.
    """

    at_utc: datetime = field(metadata=_UTC_TIME)
    offset_before: timedelta = field(metadata=_OFFSET)
    offset_after: timedelta = field(metadata=_OFFSET)
    kind: str  # "dst_starts", "dst_ends" or "standard_offset_change"
    CODEC: ClassVar[Schema] = Schema("offset change", SCHEMA_VERSION, extra=lambda change: {
        "wall_before": _iso(change.wall_before), "wall_after": _iso(change.wall_after)})

    @property
    def wall_before(self) -> datetime:
        """Example: ``change.wall_before.hour == 3`` for the Paris fall-back of 2026."""
        return (self.at_utc + self.offset_before).replace(tzinfo=None)

    @property
    def wall_after(self) -> datetime:
        """Example: ``change.wall_after.hour == 2`` for the Paris fall-back of 2026."""
        return (self.at_utc + self.offset_after).replace(tzinfo=None)


@dataclass(frozen=True)
class Window:
    """An access window: real elapsed time, wall-clock time and the offset changes inside it.

    Example: ``access_window("2026-10-24T09:00", "2026-10-26T09:00", "Europe/Paris", None)``
    has ``elapsed_h == 49`` and ``wall_clock_h == 48``.
    """

    tz: str | None
    start: datetime = field(metadata=_TIME)
    end: datetime = field(metadata=_TIME)
    elapsed_s: float
    wall_clock_s: float
    offset_start: timedelta = field(metadata=_OFFSET)
    offset_end: timedelta = field(metadata=_OFFSET)
    offset_changes: tuple[OffsetChange, ...]
    notes: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("window", SCHEMA_VERSION, derived=("elapsed_h", "wall_clock_h", "dst_change"),
                                     extra=lambda window: {"start_utc": _iso(window.start.astimezone(UTC)),
                                                           "end_utc": _iso(window.end.astimezone(UTC))})

    @property
    def elapsed_h(self) -> float:
        """Example: ``window.elapsed_h == 96.0`` for Monday 09:00 to Friday 09:00."""
        return self.elapsed_s / _HOUR_S

    @property
    def wall_clock_h(self) -> float:
        """Example: ``window.wall_clock_h == 48.0`` for Saturday 09:00 to Monday 09:00."""
        return self.wall_clock_s / _HOUR_S

    @property
    def dst_change(self) -> bool:
        """Example: ``window.dst_change is False`` when the offset stays the same throughout."""
        return bool(self.offset_changes) or self.offset_start != self.offset_end







def load_zone(tz: str) -> ZoneInfo:
    """An IANA time zone, or a UserError naming the unknown one.

    Example: ``load_zone("Europe/Paris").key == "Europe/Paris"``.
    """
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UserError(f"unknown time zone {tz!r}", "tz",
                        "Use an IANA zone name such as Europe/Paris, America/New_York or UTC.") from None


def access_window(start: str | datetime, end: str | datetime, tz: str | None, fold: int | None = None) -> Window:
    """Measure the access window from ``start`` to ``end`` on a real calendar.

    Naive times are read in ``tz``; a time with an explicit UTC offset needs no ``fold``. ``fold`` (0 = first, 1 =
    second occurrence) picks the instant of a local time that happens twice when clocks fall back.

    Example: ``access_window("2026-10-24T09:00", "2026-10-26T09:00", "Europe/Paris").elapsed_h``
    is ``49.0``.
    """
    if fold is not None and (isinstance(fold, bool) or fold not in (0, 1)):
        raise UserError(f"fold must be 0 or 1, got {fold!r}", "fold", "Use --fold 0 or --fold 1.")
    zone = load_zone(tz) if tz is not None else None
    notes: list[str] = []
    start_at = _resolve(start, zone, fold, "start", notes)
    end_at = _resolve(end, zone, fold, "end", notes)
    start_utc = start_at.astimezone(UTC)
    end_utc = end_at.astimezone(UTC)
    if end_utc <= start_utc:
        relation = "equals" if end_utc == start_utc else "is before"
        raise UserError(f"the window end {_iso(end_at)} {relation} its start {_iso(start_at)}", "end",
                        "Give an end after the start (the whole access window, setup to artifact collection).")
    offset_start = _offset(start_at)
    offset_end = _offset(end_at)
    if zone is not None:
        changes = tuple(_offset_changes(start_utc, end_utc, zone))
    else:
        changes = ()
        if offset_start != offset_end:
            notes.append(
                f"start and end carry different UTC offsets ({format_offset(offset_start)}, "
                f"{format_offset(offset_end)}) and no time zone is named: the change itself "
                "cannot be located; pass --tz to locate it"
            )
    wall = end_at.replace(tzinfo=None) - start_at.replace(tzinfo=None)
    return Window(tz=tz, start=start_at, end=end_at, elapsed_s=(end_utc - start_utc).total_seconds(),
                  wall_clock_s=wall.total_seconds(), offset_start=offset_start, offset_end=offset_end,
                  offset_changes=changes, notes=tuple(notes))




def merge_intervals(intervals: Iterable[tuple[datetime, datetime]]) -> float:
    """Total seconds covered by ``intervals``, overlaps counted once.

    Intervals are (start, end) pairs of aware datetimes; naive ones or an end
    before its start raise ``ValueError`` (a bug in the caller, not a user mistake).

    Example: 09:00-12:00 and 11:00-13:00 on one day merge to ``14400.0`` seconds.
    """
    spans: list[tuple[datetime, datetime]] = []
    for start, end in intervals:
        if start.utcoffset() is None or end.utcoffset() is None:
            raise ValueError(f"naive datetime in interval ({start!r}, {end!r}): give a time zone")
        if end < start:
            raise ValueError(f"interval ends before it starts: ({start!r}, {end!r})")
        spans.append((start.astimezone(UTC), end.astimezone(UTC)))
    spans.sort()
    total = timedelta(0)
    current: tuple[datetime, datetime] | None = None
    for start, end in spans:
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = (start, end)
        elif end > current[1]:
            current = (current[0], end)
    if current is not None:
        total += current[1] - current[0]
    return total.total_seconds()


def format_offset(offset: timedelta) -> str:
    """UTC offset as ``±HH:MM`` (``:SS`` when needed).

    Example: ``format_offset(timedelta(hours=1)) == "+01:00"``.
    """
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    hours, rest = divmod(seconds, _HOUR_S)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}"
    return text + (f":{secs:02d}" if secs else "")


def parse_offset(text: str) -> timedelta:
    """Inverse of format_offset. Example: ``parse_offset("+01:00") == timedelta(hours=1)``."""
    sign = -1 if text.startswith("-") else 1
    parts = [int(part) for part in text.lstrip("+-").split(":")]
    parts += [0] * (3 - len(parts))
    return sign * timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2])


def format_hours(hours: float) -> str:
    """Hours, at most two decimals, no trailing zeros. Example: ``format_hours(49.5) == "49.5"``."""
    text = f"{hours:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


#: Years a window may lie in: beyond them offsets and zones overflow ``datetime`` (year 1..9999).
MIN_YEAR = 1970
MAX_YEAR = 2200


def _resolve(value: str | datetime, zone: ZoneInfo | None, fold: int | None, label: str, notes: list[str]) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise UserError(
                f"{label} is not an ISO 8601 timestamp: {value!r}",
                label,
                "Write it like 2026-11-02T09:00, or with an explicit UTC offset like "
                "2026-11-02T09:00+01:00.",
            ) from None
    else:
        raise TypeError(f"{label} must be a str or datetime, got {type(value).__name__}")
    if not MIN_YEAR <= moment.year <= MAX_YEAR:  # year 1 or 9999 overflows once an offset is applied
        raise UserError(f"{label} is in year {moment.year}, outside {MIN_YEAR}..{MAX_YEAR}", label,
                        "A rental window lies in the present era: check the date.")

    if moment.utcoffset() is not None:
        if zone is None:
            return moment
        local = moment.astimezone(zone)
        if local.utcoffset() != moment.utcoffset():
            notes.append(
                f"{label} {_iso(moment)} is {_iso(local)} in {zone.key} "
                "(the offset written differs from the zone's offset at that instant)"
            )
        return local
    if zone is None:
        raise UserError(
            f"{label} {_iso(moment)} has no UTC offset and no time zone is given",
            label,
            "Pass --tz ZONE (e.g. Europe/Paris), or write an explicit offset, "
            f"e.g. {_iso(moment)}+01:00.",
        )
    return _resolve_local(moment, zone, fold, label)


def _resolve_local(naive: datetime, zone: ZoneInfo, fold: int | None, label: str) -> datetime:
    first = naive.replace(tzinfo=zone, fold=0)
    second = naive.replace(tzinfo=zone, fold=1)
    if _offset(first) == _offset(second):
        return first
    text = _iso(naive)
    first_offset = format_offset(_offset(first))
    second_offset = format_offset(_offset(second))
    round_trip = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    if round_trip != naive:
        # Spring-forward gap: fold=0 reads it with the offset before the jump, fold=1 after.
        lo = second.astimezone(UTC)
        hi = first.astimezone(UTC)
        changes = _offset_changes(lo - timedelta(seconds=1), hi + timedelta(seconds=1), zone)
        jump = (
            f"the clocks jump from {_clock(changes[0].wall_before)} to "
            f"{_clock(changes[0].wall_after)}"
            if changes
            else "the clocks jump forward"
        )
        raise UserError(
            f"{label} {text} does not exist in {zone.key}: {jump} "
            "(non-existent local time, spring-forward gap)",
            label,
            f"Pick a local time that exists, or write an explicit UTC offset: "
            f"{text}{first_offset} is {_iso(hi.astimezone(zone))}, "
            f"{text}{second_offset} is {_iso(lo.astimezone(zone))}. "
            "--fold 0|1 does not apply to a time that never happened.",
        )
    if fold is None:
        raise UserError(
            f"{label} {text} is ambiguous in {zone.key}: it happens twice when the clocks "
            "fall back (ambiguous local time, fall-back overlap)",
            label,
            f"Choose with --fold 0 (first occurrence, {text}{first_offset}) or --fold 1 "
            f"(second occurrence, {text}{second_offset}), or write the offset explicitly, "
            f"e.g. {text}{second_offset}.",
        )
    return naive.replace(tzinfo=zone, fold=fold)


def _offset_changes(start_utc: datetime, end_utc: datetime, zone: ZoneInfo) -> list[OffsetChange]:
    """Offset changes in (start, end]: hourly samples, then bisection to the second."""
    first_s = int(start_utc.timestamp())
    last_s = int(end_utc.timestamp())
    changes: list[OffsetChange] = []
    here_s = first_s
    here = _offset_at(here_s, zone)
    while here_s < last_s:
        next_s = min(here_s + _SCAN_STEP_S, last_s)
        there = _offset_at(next_s, zone)
        if there != here:
            lo, hi = here_s, next_s
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset_at(mid, zone) == here:
                    lo = mid
                else:
                    hi = mid
            changes.append(_change_at(hi, zone))
        here_s, here = next_s, there
    return changes


def _change_at(at_s: int, zone: ZoneInfo) -> OffsetChange:
    before = datetime.fromtimestamp(at_s - 1, zone)
    after = datetime.fromtimestamp(at_s, zone)
    dst_before = before.dst() or timedelta(0)
    dst_after = after.dst() or timedelta(0)
    if dst_after > dst_before:
        kind = "dst_starts"
    elif dst_after < dst_before:
        kind = "dst_ends"
    else:
        kind = "standard_offset_change"
    return OffsetChange(at_utc=datetime.fromtimestamp(at_s, UTC), offset_before=_offset(before),
                        offset_after=_offset(after), kind=kind)


def _offset_at(at_s: int, zone: ZoneInfo) -> timedelta:
    return _offset(datetime.fromtimestamp(at_s, zone))


def _offset(moment: datetime) -> timedelta:
    offset = moment.utcoffset()
    if offset is None:
        raise ValueError(f"naive datetime {moment!r}")
    return offset


def _clock(moment: datetime) -> str:
    return moment.strftime("%H:%M") if moment.second == 0 else moment.strftime("%H:%M:%S")


def _iso(moment: datetime) -> str:
    """ISO 8601, minutes only when seconds are zero; UTC written as Z."""
    spec = "minutes" if moment.second == 0 and moment.microsecond == 0 else "auto"
    text = moment.isoformat(timespec=spec)
    if moment.utcoffset() == timedelta(0) and moment.tzinfo is UTC:
        text = text.removesuffix("+00:00") + "Z"
    return text
