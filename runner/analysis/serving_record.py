"""summary.json's ``serving`` record (:class:`protocol.records.serving.ServingSummary`), from a server campaign's
sealed trial files: each trial's ``manifest.json`` ``serving`` block (LoadGen's verdict, the rates, the latency at
the percentile) and its ``queries.jsonl`` (every query's issue and completion time: the run's latency
distribution), with the re-derived verdicts (the answers accepted or not).

A variant (one configuration at one rate) is **serving-acceptable** only when every one of its runs has accepted
answers (the task's gate on the file written from the answers AND the same result as the reference at that rate)
AND LoadGen says VALID. A run with fewer answered queries than the declared percentile needs
(:func:`protocol.study.traffic.queries_needed`) is marked ``too_short``, whatever LoadGen said.

Example::

    record = serving_record(campaign.paths, study, rows, verdicts, summary)   # None for an offline study
    record.variants[0].runs[0].distribution.p99_ms
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.safe_read import open_binary
from protocol.records.manifest import read_manifest
from protocol.records.serving import (
    BOUND_MULTIPLES,
    ServingRun,
    ServingSummary,
    ServingVariant,
    TokenLatency,
    distribution,
)
from protocol.records.summary import Summary
from protocol.study.load import Study
from protocol.study.model import configuration_id
from runner.campaign_dir.layout import CampaignPaths

#: The harness's per-query times in a server trial's directory (sealed with its outputs).
QUERIES_FILE = "queries.jsonl"


def serving_record(paths: CampaignPaths, study: Study, rows: Sequence[Any], verdicts: dict[str, Any],
                   summary: Summary) -> ServingSummary | None:
    """The ``serving`` record of a server study's campaign (None for an offline one). ``rows``: raw rows with
    ``trial_id`` and ``variant_id``, in run order; ``verdicts``: trial id → its re-derived verdict."""
    traffic = study.traffic
    if traffic is None:
        return None
    bound = traffic.bounds[0]
    whole = traffic.bound("latency")
    whole_ms = whole.bound_ms if whole is not None else None
    rates = {v.variant_id: v.rate_qps for v in study.variants()}
    equivalent = {v.variant_id: v.equivalent is True for v in summary.variants}
    runs: dict[str, list[ServingRun]] = {}
    for row in rows:
        reference = study.reference_for(row.variant_id)
        same = equivalent.get(row.variant_id, False) or row.variant_id == reference
        runs.setdefault(row.variant_id, []).append(
            _run(paths, row.trial_id, whole_ms, traffic.queries_needed, verdicts.get(row.trial_id) or {}, same,
                 reference))
    variants = tuple(ServingVariant(variant_id=variant, configuration_id=configuration_id(variant),
                                    rate_qps=rates.get(variant), acceptable=all(_acceptable(r) for r in found),
                                    runs=tuple(found)) for variant, found in runs.items())
    return ServingSummary(rates_qps=traffic.rates_qps, measure=bound.measure, percentile=bound.percentile,
                          bound_ms=bound.bound_ms, queries_needed=traffic.queries_needed,
                          bound_multiples=BOUND_MULTIPLES, variants=variants,
                          acceptable=tuple(v.variant_id for v in variants if v.acceptable))


def _acceptable(run: ServingRun) -> bool:
    return run.answers_accepted and run.loadgen_result == "VALID"


def _run(paths: CampaignPaths, trial_id: str, bound_ms: float | None, needed: int, verdict: dict[str, Any],
         same: bool, reference: str) -> ServingRun:
    """One trial's run: its manifest's ``serving`` block, its queries' latencies, its verdict."""
    trial_dir = paths.trial_dir(trial_id)
    manifest = read_manifest(trial_dir)
    serving: dict[str, Any] = (manifest.serving if manifest is not None else None) or {}
    times = _query_times(trial_dir / QUERIES_FILE)
    latencies, failed = times.latencies_ms, times.failed
    gate = bool(verdict.get("corpus_accepted"))
    reason = ("" if gate and same else "the gate refused the pass" if not gate else
              f"not shown the same result as {reference}")
    return ServingRun(
        trial_id=trial_id, target_qps=serving.get("target_qps"), scheduled_qps=serving.get("scheduled_qps"),
        completed_qps=serving.get("completed_qps"), loadgen_result=serving.get("result"),
        early_stopping_met=serving.get("early_stopping_met"),
        latency_at_percentile_ms=serving.get("latency_at_percentile_ms"),
        latency_within_bound=serving.get("latency_within_bound"), answers_accepted=gate and same,
        answers_reason=reason, queries=len(latencies), failed_queries=failed, too_short=len(latencies) < needed,
        distribution=distribution(latencies, bound_ms),
        ttft=_token_latency(serving, "ttft", times.ttft_ms), tpot=_token_latency(serving, "tpot", times.tpot_ms))


def _token_latency(serving: dict[str, Any], name: str, measured_ms: list[float]) -> TokenLatency | None:
    """A generation run's ``ttft`` or ``tpot`` (None for a run without token latencies in its manifest)."""
    if not serving.get("token_latencies"):
        return None
    bound = serving.get(f"{name}_bound_ms")
    return TokenLatency(at_percentile_ms=serving.get(f"{name}_at_percentile_ms"), bound_ms=bound,
                        within_bound=serving.get(f"{name}_within_bound"),
                        distribution=distribution(measured_ms, bound))


@dataclass
class QueryTimes:
    """A run's answered queries' times (ms) from its ``queries.jsonl``: issue to completion, issue to first token
    (queries whose first token was reported), and time per output token after the first (answers of two tokens or
    more: ``(completed - first token) / (tokens - 1)``, MLPerf's TPOT); ``failed``: queries answered with an error."""

    latencies_ms: list[float]
    ttft_ms: list[float]
    tpot_ms: list[float]
    failed: int


def _latencies(path: Path) -> tuple[list[float], int]:
    """Each answered query's issue-to-completion time (ms) and how many failed (see :func:`_query_times`)."""
    times = _query_times(path)
    return times.latencies_ms, times.failed


def _query_times(path: Path) -> QueryTimes:
    """Each answered query's times in a trial's ``queries.jsonl`` (all empty when the trial wrote none: a run that
    never started)."""
    times = QueryTimes([], [], [], 0)
    if not path.is_file():
        return times
    with open_binary(path, "queries file") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                _add_query(times, json.loads(line))
            except (ValueError, KeyError, TypeError):
                raise UserError(f"line {number} of {path.name} is not a query's times", str(path),
                                "Restore the trial directory from a bundle; its seal names the file.") from None
    return times


def _add_query(times: QueryTimes, query: dict[str, Any]) -> None:
    issued, completed, error = query["issued_ns"], query["completed_ns"], query["error"]
    if error is not None:
        times.failed += 1
        return
    times.latencies_ms.append((completed - issued) / 1e6)
    first, tokens = query.get("first_token_ns"), query.get("n_tokens")
    if first is not None:
        times.ttft_ms.append((first - issued) / 1e6)
        if isinstance(tokens, int) and tokens > 1:
            times.tpot_ms.append((completed - first) / 1e6 / (tokens - 1))
