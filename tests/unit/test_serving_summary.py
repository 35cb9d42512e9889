"""LoadGen's mlperf_log_summary.txt read back (runner/trial/serving/summary.py), on summaries LoadGen 6.0.17 wrote
(tests/fixtures/loadgen/README.md says how)."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.records.codec import from_dict, to_dict
from protocol.study.traffic import queries_needed
from runner.trial.serving.summary import LoadgenSummary, parse_summary, summary_from_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "loadgen"


def summary(name: str) -> LoadgenSummary:
    return parse_summary(FIXTURES / f"summary_{name}.txt")


def test_a_valid_run_reads_its_verdict_rates_and_percentiles():
    valid = summary("valid")
    assert (valid.scenario, valid.mode, valid.valid) == ("Server", "PerformanceOnly", True)
    assert (valid.performance_constraints_met, valid.min_duration_met, valid.min_queries_met,
            valid.early_stopping_met) == (True, True, True, True)
    assert valid.completed_qps == 20.17 and valid.scheduled_qps == 20.59
    assert set(valid.latency_ns) == {"min", "max", "mean", "50.00", "90.00", "95.00", "97.00", "99.00", "99.90"}
    assert valid.latency_ns["min"] <= valid.latency_ns["50.00"] <= valid.latency_ns["99.00"] <= valid.latency_ns["max"]
    assert valid.percentile_ms("latency", 0.5) == valid.latency_ns["50.00"] / 1e6
    assert valid.first_token_ns == {} and valid.percentile_ms("first_token", 0.99) is None
    assert valid.parameters["target_qps"] == "20" and valid.parameters["min_query_count"] == "50"
    assert valid.early_stopping == ("Early Stopping Result:", "* Run successful.")
    assert valid.more_queries_needed is None and not valid.warnings and not valid.errors


def test_an_early_stopping_failure_says_how_many_more_queries_and_agrees_with_the_traffic_rule():
    short = summary("invalid_early_stopping")
    assert not short.valid and short.early_stopping_met is False and short.performance_constraints_met is True
    assert short.queries_processed == 50 and short.more_queries_needed == 409
    assert short.queries_processed + short.more_queries_needed == queries_needed(0.99)


def test_a_run_over_its_bound_fails_the_performance_constraint():
    slow = summary("invalid_latency")
    assert not slow.valid and slow.performance_constraints_met is False
    assert slow.latency_ns["90.00"] > 100_000_000


def test_token_latencies_are_read_when_the_run_measured_them():
    tokens = summary("token_latencies")
    assert tokens.valid and tokens.completed_tokens_per_second == 82.31
    assert 20e6 <= tokens.first_token_ns["50.00"] < 50e6 and 10e6 <= tokens.tpot_ns["50.00"] < 20e6
    assert set(tokens.first_token_ns) == set(tokens.tpot_ns) == set(tokens.latency_ns)
    assert [line for line in tokens.early_stopping if line.endswith("Result:")] == [
        "TTFT Early Stopping Result:", "TPOT Early Stopping Result:"]


@pytest.mark.parametrize("name", ["valid", "invalid_early_stopping", "invalid_latency", "token_latencies"])
def test_the_record_round_trips_on_the_codec(name: str):
    record = summary(name)
    data = to_dict(record)
    assert data["schema_version"] == 1 and from_dict(LoadgenSummary, data, "summary") == record


def test_a_summary_without_a_verdict_is_refused():
    text = (FIXTURES / "summary_valid.txt").read_text(encoding="utf-8").replace("Result is : VALID", "")
    with pytest.raises(UserError, match="VALID"):
        summary_from_text(text, "cut.txt")
    with pytest.raises(UserError):
        summary_from_text("", "empty.txt")


def test_a_rate_that_is_not_a_number_is_refused():
    text = (FIXTURES / "summary_valid.txt").read_text(encoding="utf-8").replace(": 20.17", ": fast")
    with pytest.raises(UserError, match="Completed samples per second"):
        summary_from_text(text, "edited.txt")
