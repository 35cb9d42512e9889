"""One variant on one campaign's hardware, as the decision weighs it: a :class:`Configuration`.

For each variant of each campaign this module gathers, from measured evidence
only: the passes the raw table recorded (failures included), the accepted
artifacts (:func:`count_artifacts`, the rule in
:data:`protocol.decision.records.ARTIFACT_RULE`), the contracted plan for the
campaign's measured period (:func:`protocol.decision.plan_fit.plan_cost`),
the deadline fit, the spread warnings that name the variant, the memory peaks
beside their capacities, and the reasons that exclude it from the ranking.

Example: ``build_configuration(evidence, variant, "threads=4 on rtx-4090 ×2 lots", period, spans, terms)``
is acceptable when its quality is equivalent, a corpus was accepted, the cost is known and the deadline fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from protocol.costing.calendar import Window, merge_intervals
from protocol.costing.period import CampaignPeriod
from protocol.costing.plans import Catalog
from protocol.decision.evidence import CampaignEvidence, TrialCapacity, names_variant
from protocol.decision.plan_fit import deadline_fit, plan_cost
from protocol.decision.records import Configuration, CostResult, MemoryCounter, PassRecord
from protocol.records.summary import VariantSummary


@dataclass(frozen=True)
class DecisionTerms:
    """What every configuration is weighed against: the catalog, the deadline and the declared need.

    Example: ``DecisionTerms(catalog, window=None, deadline_reason="no deadline", expected_artifacts=1)``.
    """

    catalog: Catalog
    window: Window | None
    deadline_reason: str
    expected_artifacts: int


def count_artifacts(accepted_corpora: set[str] | frozenset[str], expected_artifacts: int) -> tuple[int, str]:
    """Accepted artifacts for costing: distinct accepted corpora, capped at what the job needs.

    Example: five accepted passes of one corpus, one expected: ``count_artifacts({"sha256:a"}, 1) == (1, …)``;
    ``count_artifacts(set(), 1)[0] == 0``.
    """
    distinct = len(accepted_corpora)
    counted = min(distinct, expected_artifacts)
    if distinct == 0:
        note = f"0 of {expected_artifacts} expected: no accepted pass, so no validated corpus"
    elif distinct < expected_artifacts:
        note = (f"{counted} of {expected_artifacts} expected: the campaign's passes covered {distinct} distinct "
                f"corpus; the other {expected_artifacts - distinct} were not produced and are not counted")
    elif distinct > expected_artifacts:
        note = (f"{counted} of {expected_artifacts} expected ({distinct} distinct corpora accepted; those beyond the "
                "declared need are not counted)")
    else:
        note = f"{counted} of {expected_artifacts} expected"
    return counted, note


def configuration_labels(campaigns: Sequence[CampaignEvidence]) -> dict[tuple[str, str], str]:
    """``(campaign_id, variant_id)`` → a name a reader tells apart: ``"threads=4 on rtx-4090 ×2 lots"``.

    The same variant on the same rented GPU type twice is told apart by its host, or else by its campaign.
    """
    labels: dict[tuple[str, str], str] = {}
    hosts: dict[str, str] = {e.campaign_id: e.host for e in campaigns}
    for evidence in campaigns:
        for variant in evidence.summary.variants:
            labels[(evidence.campaign_id, variant.variant_id)] = f"{variant.variant_id} on {evidence.hardware}"
    values = list(labels.values())
    distinct_hosts = len(set(hosts.values())) == len(hosts)
    for key, label in list(labels.items()):
        if values.count(label) > 1:
            # Same variant on the same rented GPU type: name the host, or else the campaign.
            suffix = f"host {hosts[key[0]]}" if distinct_hosts else f"campaign {key[0][:8]}"
            labels[key] = f"{label} [{suffix}]"
    return labels


def build_configuration(
    evidence: CampaignEvidence,
    variant: VariantSummary,
    label: str,
    period: CampaignPeriod,
    spans: Mapping[str, list[tuple[Any, Any]]],
    terms: DecisionTerms,
) -> Configuration:
    """One variant of one campaign with its passes, artifacts, cost, deadline fit, memory and exclusions.

    ``period`` is the campaign's measured period and ``spans`` its trials' own intervals
    (:func:`protocol.costing.period.trial_intervals`).
    """
    passes = pass_records(evidence, variant.variant_id)
    accepted_corpora = {evidence.corpus_content_fingerprint or evidence.corpus_fingerprint} if any(
        p.accepted for p in passes) else set()
    artifacts, artifact_note = count_artifacts(accepted_corpora, terms.expected_artifacts)
    cost = plan_cost(terms.catalog, evidence.rental_gpu, evidence.rental_lots, period.needed_h, artifacts,
                     no_gpu_reason=evidence.rental_empty_reason,
                     no_period_reason="; ".join(period.empty_reasons.values()))
    fits, fit_note = deadline_fit(period.needed_h, terms.window, terms.deadline_reason)
    own = [span for p in passes for span in spans.get(p.trial_id, [])]
    statuses = dict(variant.statuses)  # the pass figures are the summary's, never recomputed here
    exclusions = _exclusions(variant, artifacts, statuses, cost, fits, fit_note)
    return Configuration(
        configuration_id=label,
        variant_id=variant.variant_id,
        campaign_label=evidence.label,
        campaign_id=evidence.campaign_id,
        hardware=evidence.hardware,
        config=dict(variant.config),
        equivalent=variant.equivalent,
        quality_reason=variant.equivalence_reason,
        metric=variant.metric,
        median_metric=variant.median_metric,
        passes=passes,
        median_pass_s=variant.median_pass_s,
        min_pass_s=variant.min_pass_s,
        max_pass_s=variant.max_pass_s,
        relative_spread=_relative_spread(variant),
        attempts=variant.attempts,
        accepted_passes=variant.accepted,
        failures=variant.failed,
        statuses=statuses,
        distinct_accepted_corpora=len(accepted_corpora),
        accepted_artifacts=artifacts,
        expected_artifacts=terms.expected_artifacts,
        artifact_note=artifact_note,
        own_trials_s=merge_intervals(own) if own else None,
        campaign_needed_h=period.needed_h,
        cost=cost,
        deadline_fits=fits,
        deadline_note=fit_note,
        uncertainty=tuple(w for w in evidence.summary.warnings if names_variant(w, variant.variant_id)),
        memory=_memory_counters(passes, evidence.capacities),
        acceptable=not exclusions,
        exclusions=tuple(exclusions),
    )


def _relative_spread(variant: VariantSummary) -> float | None:
    """(max − min) / median of the accepted pass times, when at least two passes have one."""
    timed = sum(seconds is not None for seconds in variant.pass_s)
    median, low, high = variant.median_pass_s, variant.min_pass_s, variant.max_pass_s
    if timed < 2 or not median or low is None or high is None:
        return None
    return (high - low) / median


def pass_records(evidence: CampaignEvidence, variant_id: str) -> tuple[PassRecord, ...]:
    """Every attempted pass of ``variant_id`` in run order, failures included, with its re-derived verdict."""
    rows = [r for r in evidence.rows if r.variant_id == variant_id]
    rows.sort(key=lambda r: (r.order_index or 0, r.attempt or 0))
    return tuple(PassRecord(
        trial_id=r.trial_id,
        repetition=r.repetition or 0,
        status=r.status,
        pass_s=r.pass_s,
        accepted=r.trial_id in evidence.accepted_trials,
        peak_rss_bytes=r.peak_rss_bytes,
        peak_allocated_bytes=r.peak_allocated_bytes,
        peak_reserved_bytes=r.peak_reserved_bytes,
        device_used_bytes=r.device_used_bytes,
    ) for r in rows)


def _exclusions(
    variant: VariantSummary, artifacts: int, statuses: dict[str, int], cost: CostResult, fits: bool | None,
    fit_note: str,
) -> list[str]:
    """Why a configuration cannot be ranked: quality, no accepted corpus, unknown cost, missed deadline."""
    exclusions = []
    if variant.equivalent is not True:
        word = "not equivalent to" if variant.equivalent is False else "equivalence unknown against"
        exclusions.append(f"quality: {word} the reference ({variant.equivalence_reason})")
    if artifacts == 0:
        exclusions.append("no accepted corpus: " + _status_text(statuses))
    if cost.total_usd is None:
        exclusions.append("contracted cost unknown: " + cost.empty_reason)
    if fits is False:
        exclusions.append("deadline: " + fit_note)
    return exclusions


def with_rank(config: Configuration, rank: int | None) -> Configuration:
    """The configuration with its rank among the acceptable ones (``None``: not acceptable)."""
    return replace(config, rank=rank)


_COUNTERS = (
    ("host peak RSS", "peak_rss_bytes", "host"),
    ("GPU peak allocated (tensors)", "peak_allocated_bytes", "device"),
    ("GPU peak reserved (allocator)", "peak_reserved_bytes", "device"),
    ("device memory used (NVML/amdsmi)", "device_used_bytes", "device"),
)


def _memory_counters(
    passes: tuple[PassRecord, ...], capacities: Mapping[str, TrialCapacity],
) -> tuple[MemoryCounter, ...]:
    """Each memory counter's per-pass peaks beside the largest recorded capacity it is bounded by."""
    counters = []
    caps = [capacities[p.trial_id] for p in passes if p.trial_id in capacities]
    for name, column, kind in _COUNTERS:
        values = tuple(getattr(p, column) for p in passes)
        known = [v for v in values if v is not None]
        if not known and kind == "device":
            continue  # no GPU counter at all (CPU trial): the raw table holds the reason
        if kind == "host":
            found = [(c.host_memory_bytes, c.host_source) for c in caps if c.host_memory_bytes]
            capacity_name = "host RAM"
            missing = "host RAM not recorded in the trial manifests (no manifest host.memory_total_bytes)"
        else:
            found = [(c.device_total_bytes, c.device_source) for c in caps if c.device_total_bytes]
            capacity_name = "device memory"
            missing = ("device capacity not recorded (status.json memory.device_total_bytes and manifest "
                       "device.gpu_memory_bytes are empty)")
        capacity, source = (max(found)[0], max(found)[1]) if found else (None, "")
        counters.append(MemoryCounter(
            name=name, column=column, values=values, peak_bytes=max(known) if known else None,
            capacity_name=capacity_name, capacity_bytes=capacity, capacity_source=source,
            capacity_reason="" if capacity else missing,
        ))
    return tuple(counters)


def _status_text(statuses: dict[str, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in sorted(statuses.items())) or "no attempt"

