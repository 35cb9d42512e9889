"""The ``[traffic]`` table (protocol/study/traffic.py): every rule refuses with the key and the fix, and the query
count rule is derived, not copied (459 for p99 at 99 % confidence, LoadGen's early-stopping figure)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import UserError
from protocol.records.codec import from_dict, to_dict
from protocol.study.reader import StudyErrors, TableReader
from protocol.study.traffic import (
    CONFIDENCE,
    MAX_RATE_QPS,
    TRAFFIC_KEYS,
    Traffic,
    key_table,
    parse_traffic,
    queries_needed,
    trace_times,
)

CLASSIFY, GENERATE = "text-classification", "text-generation"


def table(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"rates_qps": [1.0, 2.0], "min_query_count": 500, "min_duration_s": 10,
                            "max_duration_s": 600, "latency_bound_ms": 200, "seed": 7}
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def generation(**changes: Any) -> dict[str, Any]:
    return table(**{"latency_bound_ms": None, "ttft_bound_ms": 500, "tpot_bound_ms": 50, **changes})


def parse(data: dict[str, Any], task: str = CLASSIFY, base: Path | None = None) -> Traffic:
    return parse_traffic(TableReader("study.toml", data, "traffic."), task, base)


def refused(data: dict[str, Any], task: str = CLASSIFY, base: Path | None = None) -> UserError:
    with pytest.raises(UserError) as caught:
        parse(data, task, base)
    return caught.value


# --- the query count rule -------------------------------------------------------------------------------------

def brute_force(percentile: float, confidence: float) -> int:
    n = 1
    while percentile ** n > 1 - confidence:
        n += 1
    return n


@pytest.mark.parametrize("percentile", [0.5, 0.75, 0.9, 0.95, 0.97, 0.99, 0.995, 0.999])
def test_queries_needed_is_the_least_n_with_percentile_to_the_n_at_most_one_minus_confidence(percentile: float):
    n = queries_needed(percentile)
    assert percentile ** n <= 1 - CONFIDENCE < percentile ** (n - 1)
    assert n == brute_force(percentile, CONFIDENCE)


def test_p99_at_99_percent_confidence_needs_459_queries_as_loadgen_early_stopping_says():
    # LoadGen 6.0.17, p99, 50 queries all under the bound: "Would need to run at least 409 more queries" (50 + 409).
    assert queries_needed(0.99, 0.99) == 50 + 409
    assert queries_needed(0.9, 0.99) == math.ceil(math.log(0.01) / math.log(0.9))


@pytest.mark.parametrize("percentile", [0.0, 1.0, -0.5, 1.5])
def test_queries_needed_refuses_a_percentile_outside_the_open_unit_interval(percentile: float):
    with pytest.raises(ValueError):
        queries_needed(percentile)


def test_a_query_count_too_small_for_the_percentile_is_refused_with_the_number_needed_and_why():
    error = refused(table(min_query_count=458))
    assert "traffic.min_query_count" in error.where
    assert "459" in error.what and "459" in error.fix and "0.99^n" in error.fix
    assert parse(table(min_query_count=459)).min_query_count == 459


def test_a_lower_percentile_needs_fewer_queries():
    traffic = parse(table(min_query_count=44, latency_percentile=0.9, max_duration_s=None))
    assert traffic.queries_needed == 44 and traffic.bounds[0].percentile == 0.9


def test_generation_needs_the_count_of_its_per_token_percentiles():
    error = refused(generation(min_query_count=100), GENERATE)
    assert "459" in error.what and "ttft" in error.what


# --- rates ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [0, -1.0, math.nan, math.inf, MAX_RATE_QPS * 2])
def test_a_rate_that_is_not_positive_finite_and_schedulable_is_refused(rate: float):
    error = refused(table(rates_qps=None, rate_qps=rate))
    assert "traffic.rate_qps" in error.where and error.fix


@pytest.mark.parametrize("rate", [0, -2, math.nan, MAX_RATE_QPS + 1, "fast", True])
def test_a_bad_rate_in_a_series_is_refused_naming_its_place(rate: Any):
    error = refused(table(rates_qps=[1.0, rate]))
    assert "traffic.rates_qps[1]" in error.where


def test_the_schedulable_maximum_itself_is_accepted():
    assert parse(table(rates_qps=None, rate_qps=MAX_RATE_QPS, max_duration_s=None)).rates_qps == (MAX_RATE_QPS,)


@pytest.mark.parametrize("changes", [{"rates_qps": None}, {"rate_qps": 2.0}, {"rates_qps": []},
                                     {"rates_qps": [1.0, 1]}])
def test_one_rate_or_one_series_of_rising_rates_is_required(changes: dict[str, Any]):
    error = refused(table(**changes))
    assert "traffic.rate" in error.where and error.fix


def test_a_single_rate_and_a_series_both_parse():
    assert parse(table(rates_qps=None, rate_qps=2)).rates_qps == (2.0,)
    assert parse(table(rates_qps=[1, 2.5])).rates_qps == (1.0, 2.5)


@pytest.mark.parametrize(("rates", "place"), [([2.0, 1.0], 1), ([1.0, 4.0, 2.0], 2), ([1.0, 2.0, 2.0], 2)])
def test_a_series_of_rates_must_rise_strictly_and_the_first_out_of_order_is_named(rates: list[float], place: int):
    error = refused(table(rates_qps=rates))
    assert error.where.endswith(f"key traffic.rates_qps[{place}]"), error.message
    assert "lowest to highest" in error.fix and f"{rates[place]:g}" in error.what


def test_a_rising_series_parses_in_its_declared_order():
    assert parse(table(rates_qps=[0.5, 2, 8.25], max_duration_s=None)).rates_qps == (0.5, 2.0, 8.25)


def test_a_series_whose_highest_rate_over_min_duration_exceeds_a_runs_queries_is_refused():
    """min_duration_s holds a run at every rate: at the highest one it issues rate x min_duration_s queries, and a
    run holds at most min_query_count's own bound (100,000,000)."""
    error = refused(table(rates_qps=[1.0, 10_000.0], min_duration_s=20_000, max_duration_s=None))
    assert error.where.endswith("key traffic.min_duration_s") and "10000 queries per second" in error.what
    assert "200000000" in error.what and "10000 s" in error.fix
    assert parse(table(rates_qps=[1.0, 10_000.0], min_duration_s=10_000, max_duration_s=None)).min_duration_s == 10_000


