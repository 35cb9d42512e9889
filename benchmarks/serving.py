"""Benchmark 9: the serving harness's own cost per query, LoadGen against LoadGen (issue 36).

Both sides are MLPerf LoadGen's Server scenario at the same target rate, the same seed (so the same Poisson
schedule of arrivals), the same run length and the same fixed service time per query (``time.sleep``, which lets
LoadGen's threads run as a model's kernels do):

- isocost: :class:`runner.trial.serving.sut.ServingSystem` (the dynamic batcher at ``max_batch = 1``, no wait; the
  query sample library tokenized by a model whose ``predict_encoded`` sleeps; each answer a JSON line sent as the
  response bytes and stored by query and id; each query's times) under :func:`runner.trial.serving.loadgen_run.
  run_server`;
- bare: a queue and one worker thread that sleeps the service time and completes the query with an empty response:
  the least a LoadGen system under test in Python can be.

Pairs run interleaved (ABBA). Per pair: the completed rate ratio (isocost / bare, target ≥ 0.98) and the p99 latency
added (isocost's p99 − bare's, target ≤ 5 ms), both from LoadGen's own summaries.

Row 9c checks the schedulable maximum a ``[traffic]`` table may declare (:data:`protocol.study.traffic.MAX_RATE_QPS`):
LoadGen against a system under test that answers at once, at that rate, a few runs: the completed rate against the
target (≥ 0.98) and the p99.

Example::

    python -m benchmarks --only 9 --serving-pairs 5
"""

from __future__ import annotations

import json
import queue
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import Row, Spread, fmt_ratio, interleaved, judge
from protocol.study.traffic import MAX_RATE_QPS
from runner.trial.serving.loadgen_run import ServerSettings, run_server
from runner.trial.serving.summary import LoadgenSummary, parse_summary
from runner.trial.serving.sut import BatcherSettings, ServedModel, ServingSystem

RATE_TARGET = 0.98
P99_ADDED_TARGET_MS = 5.0
SAMPLES = tuple((f"q-{i:03d}", f"query text number {i}") for i in range(64))


class _Sleeper(ServedModel):
    """A model that takes a fixed time per batch."""

    def __init__(self, service_s: float) -> None:
        self.service_s = service_s

    def tokenize(self, texts: list[str]) -> list[dict[str, list[int]]]:
        return [{"input_ids": [len(text)]} for text in texts]

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> list[int]:
        time.sleep(self.service_s)
        return [feature["input_ids"][0] for feature in features]


def _lines(ids: Sequence[str], outputs: list[int]) -> str:
    return "".join(json.dumps({"id": ident, "label": str(n)}) + "\n" for ident, n in zip(ids, outputs, strict=True))


def _isocost(settings: ServerSettings, service_s: float, out: Path) -> LoadgenSummary:
    system = ServingSystem(_Sleeper(service_s), SAMPLES, _lines, BatcherSettings(max_batch=1, max_wait_ms=0))
    run = run_server(system, settings, out)
    assert run.summary is not None and run.unanswered == 0
    return run.summary


def _bare(settings: ServerSettings, service_s: float, out: Path) -> LoadgenSummary:
    """LoadGen against a queue, one worker thread, a sleep and an empty response."""
    import mlperf_loadgen as lg

    waiting: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def work() -> None:
        while (sample := waiting.get()) is not None:
            time.sleep(service_s)
            lg.QuerySamplesComplete([lg.QuerySampleResponse(sample.id, 0, 0)])

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    def issue(samples: Any) -> None:
        for sample in samples:
            waiting.put(sample)

    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(len(SAMPLES), len(SAMPLES), lambda indices: None, lambda indices: None)
    log = lg.LogSettings()
    log.log_output.outdir = str(out)
    log.log_output.copy_summary_to_stdout = False
    out.mkdir(parents=True, exist_ok=True)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings.test_settings(lg, len(SAMPLES)), log)
    finally:
        waiting.put(None)
        worker.join()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return parse_summary(out / "mlperf_log_summary.txt")


def _empty(settings: ServerSettings, out: Path) -> LoadgenSummary:
    """LoadGen against a system under test that completes each query inside ``issue_queries``."""
    import mlperf_loadgen as lg

    def issue(samples: Any) -> None:
        lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples])

    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(len(SAMPLES), len(SAMPLES), lambda indices: None, lambda indices: None)
    log = lg.LogSettings()
    log.log_output.outdir = str(out)
    log.log_output.copy_summary_to_stdout = False
    out.mkdir(parents=True, exist_ok=True)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings.test_settings(lg, len(SAMPLES)), log)
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return parse_summary(out / "mlperf_log_summary.txt")


