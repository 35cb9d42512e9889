"""Access windows on a real calendar: hand-computed hours, DST, gaps, overlaps, merging."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from protocol.costing.calendar import (
    OffsetChange,
    Window,
    access_window,
    format_hours,
    format_offset,
    merge_intervals,
    parse_offset,
)
from protocol.costing.coverage import Coverage, PlanFit, covering_plans
from protocol.errors import UserError
from protocol.records import codec

PARIS = "Europe/Paris"


def test_2026_dst_dates_in_paris_are_what_the_tests_assume() -> None:
    zone = ZoneInfo(PARIS)
    assert datetime(2026, 3, 29, 1, 59, tzinfo=zone).utcoffset() == timedelta(hours=1)
    assert datetime(2026, 3, 29, 3, 0, tzinfo=zone).utcoffset() == timedelta(hours=2)
    assert datetime(2026, 10, 25, 1, 59, tzinfo=zone).utcoffset() == timedelta(hours=2)
    assert datetime(2026, 10, 25, 3, 0, tzinfo=zone).utcoffset() == timedelta(hours=1)


def test_monday_to_friday_is_96_hours_without_dst() -> None:
    # 2026-11-02 is a Monday, 2026-11-06 a Friday; Paris is on +01:00 throughout.
    assert datetime(2026, 11, 2).weekday() == 0
    window = access_window("2026-11-02T09:00", "2026-11-06T09:00", PARIS)
    assert window.elapsed_h == 96
    assert window.wall_clock_h == 96
    assert window.dst_change is False
    assert window.offset_changes == ()
    assert window.offset_start == window.offset_end == timedelta(hours=1)


def test_96_hours_is_covered_by_7_and_30_days_not_3() -> None:
    coverage = covering_plans(96, (3, 7, 30))
    assert coverage.covering_days == (7, 30)
    assert coverage.needs_rescheduling is False
    assert [fit.plan_hours for fit in coverage.fits] == [72, 168, 720]
    assert [fit.margin_h for fit in coverage.fits] == [-24, 72, 624]
    assert "says nothing about whether the work fits" in coverage.advice


def test_plan_covers_a_window_of_exactly_its_length() -> None:
    assert covering_plans(72, (3,)).covering_days == (3,)
    assert covering_plans(72.01, (3,)).covering_days == ()


def test_no_covering_plan_asks_for_rescheduling_not_extension() -> None:
    coverage = covering_plans(800, (30, 3, 7))
    assert coverage.needs_rescheduling is True
    assert [fit.plan_days for fit in coverage.fits] == [3, 7, 30]
    assert "reschedule" in coverage.advice
    assert "estimate the extra period explicitly" in coverage.advice
    assert "short by 80 h" in coverage.advice
    assert "no automatic extension" in coverage.advice


@pytest.mark.parametrize("hours", [0, -1])
def test_covering_plans_rejects_non_positive_windows(hours: float) -> None:
    with pytest.raises(UserError, match="window hours must be positive"):
        covering_plans(hours, (3,))


def test_covering_plans_rejects_bad_plan_lengths() -> None:
    with pytest.raises(UserError, match="positive whole number of days"):
        covering_plans(10, (0,))


def test_fall_back_window_counts_49_real_hours() -> None:
    window = access_window("2026-10-24T09:00", "2026-10-26T09:00", PARIS)
    assert window.elapsed_h == 49
    assert window.wall_clock_h == 48
    assert window.dst_change is True
    assert window.offset_start == timedelta(hours=2)
    assert window.offset_end == timedelta(hours=1)
    (change,) = window.offset_changes
    assert change.at_utc == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    assert change.kind == "dst_ends"
    assert change.wall_before == datetime(2026, 10, 25, 3, 0)
    assert change.wall_after == datetime(2026, 10, 25, 2, 0)


def test_spring_forward_window_counts_47_real_hours() -> None:
    window = access_window("2026-03-28T09:00", "2026-03-30T09:00", PARIS)
    assert window.elapsed_h == 47
    assert window.wall_clock_h == 48
    (change,) = window.offset_changes
    assert change.kind == "dst_starts"
    assert change.at_utc == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_two_changes_with_equal_end_offsets_are_both_found() -> None:
    window = access_window("2026-03-01T09:00", "2026-11-30T09:00", PARIS)
    assert window.offset_start == window.offset_end
    assert [change.kind for change in window.offset_changes] == ["dst_starts", "dst_ends"]
    assert window.dst_change is True
    assert window.elapsed_h == window.wall_clock_h  # +1 h and -1 h cancel


def test_spring_forward_gap_is_refused_and_named() -> None:
    with pytest.raises(UserError) as caught:
        access_window("2026-03-29T02:30", "2026-03-30T09:00", PARIS)
    message = caught.value.message
    assert "does not exist in Europe/Paris" in message
    assert "spring-forward gap" in message
    assert "from 02:00 to 03:00" in message
    assert "2026-03-29T02:30+01:00 is 2026-03-29T03:30+02:00" in message
    assert "2026-03-29T02:30+02:00 is 2026-03-29T01:30+01:00" in message


@pytest.mark.parametrize("fold", [0, 1])
def test_gap_is_refused_even_with_a_fold(fold: int) -> None:
    with pytest.raises(UserError, match="spring-forward gap"):
        access_window("2026-03-28T09:00", "2026-03-29T02:30", PARIS, fold)


def test_fall_back_overlap_is_refused_without_fold() -> None:
    with pytest.raises(UserError) as caught:
        access_window("2026-10-25T02:30", "2026-10-26T09:00", PARIS)
    message = caught.value.message
    assert "ambiguous in Europe/Paris" in message
    assert "fall-back overlap" in message
    assert "--fold 0 (first occurrence, 2026-10-25T02:30+02:00)" in message
    assert "--fold 1 (second occurrence, 2026-10-25T02:30+01:00)" in message


def test_fold_picks_the_occurrence() -> None:
    # 02:30+02:00 = 00:30Z; 02:30+01:00 = 01:30Z; end 2026-10-26T09:00+01:00 = 08:00Z.
    first = access_window("2026-10-25T02:30", "2026-10-26T09:00", PARIS, 0)
    second = access_window("2026-10-25T02:30", "2026-10-26T09:00", PARIS, 1)
    assert first.elapsed_h == 31.5
    assert second.elapsed_h == 30.5
    assert first.wall_clock_h == second.wall_clock_h == 30.5


def test_explicit_offset_needs_no_fold() -> None:
    window = access_window("2026-10-25T02:30+01:00", "2026-10-26T09:00", PARIS)
    assert window.elapsed_h == 30.5
    assert window.notes == ()
    assert window.offset_changes == ()  # the change at 01:00Z is before 01:30Z


def test_offset_that_disagrees_with_the_zone_is_noted() -> None:
    window = access_window("2026-07-01T09:00+01:00", "2026-07-02T10:00", PARIS)
    assert window.start == datetime(2026, 7, 1, 10, 0, tzinfo=ZoneInfo(PARIS))
    assert window.elapsed_h == 24
    assert "is 2026-07-01T10:00+02:00 in Europe/Paris" in window.notes[0]


def test_offsets_without_zone() -> None:
    window = access_window("2026-10-24T09:00+02:00", "2026-10-26T09:00+01:00", None)
    assert window.elapsed_h == 49
    assert window.wall_clock_h == 48
    assert window.dst_change is True
    assert "no time zone is named" in window.notes[0]


def test_naive_time_without_zone_is_refused() -> None:
    with pytest.raises(UserError, match="no UTC offset and no time zone"):
        access_window("2026-11-02T09:00", "2026-11-06T09:00", None)


def test_utc_z_suffix_and_datetime_objects() -> None:
    window = access_window("2026-11-02T08:00Z", datetime(2026, 11, 6, 9, 0), PARIS)
    assert window.elapsed_h == 96


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("2026-11-06T09:00", "2026-11-02T09:00", "is before its start"),
        ("2026-11-02T09:00", "2026-11-02T09:00", "equals its start"),
        ("2026-11-02T09:00", "2026-11-02T09:00+01:00", "equals its start"),
    ],
)
def test_end_must_be_after_start(start: str, end: str, expected: str) -> None:
    with pytest.raises(UserError, match=expected):
        access_window(start, end, PARIS)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Europe", "", "../etc/passwd"])
def test_unknown_time_zone_is_named(zone: str) -> None:
    with pytest.raises(UserError) as caught:
        access_window("2026-11-02T09:00", "2026-11-06T09:00", zone)
    assert f"unknown time zone {zone!r}" in caught.value.message


def test_bad_timestamp_and_bad_fold() -> None:
    with pytest.raises(UserError, match="not an ISO 8601 timestamp: 'monday'"):
        access_window("monday", "2026-11-06T09:00", PARIS)
    with pytest.raises(UserError, match="fold must be 0 or 1"):
        access_window("2026-11-02T09:00", "2026-11-06T09:00", PARIS, 2)


def test_other_zone_new_york_gap() -> None:
    with pytest.raises(UserError, match="does not exist in America/New_York"):
        access_window("2026-03-08T02:30", "2026-03-09T09:00", "America/New_York")


def test_round_trips() -> None:
    for window in (
        access_window("2026-10-24T09:00", "2026-10-26T09:00", PARIS),
        access_window("2026-10-24T09:00+02:00", "2026-10-26T09:00+01:00", None),
    ):
        assert codec.from_dict(Window, codec.to_dict(window)) == window
        for change in window.offset_changes:
            assert codec.from_dict(OffsetChange, codec.to_dict(change)) == change
    coverage = covering_plans(96, (3, 7, 30))
    assert codec.from_dict(Coverage, codec.to_dict(coverage)) == coverage
    for fit in coverage.fits:
        assert codec.from_dict(PlanFit, codec.to_dict(fit)) == fit


def test_window_dict_is_explicit_about_utc() -> None:
    data = codec.to_dict(access_window("2026-10-24T09:00", "2026-10-26T09:00", PARIS))
    assert data["start"] == "2026-10-24T09:00+02:00"
    assert data["end"] == "2026-10-26T09:00+01:00"
    assert data["start_utc"] == "2026-10-24T07:00Z"
    assert data["end_utc"] == "2026-10-26T08:00Z"
    assert data["elapsed_s"] == 49 * 3600


def test_offset_and_hour_formatting() -> None:
    assert format_offset(timedelta(hours=-5, minutes=-30)) == "-05:30"
    assert format_offset(timedelta(hours=5, minutes=45)) == "+05:45"
    assert parse_offset("-05:30") == timedelta(hours=-5, minutes=-30)
    assert format_hours(96.0) == "96"
    assert format_hours(30.5) == "30.5"


# --- merge_intervals --------------------------------------------------------------


def at(hour: int, minute: int = 0, day: int = 2) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=ZoneInfo(PARIS))


def test_overlaps_are_counted_once() -> None:
    # 09-12 and 11-13 -> 09-13 = 4 h; 15-16 separately = 1 h; 15:30-15:45 inside it.
    intervals = [(at(11), at(13)), (at(9), at(12)), (at(15), at(16)), (at(15, 30), at(15, 45))]
    assert merge_intervals(intervals) == 5 * 3600


def test_touching_and_empty_intervals() -> None:
    assert merge_intervals([]) == 0
    assert merge_intervals([(at(9), at(10)), (at(10), at(11))]) == 2 * 3600
    assert merge_intervals([(at(9), at(9))]) == 0


def test_merge_uses_real_time_across_zones_and_dst() -> None:
    paris = ZoneInfo(PARIS)
    start = datetime(2026, 10, 24, 9, 0, tzinfo=paris)
    end = datetime(2026, 10, 26, 9, 0, tzinfo=paris)
    assert merge_intervals([(start, end)]) == 49 * 3600
    # The same instant written in UTC overlaps completely.
    assert merge_intervals([(start, end), (start.astimezone(UTC), end.astimezone(UTC))]) == (
        49 * 3600
    )


def test_merge_refuses_naive_or_reversed_intervals() -> None:
    with pytest.raises(ValueError, match="naive"):
        merge_intervals([(datetime(2026, 1, 1), datetime(2026, 1, 2))])
    with pytest.raises(ValueError, match="ends before it starts"):
        merge_intervals([(at(12), at(9))])
