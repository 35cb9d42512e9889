"""summary.json's ``serving`` record (:class:`protocol.serving_summary.ServingSummary`), from a server campaign's
sealed trial files: each trial's ``manifest.json`` ``serving`` block (LoadGen's verdict, the rates, the latency at
the percentile) and its ``queries.jsonl`` (every query's issue and completion time: the run's latency
distribution), with the re-derived verdicts (the answers accepted or not).

A variant (one configuration at one rate) is **serving-acceptable** only when every one of its runs has accepted
answers (the task's gate on the file written from the answers AND the same result as the reference at that rate)
AND LoadGen says VALID. A run with fewer answered queries than the declared percentile needs
(:func:`protocol.traffic.queries_needed`) is marked ``too_short``, whatever LoadGen said.

Example::

    record = serving_record(campaign.paths, study, rows, verdicts, summary)   # None for an offline study
    record.variants[0].runs[0].distribution.p99_ms
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.manifest import read_manifest
from protocol.safe_read import open_binary
from protocol.serving_summary import (
    BOUND_MULTIPLES,
    ServingRun,
    ServingSummary,
    ServingVariant,
    distribution,
)
from protocol.stats import Summary
from protocol.study import Study
from protocol.study_records import configuration_id
from protocol.traffic import LatencyBound
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
    rates = {v.variant_id: v.rate_qps for v in study.variants()}
    equivalent = {v.variant_id: v.equivalent is True for v in summary.variants}
    runs: dict[str, list[ServingRun]] = {}
    for row in rows:
        reference = study.reference_for(row.variant_id)
        same = equivalent.get(row.variant_id, False) or row.variant_id == reference
        runs.setdefault(row.variant_id, []).append(
            _run(paths, row.trial_id, bound, traffic.queries_needed, verdicts.get(row.trial_id) or {}, same,
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


def _run(paths: CampaignPaths, trial_id: str, bound: LatencyBound, needed: int, verdict: dict[str, Any],
         same: bool, reference: str) -> ServingRun:
    """One trial's run: its manifest's ``serving`` block, its queries' latencies, its verdict."""
    trial_dir = paths.trial_dir(trial_id)
    manifest = read_manifest(trial_dir)
    serving: dict[str, Any] = (manifest.serving if manifest is not None else None) or {}
    latencies, failed = _latencies(trial_dir / QUERIES_FILE)
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
        distribution=distribution(latencies, bound.bound_ms))


def _latencies(path: Path) -> tuple[list[float], int]:
    """Each answered query's issue-to-completion time (ms) in a trial's ``queries.jsonl``, and how many failed
    ([] and 0 when the trial wrote none: a run that never started)."""
    if not path.is_file():
        return [], 0
    latencies: list[float] = []
    failed = 0
    with open_binary(path, "queries file") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                query = json.loads(line)
                issued, completed, error = query["issued_ns"], query["completed_ns"], query["error"]
                if error is not None:
                    failed += 1
                    continue
                latencies.append((completed - issued) / 1e6)
            except (ValueError, KeyError, TypeError):
                raise UserError(f"line {number} of {path.name} is not a query's times", str(path),
                                "Restore the trial directory from a bundle; its seal names the file.") from None
    return latencies, failed
