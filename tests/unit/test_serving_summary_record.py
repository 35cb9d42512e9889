"""summary.json's ``serving`` record (protocol/records/serving.py) and summary.md's ``## Serving`` lines made from it
(runner/analysis/serving_lines.py): per variant (configuration and rate) the rates, LoadGen's verdict, the answers,
and each run's latency distribution, with the percentiles a run had too few queries to decide marked."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.records.codec import from_dict, to_dict
from protocol.records.serving import (
    BOUND_MULTIPLES,
    ServingRun,
    ServingSummary,
    ServingVariant,
    distribution,
    nearest_rank,
)
from protocol.records.summary import SummaryRecord
from protocol.study.traffic import queries_needed
from runner.analysis.serving_lines import serving_lines


def test_nearest_rank_is_the_value_at_rank_ceil_p_n() -> None:
    values = [float(v) for v in range(1, 101)]  # 1 … 100
    assert [nearest_rank(values, p) for p in (0.5, 0.9, 0.99, 1.0)] == [50.0, 90.0, 99.0, 100.0]
    assert nearest_rank([7.0], 0.99) == 7.0


def test_a_distribution_counts_by_multiples_of_the_bound_and_names_what_it_cannot_decide() -> None:
    latencies = [10.0] * 40 + [40.0] * 5 + [90.0, 150.0, 500.0]  # 48 queries, bound 100 ms
    shown = distribution(latencies, bound_ms=100.0)
    assert shown is not None and shown.count == 48 and (shown.min_ms, shown.max_ms) == (10.0, 500.0)
    assert shown.histogram == (40, 5, 1, 1, 1)  # ≤25, ≤50, ≤100, ≤200, above
    assert (shown.p50_ms, shown.p90_ms) == (10.0, 40.0)
    assert shown.p99_ms == 500.0  # rank ceil(0.99 × 48) = 48
    assert shown.undecided == tuple(name for name, share in (("p95", 0.95), ("p99", 0.99))
                                    if queries_needed(share) > 48)  # p90 needs 44: decided
    assert distribution([], bound_ms=100.0) is None


def test_a_long_run_decides_every_percentile() -> None:
    shown = distribution([float(i % 97) for i in range(500)], bound_ms=50.0)
    assert shown is not None and shown.undecided == () and sum(shown.histogram) == 500


def run(trial: str, *, result: str | None = "VALID", accepted: bool = True, queries: int = 48,
        latencies: list[float] | None = None) -> ServingRun:
    return ServingRun(trial_id=trial, target_qps=2.0, scheduled_qps=2.01, completed_qps=1.9, loadgen_result=result,
                      early_stopping_met=True, latency_at_percentile_ms=31.5, latency_within_bound=True,
                      answers_accepted=accepted, answers_reason="" if accepted else "the gate refused the pass",
                      queries=queries, failed_queries=0, too_short=queries < 44,
                      distribution=distribution(latencies or [10.0] * queries, 100.0))


def record() -> ServingSummary:
    variants = (
        ServingVariant("batch_size=1@rate_qps=2", "batch_size=1", 2.0, True, (run("001-r1-a"),)),
        ServingVariant("batch_size=1@rate_qps=4", "batch_size=1", 4.0, False, (run("002-r1-b", result="INVALID"),)),
        ServingVariant("batch_size=4@rate_qps=2", "batch_size=4", 2.0, False,
                       (run("003-r1-c", accepted=False, queries=30),)),
    )
    return ServingSummary(rates_qps=(2.0, 4.0), measure="latency", percentile=0.9, bound_ms=100.0,
                          queries_needed=44, bound_multiples=BOUND_MULTIPLES, variants=variants,
                          acceptable=("batch_size=1@rate_qps=2",))


def test_the_record_round_trips_on_the_codec_with_its_schema_version() -> None:
    data = to_dict(record())
    assert data["schema_version"] == 1 and data["variants"][0]["configuration_id"] == "batch_size=1"
    assert from_dict(ServingSummary, data) == record()


def test_summary_json_is_version_2_with_serving_and_1_without() -> None:
    fields = {"variants": (), "warnings": (), "reference_variant": "a", "campaign_id": "c", "study_sha256": "s",
              "slots_planned": 1, "rows_total": 1, "memory_estimates": {}, "energy": {}, "device_busy_share": {}}
    offline = to_dict(SummaryRecord(**fields))
    assert offline["schema_version"] == 1 and "serving" not in offline
    server = to_dict(SummaryRecord(**fields, serving=record(), schema_version=2))
    assert from_dict(SummaryRecord, server).serving == record()
    with pytest.raises(UserError, match="lacks a serving record"):
        from_dict(SummaryRecord, {**offline, "schema_version": 2})


def test_the_section_shows_each_run_its_distribution_and_what_is_too_short() -> None:
    text = serving_lines(record())
    assert "Poisson arrivals at 2, 4 qps, p90 latency bound 100 ms" in text
    assert "A p90 needs at least 44 queries to be decided" in text
    assert ("- batch_size=1@rate_qps=2: LoadGen VALID (early stopping met); p90 latency 31.5 ms ≤ bound; "
            "scheduled 2.01, completed 1.90 of 2 qps; answers accepted (trial 001-r1-a)") in text
    assert "latency ms over 48 answered queries: min 10.0 · p50 10.0 · p90 10.0 · p95* 10.0 · p99* 10.0" in text
    assert "queries by the bound: ≤0.25× 48, ≤0.5× 0, ≤1× 0, ≤2× 0, >2× 0" in text
    assert "(* undecided with 48 queries: p95 needs 90, p99 needs 459)" in text
    assert "- batch_size=1@rate_qps=4: LoadGen INVALID" in text
    assert "answers NOT accepted: the gate refused the pass (trial 003-r1-c)" in text
    assert "too short to decide its p90: 30 answered queries, 44 needed" in text
    assert text.rstrip().endswith("Serving-acceptable: batch_size=1@rate_qps=2.")
    assert text.count("too short") == 1


def test_a_run_without_loadgen_result_or_queries_says_so() -> None:
    empty = ServingRun(trial_id="t", target_qps=2.0, scheduled_qps=None, completed_qps=None, loadgen_result=None,
                       early_stopping_met=None, latency_at_percentile_ms=None, latency_within_bound=None,
                       answers_accepted=False, answers_reason="the gate refused the pass", queries=0,
                       failed_queries=3, too_short=True, distribution=None)
    lone = ServingSummary(rates_qps=(2.0,), measure="latency", percentile=0.99, bound_ms=50.0, queries_needed=459,
                          bound_multiples=BOUND_MULTIPLES, variants=(ServingVariant("a", "a", 2.0, False, (empty,)),),
                          acceptable=())
    text = serving_lines(lone)
    assert "no LoadGen result (the serving run did not complete)" in text
    assert "latency distribution: no answered query; 3 failed" in text and "Serving-acceptable: none." in text
    assert serving_lines(None) == "" and not math.isnan(lone.bound_ms)


def test_a_trials_queries_give_its_latencies_failures_counted_apart_and_a_bad_line_refused(tmp_path: Path) -> None:
    from runner.analysis.serving_record import _latencies

    path = tmp_path / "queries.jsonl"
    lines = [{"issued_ns": 0, "completed_ns": 2_500_000, "error": None},
             {"issued_ns": 1_000_000, "completed_ns": 11_000_000, "error": None},
             {"issued_ns": 0, "completed_ns": 5, "error": "RuntimeError: out of memory"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert _latencies(path) == ([2.5, 10.0], 1)
    assert _latencies(tmp_path / "absent.jsonl") == ([], 0)  # a run that never started wrote none
    path.write_text(path.read_text() + '{"issued_ns": 3}\n', encoding="utf-8")
    with pytest.raises(UserError, match="line 4 of queries.jsonl is not a query's times"):
        _latencies(path)


def test_a_generation_runs_ttft_and_tpot_come_from_its_queries_first_token_and_token_count(tmp_path: Path) -> None:
    from runner.analysis.serving_record import _query_times

    path = tmp_path / "queries.jsonl"
    lines = [{"issued_ns": 0, "first_token_ns": 40_000_000, "completed_ns": 100_000_000, "n_tokens": 4,
              "error": None},  # TTFT 40 ms; TPOT (100 - 40) / 3 = 20 ms
             {"issued_ns": 0, "first_token_ns": 30_000_000, "completed_ns": 30_000_000, "n_tokens": 1,
              "error": None},  # one token: a TTFT, no TPOT
             {"issued_ns": 0, "first_token_ns": None, "completed_ns": 7_000_000, "n_tokens": 0,
              "error": None}]  # no first token reported: neither
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    times = _query_times(path)
    assert times.latencies_ms == [100.0, 30.0, 7.0] and times.ttft_ms == [40.0, 30.0]
    assert times.tpot_ms == [20.0] and times.failed == 0


def test_a_generation_run_shows_ttft_and_tpot_against_their_bounds_and_an_offline_shape_is_unchanged() -> None:
    from protocol.records.serving import TokenLatency

    ttft = TokenLatency(at_percentile_ms=812.0, bound_ms=2000.0, within_bound=True,
                        distribution=distribution([600.0, 700.0, 812.0], 2000.0))
    tpot = TokenLatency(at_percentile_ms=95.0, bound_ms=80.0, within_bound=False,
                        distribution=distribution([60.0, 70.0, 95.0], 80.0))
    base = run("g1")
    generated = ServingRun(**{**{k: getattr(base, k) for k in base.__dataclass_fields__ if k not in ("ttft", "tpot")},
                              "distribution": distribution([900.0, 1200.0], None), "ttft": ttft, "tpot": tpot})
    assert generated.distribution is not None and generated.distribution.histogram == ()
    record_ = ServingSummary(rates_qps=(2.0,), measure="ttft", percentile=0.9, bound_ms=2000.0, queries_needed=44,
                             bound_multiples=BOUND_MULTIPLES, variants=(ServingVariant("g", "g", 2.0, True,
                                                                                       (generated,)),),
                             acceptable=("g",))
    text = serving_lines(record_)
    assert "TTFT p90 812.0 ms ≤ bound 2000 ms (LoadGen); measured over 3 queries: min 600.0" in text
    assert "TPOT p90 95.0 ms > bound 80 ms (LoadGen)" in text
    assert "(whole answers; the bounds are per token): min 900.0" in text
    assert from_dict(ServingSummary, to_dict(record_)) == record_
    assert "ttft" not in to_dict(run("c1")) and "tpot" not in to_dict(run("c1"))  # a classification run's shape
