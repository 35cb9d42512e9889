"""One serving run: MLPerf LoadGen's Server scenario driving a :class:`~runner.trial.serving.sut.ServingSystem`.

:func:`run_server` builds LoadGen's query sample library and system under test from the serving system's
callbacks, runs the Server scenario (Poisson arrivals at the target rate from LoadGen's seeded RNG) under
:class:`ServerSettings`, and leaves in ``out``: LoadGen's own logs (``mlperf_log_summary.txt``,
``mlperf_log_detail.txt``, ``mlperf_log_accuracy.json``, ``mlperf_log_trace.json``) and the harness's
``answers.jsonl`` and ``queries.jsonl``; it returns :class:`ServingRun` (the parsed summary, queries answered
and failed). LoadGen (``mlcommons-loadgen``, the ``serving`` extra) is imported here only.

:meth:`ServerSettings.from_traffic` turns a study's ``[traffic]`` (:class:`protocol.study.traffic.Traffic`) and one of
its rates into the settings: the latency bound (or TTFT and TPOT bounds, with LoadGen's token latencies) at the
declared percentile, the minimum query count and durations, the seed (LoadGen's schedule, sample-index and library
seeds). ``mode = "accuracy"`` issues every sample once (LoadGen's accuracy mode: its accuracy log holds each
answer's bytes, and its summary no verdict); ``"performance"`` is the timed run.

Example::

    settings = ServerSettings(target_qps=2.0, latency_bound_ms=100.0, percentile=0.9, min_query_count=60,
                              min_duration_s=5.0, max_duration_s=60.0, seed=0)
    run = run_server(system, settings, out)
    run.summary.valid, run.summary.percentile_ms("latency", 0.99), run.unanswered
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from protocol.io.safe_write import make_dirs
from protocol.study.traffic import Traffic
from runner.trial.serving.summary import SUMMARY_FILE, LoadgenSummary, parse_summary
from runner.trial.serving.sut import ServingSystem


@dataclass(frozen=True)
class ServerSettings:
    """What LoadGen's Server scenario is told (milliseconds and seconds here; LoadGen takes ns and ms)."""

    target_qps: float
    percentile: float
    min_query_count: int
    min_duration_s: float
    max_duration_s: float | None  # None: no limit
    seed: int
    latency_bound_ms: float | None = None  # a whole answer's bound (classification, embeddings)
    ttft_bound_ms: float | None = None  # with tpot_bound_ms: LoadGen's token latencies (generation)
    tpot_bound_ms: float | None = None
    mode: Literal["performance", "accuracy"] = "performance"
    #: LoadGen's ``performance_issue_unique``: each sample of the library issued once, in a seeded random order
    #: (the run then issues exactly the library's size of queries).
    issue_unique: bool = False

    def __post_init__(self) -> None:
        if (self.latency_bound_ms is None) == (self.ttft_bound_ms is None or self.tpot_bound_ms is None):
            raise ValueError("give latency_bound_ms, or ttft_bound_ms with tpot_bound_ms")

    @property
    def token_latencies(self) -> bool:
        return self.ttft_bound_ms is not None

    @classmethod
    def from_traffic(cls, traffic: Traffic, rate_qps: float, mode: Literal["performance", "accuracy"] = "performance"
                     ) -> ServerSettings:
        """The settings of one run of ``traffic`` at ``rate_qps`` (one of its rates)."""
        if rate_qps not in traffic.rates_qps:
            raise ValueError(f"{rate_qps} is not one of the declared rates {traffic.rates_qps}")
        bounds = {bound.measure: bound for bound in traffic.bounds}
        first = traffic.bounds[0]
        return cls(target_qps=rate_qps, percentile=first.percentile, min_query_count=traffic.min_query_count,
                   min_duration_s=traffic.min_duration_s, max_duration_s=traffic.max_duration_s, seed=traffic.seed,
                   latency_bound_ms=bounds["latency"].bound_ms if "latency" in bounds else None,
                   ttft_bound_ms=bounds["ttft"].bound_ms if "ttft" in bounds else None,
                   tpot_bound_ms=bounds["tpot"].bound_ms if "tpot" in bounds else None, mode=mode)

    def test_settings(self, lg: Any, samples: int) -> Any:
        """LoadGen's ``TestSettings`` for these settings and a library of ``samples`` samples."""
        settings = lg.TestSettings()
        settings.scenario = lg.TestScenario.Server
        settings.mode = lg.TestMode.AccuracyOnly if self.mode == "accuracy" else lg.TestMode.PerformanceOnly
        settings.server_target_qps = self.target_qps
        settings.server_target_latency_percentile = self.percentile
        whole = self.latency_bound_ms if self.latency_bound_ms is not None else self.ttft_bound_ms
        assert whole is not None
        settings.server_target_latency_ns = _ns(whole)
        if self.token_latencies:
            assert self.ttft_bound_ms is not None and self.tpot_bound_ms is not None
            settings.use_token_latencies = True
            settings.ttft_latency = _ns(self.ttft_bound_ms)
            settings.tpot_latency = _ns(self.tpot_bound_ms)
        settings.min_query_count = self.min_query_count
        settings.min_duration_ms = round(self.min_duration_s * 1000)
        settings.max_duration_ms = 0 if self.max_duration_s is None else round(self.max_duration_s * 1000)
        settings.performance_sample_count_override = samples
        settings.performance_issue_unique = self.issue_unique
        settings.qsl_rng_seed = settings.sample_index_rng_seed = settings.schedule_rng_seed = self.seed
        return settings


def _ns(milliseconds: float) -> int:
    return round(milliseconds * 1_000_000)


@dataclass(frozen=True)
class ServingRun:
    """What one run gave: LoadGen's summary (None in accuracy mode: LoadGen writes no verdict there), the queries
    the harness saw, those left unanswered and why."""

    summary: LoadgenSummary | None
    queries: int
    unanswered: int
    errors: tuple[str, ...]
    batches: int


class _LoadgenResponder:
    """The completion calls, the response bytes kept alive until LoadGen has read them."""

    def __init__(self, lg: Any) -> None:
        self.lg = lg

    def complete(self, answered: Sequence[tuple[int, bytes, int]]) -> None:
        buffers = [ctypes.create_string_buffer(data, len(data)) for _, data, _ in answered]
        self.lg.QuerySamplesComplete([
            self.lg.QuerySampleResponse(query, ctypes.addressof(buffer), len(data), n_tokens)
            for (query, data, n_tokens), buffer in zip(answered, buffers, strict=True)])

    def first_token(self, queries: Sequence[int]) -> None:
        self.lg.FirstTokenComplete([self.lg.QuerySampleResponse(query, 0, 0, 1) for query in queries])


def run_server(system: ServingSystem, settings: ServerSettings, out: Path) -> ServingRun:
    """Run LoadGen's Server scenario against ``system``; LoadGen's logs and the harness's files land in ``out``."""
    import mlperf_loadgen as lg

    make_dirs(out)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(out)
    log_settings.log_output.copy_summary_to_stdout = False
    count = len(system.samples)
    sut = lg.ConstructSUT(system.issue_queries, system.flush_queries)
    qsl = lg.ConstructQSL(count, count, system.load_samples, system.unload_samples)
    system.start(_LoadgenResponder(lg))
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings.test_settings(lg, count), log_settings)
    finally:
        system.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    system.write(out)
    summary = parse_summary(out / SUMMARY_FILE) if settings.mode == "performance" else None
    return ServingRun(summary=summary, queries=len(system.records),
                      unanswered=system.unanswered, errors=tuple(dict.fromkeys(system.errors)),
                      batches=system.batches)
