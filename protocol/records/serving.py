"""summary.json's ``serving`` record: a server study's runs per variant (configuration and rate), read by later
stages (capacity, ``decide``) without re-reading the trials' manifests.

:class:`ServingSummary` (on the codec, its own ``schema_version``) holds the declared traffic (rates, the bound and
its percentile, the queries that percentile needs: :func:`protocol.study.traffic.queries_needed`) and, per variant, a
:class:`ServingVariant`: its configuration's id (:func:`protocol.study.model.configuration_id`), its target rate,
whether it is serving-acceptable (every run's answers accepted AND LoadGen VALID), and each run
(:class:`ServingRun`): the scheduled and completed rates, LoadGen's verdict and its latency at the percentile against
the bound, whether the answers were accepted and why not, and the run's latency distribution measured from its
sealed ``queries.jsonl`` (:func:`distribution`: nearest-rank percentiles, the count of queries by multiples of the
bound, and the percentiles the run had too few queries to decide). The host fills it
(:mod:`runner.analysis.serving_record`); this module is the pure part.

Example::

    d = distribution([12.0, 15.5, 30.1], bound_ms=20.0)
    d.p50_ms, d.max_ms, d.undecided        # 15.5, 30.1, ("p50", "p90", "p95", "p99")
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from protocol.records.codec import OMIT_NONE, Schema
from protocol.study.traffic import queries_needed

SERVING_SUMMARY_SCHEMA_VERSION = 1
#: The percentiles a run's distribution shows, by name.
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))
#: The histogram's upper edges, as multiples of the latency bound (the last bin holds everything above).
BOUND_MULTIPLES: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Distribution:
    """One run's latencies (issue to completion, ms) of its answered queries: nearest-rank percentiles (the value
    at rank ``ceil(p × count)``), the extremes, the count per bin of the bound's multiples (``histogram``: counts
    at most 0.25, 0.5, 1 and 2 × the bound, then above), and ``undecided``: the percentiles whose
    :func:`~protocol.study.traffic.queries_needed` exceeds ``count`` (shown, but too few queries to decide a bound)."""

    count: int
    min_ms: float
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    histogram: tuple[int, ...]
    undecided: tuple[str, ...]


@dataclass(frozen=True)
class TokenLatency:
    """One token measure of a generation run: LoadGen's value at the declared percentile (None: not reported),
    its bound, whether it held, and the distribution measured from the run's queries (None: none answered)."""

    at_percentile_ms: float | None
    bound_ms: float | None
    within_bound: bool | None
    distribution: Distribution | None


@dataclass(frozen=True)
class ServingRun:
    """One server trial: what LoadGen said (None: no LoadGen result), the answers, and its distribution (None:
    no answered query, or no queries.jsonl)."""

    trial_id: str
    target_qps: float | None
    scheduled_qps: float | None
    completed_qps: float | None
    loadgen_result: str | None
    early_stopping_met: bool | None
    latency_at_percentile_ms: float | None
    latency_within_bound: bool | None
    answers_accepted: bool
    answers_reason: str
    queries: int
    failed_queries: int
    too_short: bool
    distribution: Distribution | None
    #: A generation's token latencies (absent for a task bounded by its whole answer): LoadGen's time to first
    #: token and time per output token at the percentile, against their bounds, and their distributions measured
    #: from ``queries.jsonl`` (TTFT: issue to first token; TPOT: first token to completion over the tokens after
    #: the first, MLPerf's definition; answers of one token have none).
    ttft: TokenLatency | None = field(default=None, metadata=OMIT_NONE)
    tpot: TokenLatency | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class ServingVariant:
    """A variant of a server study (one configuration at one rate) and its runs, in run order."""

    variant_id: str
    configuration_id: str
    rate_qps: float | None
    acceptable: bool
    runs: tuple[ServingRun, ...]


@dataclass(frozen=True)
class ServingSummary:
    """summary.json's ``serving`` (a server study only): the declared traffic and each variant's runs."""

    rates_qps: tuple[float, ...]
    measure: str
    percentile: float
    bound_ms: float
    queries_needed: int
    bound_multiples: tuple[float, ...]
    variants: tuple[ServingVariant, ...]
    acceptable: tuple[str, ...]
    schema_version: int = SERVING_SUMMARY_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("summary.json serving", SERVING_SUMMARY_SCHEMA_VERSION)


def nearest_rank(ordered: Sequence[float], share: float) -> float:
    """The value at rank ``ceil(share × n)`` of the sorted ``ordered`` (the nearest-rank percentile)."""
    return ordered[max(1, math.ceil(share * len(ordered))) - 1]


def distribution(latencies_ms: Sequence[float], bound_ms: float | None) -> Distribution | None:
    """The :class:`Distribution` of one run's latencies (None when there are none; no histogram when there is no
    bound to measure them against: a generation's whole answers, bounded by their tokens).

    Example: 48 latencies → ``undecided == ("p95", "p99")`` (90 and 459 queries needed; p90 needs 44)."""
    if not latencies_ms:
        return None
    ordered = sorted(latencies_ms)
    edges = [bound_ms * multiple for multiple in BOUND_MULTIPLES] if bound_ms is not None else []
    histogram = [0] * (len(edges) + 1) if edges else []
    for value in ordered if edges else ():
        histogram[next((i for i, edge in enumerate(edges) if value <= edge), len(edges))] += 1
    shares = dict(PERCENTILES)
    return Distribution(
        count=len(ordered), min_ms=ordered[0], max_ms=ordered[-1],
        **{f"{name}_ms": nearest_rank(ordered, share) for name, share in PERCENTILES},
        histogram=tuple(histogram),
        undecided=tuple(name for name in shares if queries_needed(shares[name]) > len(ordered)))