def test_a_run_too_short_for_its_query_count_at_the_lowest_rate_is_refused():
    error = refused(table(rates_qps=[1.0, 4.0], min_query_count=500, max_duration_s=300))
    assert "traffic.max_duration_s" in error.where and "500 s" in error.fix
    assert parse(table(rates_qps=[1.0, 4.0], min_query_count=500, max_duration_s=500)).max_duration_s == 500


def test_max_duration_shorter_than_min_duration_is_refused():
    assert "traffic.max_duration_s" in refused(table(min_duration_s=700, max_duration_s=600)).where


# --- bounds and percentiles -----------------------------------------------------------------------------------

@pytest.mark.parametrize("percentile", [0, 1, 1.5, -0.1, math.nan])
@pytest.mark.parametrize("key", ["latency_percentile"])
def test_a_percentile_outside_zero_one_is_refused(key: str, percentile: float):
    assert f"traffic.{key}" in refused(table(**{key: percentile})).where


@pytest.mark.parametrize("key", ["ttft_percentile", "tpot_percentile"])
@pytest.mark.parametrize("percentile", [0, 1, 2])
def test_a_token_percentile_outside_zero_one_is_refused(key: str, percentile: float):
    assert f"traffic.{key}" in refused(generation(**{key: percentile}), GENERATE).where


@pytest.mark.parametrize("bound", [0, -5, math.inf, math.nan])
def test_a_latency_bound_must_be_positive_and_finite(bound: float):
    assert "traffic.latency_bound_ms" in refused(table(latency_bound_ms=bound)).where


@pytest.mark.parametrize("key", ["ttft_bound_ms", "tpot_bound_ms"])
def test_a_token_bound_of_zero_is_refused(key: str):
    assert f"traffic.{key}" in refused(generation(**{key: 0}), GENERATE).where


def test_the_default_percentile_is_p99_and_the_bound_is_kept_in_ms():
    bound = parse(table()).bounds
    assert [(b.measure, b.bound_ms, b.percentile) for b in bound] == [("latency", 200.0, 0.99)]
    assert TRAFFIC_KEYS["traffic.latency_percentile"].value == 0.99


def test_generation_is_bounded_by_ttft_and_tpot_and_refuses_a_whole_answer_bound():
    traffic = parse(generation(), GENERATE)
    assert [(b.measure, b.bound_ms, b.percentile) for b in traffic.bounds] == [("ttft", 500.0, 0.99),
                                                                                ("tpot", 50.0, 0.99)]
    assert "traffic.latency_bound_ms" in refused(generation(latency_bound_ms=100), GENERATE).where
    assert "traffic.ttft_bound_ms" in refused(table(ttft_bound_ms=100)).where
    assert "traffic.tpot_bound_ms" in refused(generation(tpot_bound_ms=None), GENERATE).where


def test_different_ttft_and_tpot_percentiles_are_refused_as_loadgen_judges_both_at_one():
    error = refused(generation(ttft_percentile=0.99, tpot_percentile=0.9), GENERATE)
    assert "traffic.tpot_percentile" in error.where and "one percentile" in error.fix


