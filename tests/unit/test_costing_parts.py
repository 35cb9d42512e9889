"""The parts behind plans, projection and period on their own: lookup keys, the batch fit's statistics, the
timeline's intervals and sessions (hand-computed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from protocol.costing.batch_fit import Batch, PassEvidence, fit_rates, pass_stats, predict_batch, sum_stats
from protocol.costing.plans import gpu_key, join_days
from protocol.costing.timeline import host_sessions, iso_utc, parsed_events, phase_intervals, row_interval
from protocol.errors import UserError
from protocol.records.raw_record import RawRecord


def test_gpu_key_and_join_days() -> None:
    assert gpu_key(" RTX-4090 ") == "rtx-4090"
    assert join_days([3, 7, 30]) == "3, 7 or 30"
    assert join_days([7]) == "7"
    assert join_days([]) == ""


def batch(short: int, long: int, seconds: float) -> Batch:
    return Batch(0, 1, short + long, {"short": 1}, {"short": short, "long": long}, seconds)


def test_pass_statistics_sum_and_fit_without_a_constant() -> None:
    buckets = ("long", "short")
    one = PassEvidence("t1", 1.5, None, (batch(10, 0, 1.0),))
    two = PassEvidence("t2", 4.5, None, (batch(0, 20, 4.0),))
    a, b = pass_stats(one, buckets), pass_stats(two, buckets)
    both = sum_stats([a, b])
    assert (both.batches, both.batch_s, both.pass_s, both.tokens) == (2.0, 5.0, 6.0, (20.0, 10.0))
    assert both.xty == (5.0, 80.0, 10.0)  # Σ y, Σ long·y, Σ short·y
    constant, rates, method = fit_rates(both, buckets)
    assert constant == 0.0 and rates == pytest.approx([0.2, 0.1])
    assert method.startswith("least squares of batch time on the tokens per length bucket (no per-batch constant")
    assert predict_batch(batch(10, 20, 0.0), constant, rates, buckets) == pytest.approx(5.0)


def ev(at: str, event: str, trial_id: str = "") -> dict[str, str]:
    return {"at": "2026-11-02T" + at + "+00:00", "event": event, "trial_id": trial_id}


def test_events_pair_into_phases_and_sessions() -> None:
    events = parsed_events([ev("10:00:00", "trial_end", "t1"), ev("09:00:00", "setup_start"),
                            ev("09:30:00", "trial_start", "t1"), ev("10:00:00", "trial_start", "t2")])
    assert [e.kind for e in events] == ["setup_start", "trial_start", "trial_end", "trial_start"]
    notes: list[str] = []
    spans, unmatched = phase_intervals(events, notes)
    at = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
    assert spans == {("trial", "t1"): [(at, at.replace(hour=10, minute=0))]}
    assert unmatched == [("setup", "", at.replace(minute=0)), ("trial", "t2", at.replace(hour=10, minute=0))]
    sessions, resumes = host_sessions(events, [], unmatched, notes)
    assert sessions == [(at.replace(minute=0), at.replace(hour=10, minute=0))] and resumes == 0
    assert "has no trials_end" in notes[-1]


def test_row_interval_and_iso_utc() -> None:
    row = {"trial_id": "t1", "started_at": "2026-11-02T10:00:00+01:00", "ended_at": "2026-11-02T09:30:00+00:00"}
    begin, end = row_interval(RawRecord.from_text(row), 0) or (None, None)
    assert iso_utc(begin) == "2026-11-02T09:00:00.000Z" and iso_utc(end) == "2026-11-02T09:30:00.000Z"
    notes: list[str] = []
    assert row_interval(RawRecord.from_text({**row, "ended_at": "2026-11-02T08:00:00+00:00"}), 0, notes) is None
    assert notes == ["raw.csv row 2 (t1): ended_at is before started_at (clock change?); not counted"]
    assert row_interval(RawRecord.from_text({"started_at": ""}), 0) is None and iso_utc(None) is None
    with pytest.raises(UserError, match=r"timestamp 'noon' is not ISO 8601.*raw.csv row 4 \(t1\)"):
        row_interval(RawRecord.from_text({**row, "started_at": "noon"}), 2)
    with pytest.raises(UserError, match="lacks 'at' or 'event'"):
        parsed_events([{"event": "setup_start"}])
