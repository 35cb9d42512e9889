"""MLPerf LoadGen's Server scenario driving the serving system (runner/trial/serving/): a fake model with a fixed
service time (the facts' 50 ms at 2 QPS), every answer kept by query and id, LoadGen's logs kept, its per-query
times matching the harness's, a failing batch answered empty and counted, token latencies, accuracy mode.
A few seconds of traffic each."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mlperf_loadgen")

from protocol.study.reader import TableReader  # noqa: E402
from protocol.study.traffic import parse_traffic, queries_needed  # noqa: E402
from runner.trial.serving.loadgen_run import ServerSettings, run_server  # noqa: E402
from runner.trial.serving.summary import LOG_FILES, trace_samples  # noqa: E402
from runner.trial.serving.sut import BatcherSettings, ServingSystem  # noqa: E402

SAMPLES = [(f"doc-{i:02d}", "word " * (i + 1)) for i in range(12)]


class FixedTime:
    """A model that takes ``service_s`` per batch and labels each text by its word count; ``fail_on``: an id whose
    batch raises; with ``tokens``: reports its first token half-way (``on_first_token``)."""

    def __init__(self, service_s: float, fail_on: str = "", tokens: bool = False) -> None:
        self.service_s, self.fail_on, self.calls = service_s, fail_on, 0
        self.reports_first_token = tokens
        if tokens:
            self.on_first_token: Any = None

    def tokenize(self, texts: list[str]) -> list[dict[str, Any]]:
        return [{"input_ids": [len(text.split())], "text": text} for text in texts]

    def predict_encoded(self, features: list[dict[str, Any]]) -> list[int]:
        self.calls += 1
        if hasattr(self, "on_first_token"):
            time.sleep(self.service_s / 2)
            self.on_first_token()
            time.sleep(self.service_s / 2)
        else:
            time.sleep(self.service_s)
        if any(feature["text"] == dict(SAMPLES).get(self.fail_on) for feature in features):
            raise RuntimeError("the model failed")
        return [feature["input_ids"][0] for feature in features]


def lines(ids: Sequence[str], outputs: list[int]) -> str:
    return "".join(json.dumps({"id": ident, "label": f"words={n}"}) + "\n"
                   for ident, n in zip(ids, outputs, strict=True))


def expected(ident: str) -> str:
    return f"words={len(dict(SAMPLES)[ident].split())}"


def settings(**changes: Any) -> ServerSettings:
    values: dict[str, Any] = {"target_qps": 20.0, "percentile": 0.9, "min_query_count": 20, "min_duration_s": 1.0,
                              "max_duration_s": 20.0, "seed": 3, "latency_bound_ms": 200.0, **changes}
    return ServerSettings(**values)


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_fixed_50_ms_service_at_2_qps_is_served_logged_and_judged_by_loadgen(tmp_path: Path):
    system = ServingSystem(FixedTime(0.05), SAMPLES, lines, BatcherSettings(max_batch=1, max_wait_ms=0))
    run = run_server(system, settings(target_qps=2.0, percentile=0.99, min_query_count=8, min_duration_s=4.0,
                                      latency_bound_ms=500.0), tmp_path)
    summary = run.summary
    assert summary is not None
    assert all((tmp_path / name).is_file() for name in LOG_FILES)
    assert summary.scenario == "Server" and run.unanswered == 0 and run.errors == ()
    assert summary.queries_processed == run.queries >= 8
    assert 50 <= summary.latency_ns["50.00"] / 1e6 < 150  # the service time, and what LoadGen and the harness add
    assert summary.completed_qps is not None and 0.5 < summary.completed_qps < 8
    # p99 from a handful of queries: LoadGen's early stopping refuses to decide it, asking for the traffic rule's count
    assert not summary.valid and summary.early_stopping_met is False and summary.more_queries_needed is not None
    if summary.latency_ns["max"] <= 500e6:  # every query under the bound: LoadGen asks for exactly the rule's count
        assert summary.queries_processed + summary.more_queries_needed == queries_needed(0.99)
    answers = read_lines(tmp_path / "answers.jsonl")
    assert len(answers) == run.queries and all(a["label"] == expected(a["id"]) for a in answers)
    assert all(SAMPLES[a["index"]][0] == a["id"] for a in answers)


def test_loadgen_trace_times_match_the_harness_per_query(tmp_path: Path):
    system = ServingSystem(FixedTime(0.01), SAMPLES, lines, BatcherSettings(max_batch=4, max_wait_ms=2))
    run = run_server(system, settings(), tmp_path)
    queries = {q["seq"]: q for q in read_lines(tmp_path / "queries.jsonl")}
    trace = trace_samples(tmp_path / "mlperf_log_trace.json")
    assert len(trace) == len(queries) == run.queries
    for sample in trace:
        mine = queries[sample.sample_seq]
        assert mine["index"] == sample.sample_index
        loadgen_ms = (sample.completed_ns - sample.issued_ns) / 1e6
        harness_ms = (mine["completed_ns"] - mine["issued_ns"]) / 1e6
        assert harness_ms <= loadgen_ms + 0.5 and loadgen_ms - harness_ms < 100  # the harness's view lies inside
        assert mine["issued_ns"] <= mine["started_ns"] <= mine["completed_ns"] and mine["first_token_ns"] is None


def test_a_failing_batch_is_answered_empty_counted_and_the_run_still_ends(tmp_path: Path):
    system = ServingSystem(FixedTime(0.005, fail_on="doc-03"), SAMPLES, lines, BatcherSettings(1, 0))
    run = run_server(system, settings(min_query_count=40), tmp_path)
    failed = [q for q in read_lines(tmp_path / "queries.jsonl") if q["error"]]
    assert run.unanswered == len(failed) > 0 and run.errors == ("RuntimeError: the model failed",)
    assert {q["id"] for q in failed} == {"doc-03"}
    answered = read_lines(tmp_path / "answers.jsonl")
    assert len(answered) == run.queries - run.unanswered and "doc-03" not in {a["id"] for a in answered}


def test_token_latencies_first_token_reported_to_loadgen_and_kept(tmp_path: Path):
    system = ServingSystem(FixedTime(0.02, tokens=True), SAMPLES, lines, BatcherSettings(1, 0),
                           token_counts=lambda outputs: [4] * len(outputs))
    run = run_server(system, settings(latency_bound_ms=None, ttft_bound_ms=100.0, tpot_bound_ms=50.0), tmp_path)
    assert run.summary is not None
    assert run.summary.first_token_ns and run.summary.tpot_ns
    assert 10 <= run.summary.first_token_ns["50.00"] / 1e6 < run.summary.latency_ns["50.00"] / 1e6
    queries = read_lines(tmp_path / "queries.jsonl")
    assert all(q["issued_ns"] < q["first_token_ns"] < q["completed_ns"] and q["n_tokens"] == 4 for q in queries)


def test_accuracy_mode_issues_every_sample_and_loadgen_logs_each_answer(tmp_path: Path):
    system = ServingSystem(FixedTime(0.002), SAMPLES, lines, BatcherSettings(4, 1))
    run = run_server(system, settings(mode="accuracy"), tmp_path)
    answers = read_lines(tmp_path / "answers.jsonl")
    assert run.summary is None and sorted(a["id"] for a in answers) == sorted(i for i, _ in SAMPLES)
    logged = json.loads((tmp_path / "mlperf_log_accuracy.json").read_text(encoding="utf-8"))
    by_index = {entry["qsl_idx"]: json.loads(bytes.fromhex(entry["data"])) for entry in logged}
    assert {index: line["id"] for index, line in by_index.items()} == {i: ident for i, (ident, _) in enumerate(SAMPLES)}


def test_settings_come_from_the_traffic_table():
    traffic = parse_traffic(TableReader("s.toml", {"rates_qps": [1.0, 3.0], "min_query_count": 500,
                                                   "latency_bound_ms": 150, "seed": 9}, "traffic."),
                            "text-classification")
    server = ServerSettings.from_traffic(traffic, 3.0)
    assert (server.target_qps, server.latency_bound_ms, server.percentile, server.min_query_count, server.seed) == (
        3.0, 150.0, 0.99, 500, 9)
    import mlperf_loadgen as lg

    test = server.test_settings(lg, 12)
    assert test.server_target_latency_ns == 150_000_000 and test.max_duration_ms == 0
    assert test.schedule_rng_seed == 9 and test.performance_sample_count_override == 12
    with pytest.raises(ValueError):
        ServerSettings.from_traffic(traffic, 2.0)


def test_a_system_needs_one_text_per_id_and_a_bound():
    with pytest.raises(ValueError, match="names two texts"):
        ServingSystem(FixedTime(0), [("a", "x"), ("a", "y")], lines, BatcherSettings(1, 0))
    assert len(ServingSystem(FixedTime(0), [("a", "x"), ("a", "x")], lines, BatcherSettings(1, 0)).samples) == 2
    with pytest.raises(ValueError):
        settings(latency_bound_ms=None)