def test_embeddings_are_bounded_as_a_whole_answer():
    assert parse(table(), "sentence-embedding").bounds[0].measure == "latency"


# --- the rest of the table ------------------------------------------------------------------------------------

def test_an_unknown_key_is_refused_with_the_accepted_ones():
    with pytest.raises(UserError) as caught:
        parse(table(rate_qpss=2))
    assert "rate_qpss" in caught.value.what and "min_query_count" in caught.value.fix
    with pytest.raises(StudyErrors):
        parse(table(a=1, b=2))


@pytest.mark.parametrize("changes", [{"arrivals": "uniform"}, {"seed": -1}, {"seed": 2**64},
                                     {"min_query_count": 0}, {"min_duration_s": -1}, {"max_duration_s": 0},
                                     {"min_query_count": 500.5}, {"latency_bound_ms": "200"}])
def test_out_of_range_or_mistyped_values_are_refused_naming_the_key(changes: dict[str, Any]):
    (key,) = changes
    assert f"traffic.{key}" in refused(table(**changes)).where


def test_a_missing_required_key_is_refused():
    assert "traffic.min_query_count" in refused(table(min_query_count=None)).where
    assert "traffic.latency_bound_ms" in refused(table(latency_bound_ms=None)).where


def test_the_record_round_trips_on_the_codec_with_its_schema_version():
    traffic = parse(table(seed=2**64 - 1))
    data = to_dict(traffic)
    assert data["schema_version"] == 1 and data["queries_needed"] == 459 and data["seed"] == 2**64 - 1
    assert from_dict(Traffic, data, "traffic") == traffic
    with pytest.raises(UserError):
        from_dict(Traffic, {**data, "queries_needed": 10}, "traffic")
    with pytest.raises(UserError):
        from_dict(Traffic, {**data, "schema_version": 2}, "traffic")


# --- traces ---------------------------------------------------------------------------------------------------

def write_trace(tmp_path: Path, times: list[float] | str) -> Path:
    text = times if isinstance(times, str) else "".join(f"{t}\n" for t in times)
    (tmp_path / "arrivals.txt").write_text(text, encoding="utf-8")
    return tmp_path


def trace_table(**changes: Any) -> dict[str, Any]:
    return table(**{"arrivals": "trace", "rates_qps": None, "trace": "arrivals.txt", "min_query_count": 44,
                    "latency_percentile": 0.9, "max_duration_s": None, **changes})


def test_a_sorted_trace_is_read_with_its_count_span_and_sha256(tmp_path: Path):
    base = write_trace(tmp_path, [i * 0.25 for i in range(50)])
    traffic = parse(trace_table(), base=base)
    assert traffic.arrivals == "trace" and traffic.rates_qps == ()
    assert traffic.trace is not None and traffic.trace.queries == 50 and traffic.trace.span_s == 12.25
    assert traffic.trace.sha256.startswith("sha256:") and from_dict(Traffic, to_dict(traffic), "t") == traffic


@pytest.mark.parametrize("text, words", [("0\n1\n0.5\n", "not sorted"), ("0\n-1\n", "not negative"),
                                         ("0\nnan\n", "finite"), ("0\ninf\n", "finite"), ("0\nsoon\n", "not a number"),
                                         ("\n\n", "no arrival")])
def test_a_bad_trace_is_refused_naming_the_line(text: str, words: str):
    with pytest.raises(UserError) as caught:
        trace_times(text.encode(), "study.toml, key traffic.trace")
    assert words in caught.value.what and "traffic.trace" in caught.value.where


def test_a_trace_too_short_for_the_query_count_is_refused(tmp_path: Path):
    base = write_trace(tmp_path, [float(i) for i in range(10)])
    error = refused(trace_table(), base=base)
    assert "10 arrivals" in error.what and "traffic.trace" in error.where


def test_a_trace_with_rates_or_without_a_file_is_refused(tmp_path: Path):
    base = write_trace(tmp_path, [float(i) for i in range(50)])
    assert "traffic.rate_qps" in refused(trace_table(rate_qps=2), base=base).where
    assert "traffic.trace" in refused(trace_table(trace=None), base=base).where
    assert "trace file" in refused(trace_table(trace="missing.txt"), base=base).what


def test_the_trace_is_read_relative_to_the_study_file(tmp_path: Path):
    write_trace(tmp_path, [float(i) for i in range(50)])
    reader = TableReader(str(tmp_path / "study.toml"), trace_table(), "traffic.")
    assert parse_traffic(reader, CLASSIFY).trace is not None


def test_docs_serving_shows_the_declared_key_table():
    page = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text(encoding="utf-8")
    shown = page.split("<!-- traffic keys -->\n", 1)[1].split("\n<!-- /traffic keys -->", 1)[0]
    assert shown == key_table()
