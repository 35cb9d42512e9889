"""The campaign period, measured: hand-computed sessions, phases, overlaps, gaps, waiting and DST."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from protocol.costing.period import CampaignPeriod, PeriodComponent, measure_period
from protocol.costing.timeline import parse_instant, trial_intervals
from protocol.errors import UserError
from protocol.records import codec
from protocol.records.raw_record import RawRecord


def ev(at: str, event: str, trial_id: str | None = None) -> dict[str, str]:
    data = {"at": at, "event": event}
    if trial_id is not None:
        data["trial_id"] = trial_id
    return data


def raw(trial_id: str, started: str, ended: str) -> RawRecord:
    return RawRecord.from_text({"trial_id": trial_id, "started_at": started, "ended_at": ended})


D = "2026-11-02T"  # a Monday


def simple_events() -> list[dict[str, str]]:
    return [
        ev(D + "09:00:00+00:00", "setup_start"),
        ev(D + "09:30:00+00:00", "setup_end"),
        ev(D + "09:30:00+00:00", "trial_start", "t1"),
        ev(D + "11:30:00+00:00", "trial_end", "t1"),
        ev(D + "11:30:00+00:00", "trials_end"),
    ]


def seconds(period: CampaignPeriod, name: str) -> float | None:
    component = period.component(name)
    assert component is not None, name
    return component.seconds


def test_setup_plus_trial_plus_declared_waiting() -> None:
    period = measure_period(simple_events(), [], waiting_h=10)
    assert seconds(period, "setup") == 1800
    assert seconds(period, "trials") == 7200
    assert seconds(period, "host work between phases") == 0
    assert period.used_h == 2.5
    assert period.waiting_h == 10
    assert period.needed_h == 12.5  # 30 min + 2 h + 10 h
    assert period.span_h == 2.5 and period.idle_h == 0
    assert (period.sessions, period.resumes) == (1, 0)
    assert period.start == datetime(2026, 11, 2, 9, tzinfo=UTC)
    assert period.end == datetime(2026, 11, 2, 11, 30, tzinfo=UTC)
    assert seconds(period, "waiting (declared)") == 36000
    waiting = period.component("waiting (declared)")
    assert waiting is not None and waiting.source == "study deadline.waiting_h"


def test_every_component_says_where_it_comes_from_and_unrecorded_ones_are_empty_not_zero() -> None:
    period = measure_period(simple_events(), [], waiting_h=None)
    names = [c.name for c in period.components]
    assert names == ["setup", "trials", "evaluation", "export", "host work between phases", "waiting (declared)"]
    for component in period.components:
        assert component.source
    evaluation = period.component("evaluation")
    assert evaluation is not None and evaluation.seconds is None and evaluation.counted is False
    assert "not recorded" in evaluation.source
    assert period.waiting_s == 0
    assert "declares no deadline" in period.waiting_source
    assert period.needed_h == 2.5


def test_overlapping_phases_are_counted_once() -> None:
    # Evaluation 10:00-12:00 overlaps the trial 09:30-11:30 by 1.5 h.
    events = simple_events() + [ev(D + "10:00:00+00:00", "evaluation_start"),
                                ev(D + "12:00:00+00:00", "evaluation_end")]
    period = measure_period(events, [], waiting_h=0)
    assert seconds(period, "evaluation") == 7200
    assert period.used_h == 3.0  # 09:00-12:00, not 0.5 + 2 + 2 = 4.5
    assert period.overlap_s == 5400
    assert any("overlap" in note for note in period.notes)


def test_raw_trial_clock_inside_the_events_adds_nothing() -> None:
    rows = [raw("t1", D + "09:31:00+00:00", D + "11:29:00+00:00")]
    period = measure_period(simple_events(), rows, waiting_h=0)
    assert seconds(period, "trials") == 7200
    assert period.used_h == 2.5


def test_host_work_between_trials_is_used_time() -> None:
    events = [
        ev(D + "09:00:00+00:00", "setup_start"), ev(D + "09:10:00+00:00", "setup_end"),
        ev(D + "09:10:00+00:00", "trial_start", "t1"), ev(D + "10:00:00+00:00", "trial_end", "t1"),
        ev(D + "10:05:00+00:00", "trial_start", "t2"), ev(D + "11:00:00+00:00", "trial_end", "t2"),
        ev(D + "11:00:00+00:00", "trials_end"),
    ]
    period = measure_period(events, [], waiting_h=0)
    assert seconds(period, "setup") == 600
    assert seconds(period, "trials") == 50 * 60 + 55 * 60
    assert seconds(period, "host work between phases") == 300  # gathering t1 between 10:00 and 10:05
    assert period.used_s == 7200


def test_stopped_and_resumed_campaign_counts_sessions_not_the_gap() -> None:
    events = [
        ev(D + "09:00:00+00:00", "setup_start"), ev(D + "09:10:00+00:00", "setup_end"),
        ev(D + "09:10:00+00:00", "trial_start", "t1"), ev(D + "10:00:00+00:00", "trial_end", "t1"),
        ev(D + "10:00:00+00:00", "trial_start", "t2"),  # the host stopped here
        ev("2026-11-03T09:00:00+00:00", "resume"),
        ev("2026-11-03T09:00:00+00:00", "trial_start", "t3"), ev("2026-11-03T10:00:00+00:00", "trial_end", "t3"),
        ev("2026-11-03T10:00:00+00:00", "trials_end"),
    ]
    # The trial t2 itself finished at 10:30 (its own clock, found on --resume).
    rows = [raw("t2", D + "10:00:05+00:00", D + "10:30:00+00:00")]
    period = measure_period(events, rows, waiting_h=0)
    assert (period.sessions, period.resumes) == (2, 1)
    assert period.used_h == 2.5  # 09:00-10:30 on day 1, 09:00-10:00 on day 2
    assert period.span_h == 25.0
    assert period.idle_h == 22.5
    assert seconds(period, "trials") == 50 * 60 + (30 * 60 - 5) + 3600
    assert any("without an end event" in n and "raw.csv is counted instead" in n for n in period.notes)
    assert any("no trials_end" in n for n in period.notes)
    assert any("22.50 h passed between sessions" in n and "rental held across" in n for n in period.notes)


def test_phase_without_end_and_without_raw_time_counts_to_the_end_of_its_session() -> None:
    events = [
        ev(D + "09:00:00+00:00", "setup_start"), ev(D + "09:10:00+00:00", "setup_end"),
        ev(D + "09:10:00+00:00", "trial_start", "t1"),
        ev(D + "09:40:00+00:00", "export_start"),  # something else logged at 09:40, then the host died
    ]
    period = measure_period(events, [], waiting_h=0)
    assert period.sessions == 1
    assert seconds(period, "trials") == 30 * 60  # 09:10 -> the session's last timestamp, 09:40
    assert period.used_h == pytest.approx(40 / 60)
    assert any("last session" in n for n in period.notes)


def test_offsets_and_a_dst_change_are_real_elapsed_time() -> None:
    # Paris falls back at 03:00 CEST on 2026-10-25: 02:30+02:00 to 02:30+01:00 is ONE hour.
    events = [ev("2026-10-25T02:30:00+02:00", "setup_start"), ev("2026-10-25T02:30:00+01:00", "setup_end"),
              ev("2026-10-25T01:30:00Z", "trials_end")]
    period = measure_period(events, [], waiting_h=0)
    assert seconds(period, "setup") == 3600
    assert period.used_h == 1.0


def test_only_raw_times_without_events() -> None:
    rows = [raw("t1", D + "09:00:00+00:00", D + "09:30:00+00:00"),
            raw("t2", D + "09:20:00+00:00", D + "10:00:00+00:00")]
    period = measure_period([], rows, waiting_h=1)
    assert seconds(period, "trials") == 3600  # overlap counted once
    host = period.component("host work between phases")
    assert host is not None and host.seconds is None and "no session events" in host.source
    assert period.needed_h == 2.0


def test_no_timestamps_at_all_leaves_the_period_empty_with_a_reason() -> None:
    period = measure_period([], [raw("t1", "", "")], waiting_h=5)
    assert period.used_s is None and period.needed_s is None and period.needed_h is None
    assert "no timestamps" in period.empty_reasons["needed_s"]
    assert period.waiting_h == 5


def test_naive_or_malformed_timestamps_are_refused_with_the_line() -> None:
    with pytest.raises(UserError, match=r"no UTC offset.*events.jsonl line 2"):
        measure_period([ev(D + "09:00:00+00:00", "setup_start"), ev(D + "09:30:00", "setup_end")], [], 0)
    with pytest.raises(UserError, match="not ISO 8601"):
        parse_instant("yesterday", "x")
    with pytest.raises(UserError, match="waiting_h must be >= 0"):
        measure_period([], [], -1)


def test_trial_intervals_merge_events_and_raw_clock() -> None:
    spans = trial_intervals(simple_events(), [raw("t1", D + "09:31:00+00:00", D + "11:29:00+00:00")])
    assert list(spans) == ["t1"]
    assert len(spans["t1"]) == 2


def test_round_trip() -> None:
    period = measure_period(simple_events(), [raw("t1", D + "09:31:00.123456+00:00", D + "11:29:00+00:00")], 3)
    assert codec.from_dict(CampaignPeriod, codec.to_dict(period)) == period
    component = period.components[0]
    assert codec.from_dict(PeriodComponent, codec.to_dict(component)) == component
    assert codec.to_dict(period)["needed_h"] == 5.5
    with pytest.raises(UserError, match="schema_version"):
        codec.from_dict(CampaignPeriod, {**codec.to_dict(period), "schema_version": 99})