def schedulable(runs: int = 3, duration_s: float = 2.0, progress: Any = print) -> Row:
    """Row 9c: LoadGen at the declared maximum rate against an empty system under test."""
    settings = ServerSettings(target_qps=MAX_RATE_QPS, percentile=0.99, min_query_count=round(MAX_RATE_QPS),
                              min_duration_s=duration_s, max_duration_s=duration_s * 4, seed=1, latency_bound_ms=10.0)
    progress(f"  LoadGen Server at the declared maximum {MAX_RATE_QPS:g} qps, empty system under test, {runs} runs")
    with tempfile.TemporaryDirectory(prefix="isocost-bench-schedulable-") as tmp:
        summaries = [_empty(settings, Path(tmp) / str(i)) for i in range(runs)]
    share = Spread(tuple((s.completed_qps or 0) / MAX_RATE_QPS for s in summaries))
    p99 = Spread(tuple(s.percentile_ms("latency", 0.99) or 0 for s in summaries))
    met, reason = judge(share, RATE_TARGET, higher_is_better=True)
    return Row(key="9c", title=f"serving: LoadGen at the declared maximum rate ({MAX_RATE_QPS:g} qps, empty system "
               f"under test, {duration_s:g} s runs)", measured=f"{fmt_ratio(share)} completed/target rate; p99 "
               f"{fmt_ratio(p99, 2)} ms; {sum(s.valid for s in summaries)}/{runs} VALID at p99 ≤ 10 ms",
               baseline=f"{MAX_RATE_QPS:g} qps target", target=f"≥ {RATE_TARGET:g} × target", met=met, reason=reason,
               details={"completed_qps": [s.completed_qps for s in summaries], "p99_ms": list(p99.samples)})


def run(rate_qps: float = 50.0, service_ms: float = 5.0, duration_s: float = 8.0, pairs: int = 5,
        progress: Any = print) -> list[Row]:
    settings = ServerSettings(target_qps=rate_qps, percentile=0.99, min_query_count=round(rate_qps * duration_s),
                              min_duration_s=duration_s, max_duration_s=duration_s * 4, seed=1,
                              latency_bound_ms=service_ms * 20)
    progress(f"  LoadGen Server, {rate_qps:g} qps, {service_ms:g} ms per query, {duration_s:g} s per run, "
             f"{pairs} pairs (isocost's system under test vs a bare worker thread)")
    summaries: dict[str, list[LoadgenSummary]] = {"isocost": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="isocost-bench-serving-") as tmp:
        def side(name: str, function: Any) -> Any:
            def once() -> float:
                summary = function(settings, service_ms / 1000, Path(tmp) / f"{name}-{len(summaries[name])}")
                summaries[name].append(summary)
                return 0.0
            return once

        interleaved(pairs, side("isocost", _isocost), side("bare", _bare))
    return [*_rows(summaries, settings, service_ms, pairs), schedulable(progress=progress)]


def _rows(summaries: dict[str, list[LoadgenSummary]], settings: ServerSettings, service_ms: float,
          pairs: int) -> list[Row]:
    ours, bare = summaries["isocost"], summaries["bare"]
    rate = Spread(tuple((a.completed_qps or 0) / (b.completed_qps or 1) for a, b in zip(ours, bare, strict=True)))
    added = Spread(tuple(((a.percentile_ms("latency", 0.99) or 0) - (b.percentile_ms("latency", 0.99) or 0))
                         for a, b in zip(ours, bare, strict=True)))
    p99 = {name: Spread(tuple(s.percentile_ms("latency", 0.99) or 0 for s in runs)) for name, runs in summaries.items()}
    qps = {name: Spread(tuple(s.completed_qps or 0 for s in runs)) for name, runs in summaries.items()}
    what = (f"LoadGen Server at {settings.target_qps:g} qps, {service_ms:g} ms fixed service, "
            f"{settings.min_duration_s:g} s per run, {pairs} pairs")
    rate_met, rate_reason = judge(rate, RATE_TARGET, higher_is_better=True)
    added_met, added_reason = judge(added, P99_ADDED_TARGET_MS, higher_is_better=False)
    details = {name: [{"completed_qps": s.completed_qps, "scheduled_qps": s.scheduled_qps, "valid": s.valid,
                       "latency_ns": s.latency_ns} for s in runs] for name, runs in summaries.items()}
    return [
        Row(key="9", title=f"serving: completed rate, isocost's system under test vs a bare function ({what})",
            measured=f"{fmt_ratio(qps['isocost'], 2)} qps isocost", baseline=f"{fmt_ratio(qps['bare'], 2)} qps bare",
            ratio=f"{fmt_ratio(rate)} isocost/bare completed rate", target=f"≥ {RATE_TARGET:g} × bare",
            met=rate_met, reason=rate_reason, details={"runs": details}),
        Row(key="9b", title=f"serving: p99 latency added by isocost's system under test ({what})",
            measured=f"{fmt_ratio(p99['isocost'], 2)} ms p99 isocost", baseline=f"{fmt_ratio(p99['bare'], 2)} ms "
            "p99 bare", ratio=f"{fmt_ratio(added, 2)} ms added", target=f"≤ {P99_ADDED_TARGET_MS:g} ms added",
            met=added_met, reason=added_reason),
    ]
