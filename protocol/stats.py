"""Raw table (+ verdicts) → per-variant summary. A pure function: no files, no clock.

Five passes describe a small series; they prove nothing about long-term
stability. So: every raw time is shown, with median, min and max; no
percentile is computed from a handful of runs; failures are counted, never
dropped; and when the spread is comparable to the difference between two
medians the summary says the series cannot yet discriminate them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SUMMARY_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class VariantSummary:
    variant_id: str
    series: tuple[str, ...]
    config: dict[str, Any]
    attempts: int
    statuses: dict[str, int]
    accepted: int
    failed: int
    pass_s: tuple[float | None, ...]  # every attempt, in run order; None = no completed pass
    pass_s_labels: tuple[str, ...]  # trial ids matching pass_s
    median_pass_s: float | None
    min_pass_s: float | None
    max_pass_s: float | None
    metric: str
    median_metric: float | None
    subgroups: dict[str, dict[str, float]]
    min_agreement: float | None
    max_score_delta: float | None
    equivalent: bool | None
    equivalence_reason: str
    peak_rss_bytes: int | None
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    truncated_count: int | None
    oom_events: int = 0
    empty_reasons: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["series"] = list(self.series)
        data["pass_s"] = list(self.pass_s)
        data["pass_s_labels"] = list(self.pass_s_labels)
        return data


@dataclass(frozen=True)
class Summary:
    variants: tuple[VariantSummary, ...]
    warnings: tuple[str, ...]
    reference_variant: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SUMMARY_SCHEMA_VERSION,
            "reference_variant": self.reference_variant,
            "variants": [v.to_dict() for v in self.variants],
            "warnings": list(self.warnings),
        }


def _float(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def _int(text: str) -> int | None:
    return int(text) if text not in ("", None) else None


def summarize(
    rows: list[dict[str, str]],
    verdicts: dict[str, dict[str, Any]],
    variant_order: list[dict[str, Any]],
    quality: Any,
    reference_for: Callable[[str], str] | None = None,
) -> Summary:
    """``rows``: raw.csv rows; ``verdicts``: trial_id → verdict dict from validation.

    ``reference_for`` maps a variant to its reference variant (the same seed when the study
    declares common seeds); by default every variant is compared with ``quality.reference_variant``.
    """
    by_variant: dict[str, list[dict[str, str]]] = {v["variant_id"]: [] for v in variant_order}
    order_keys = [(int(r["order_index"]), int(r["attempt"])) for r in rows]
    for index in sorted(range(len(rows)), key=order_keys.__getitem__):  # stable, as sorted(rows, key=…)
        row = rows[index]
        by_variant.setdefault(row["variant_id"], []).append(row)

    reference_id = quality.reference_variant
    pick = reference_for or (lambda variant_id: reference_id)
    reference_metrics: dict[str, float | None] = {}  # a pure function of the reference's rows: computed once
    summaries = []
    for variant in variant_order:
        vid = variant["variant_id"]
        ref = pick(vid)
        if ref not in reference_metrics:
            reference_metrics[ref] = _median_metric(by_variant.get(ref, []), verdicts)
        summaries.append(_summarize_variant(variant, by_variant.get(vid, []), verdicts, quality,
                                            reference_metrics[ref], ref))
    warnings = list(_spread_warnings(summaries))
    for summary in summaries:
        if 0 < summary.accepted < 3:
            warnings.append(
                f"{summary.variant_id}: only {summary.accepted} accepted pass(es); a median of fewer than 3 "
                "passes says little. Run more repetitions."
            )
        if summary.attempts and summary.accepted == 0:
            warnings.append(f"{summary.variant_id}: no accepted pass; it cannot enter the cost comparison.")
    return Summary(variants=tuple(summaries), warnings=tuple(warnings), reference_variant=reference_id)


def _median_metric(rows: list[dict[str, str]], verdicts: dict[str, dict[str, Any]]) -> float | None:
    values = [verdicts[r["trial_id"]]["metric_value"] for r in rows
              if r["trial_id"] in verdicts and verdicts[r["trial_id"]]["corpus_accepted"]]
    return statistics.median(values) if values else None


def _median(values: list[float]) -> float:
    """``statistics.median`` without its per-call overhead (same arithmetic, same result)."""
    data = sorted(values)
    n = len(data)
    if n % 2 == 1:
        return data[n // 2]
    i = n // 2
    return (data[i - 1] + data[i]) / 2


def _summarize_variant(
    variant: dict[str, Any], rows: list[dict[str, str]], verdicts: dict[str, dict[str, Any]],
    quality: Any, ref_metric: float | None, reference_id: str,
) -> VariantSummary:
    # One pass over the rows: this runs once per variant, and a big sweep has tens of thousands.
    reasons: dict[str, str] = {}
    statuses: dict[str, int] = {}
    times: list[float | None] = []
    good: list[float] = []
    metrics: list[Any] = []
    subgroup_tables: list[dict[str, dict[str, float]]] = []
    agreements_known: list[float] = []
    deltas_known: list[float] = []
    rss: list[int] = []
    allocated: list[int] = []
    reserved: list[int] = []
    truncated: list[int] = []
    oom_events = 0
    get_verdict = verdicts.get
    for row in rows:
        status = row["status"]
        statuses[status] = statuses.get(status, 0) + 1
        verdict = get_verdict(row["trial_id"])
        if verdict is None:
            times.append(None)
        else:
            if verdict.get("corpus_accepted"):
                text = row["pass_s"]
                seconds = float(text) if text not in ("", None) else None
                times.append(seconds)
                if seconds is not None:
                    good.append(seconds)
                subgroup_tables.append(verdict.get("subgroups", {}))
            else:
                times.append(None)
            if verdict["corpus_accepted"]:
                metrics.append(verdict["metric_value"])
            # Agreement is measured on every complete pass, accepted or not: part of the quality reading.
            agreement = verdict.get("agreement")
            if agreement is not None:
                agreements_known.append(agreement)
            delta = verdict.get("max_score_delta")
            if delta is not None:
                deltas_known.append(delta)
        if row.get("peak_rss_bytes"):
            rss.append(int(row["peak_rss_bytes"]))
        if row.get("peak_allocated_bytes"):
            allocated.append(int(row["peak_allocated_bytes"]))
        if row.get("peak_reserved_bytes"):
            reserved.append(int(row["peak_reserved_bytes"]))
        if row.get("truncated_count"):
            truncated.append(int(row["truncated_count"]))
        events = row.get("oom_events", "")
        if events not in ("", None):
            oom_events += int(events) or 0
    accepted = len(subgroup_tables)
    collected: dict[str, dict[str, list[float]]] = {}
    for table in subgroup_tables:
        for group, values in table.items():
            per_group = collected.get(group)
            if per_group is None:
                per_group = collected[group] = {}
            for value, score in values.items():
                scores = per_group.get(value)
                if scores is None:
                    per_group[value] = [score]
                else:
                    scores.append(score)
    if not good:
        reasons["median_pass_s"] = "no accepted pass"
    metric = _median(metrics) if metrics else None
    subgroups = {g: {k: _median(v) for k, v in d.items()} for g, d in collected.items()}
    equivalent, why = _equivalence(reference_id, quality, metric, ref_metric, agreements_known, accepted)

    def peak(column: str, values: list[int]) -> int | None:
        if not values:
            first_reason = next((r["empty_reasons"] for r in rows if r.get("empty_reasons")), "")
            reasons[column] = _reason_for(column, first_reason) or "not measured"
            return None
        return max(values)

    return VariantSummary(
        variant_id=variant["variant_id"],
        series=tuple(variant.get("series", ())),
        config={k: variant[k] for k in variant if k not in ("variant_id", "series", "schema_version")},
        attempts=len(rows),
        statuses=statuses,
        accepted=accepted,
        failed=len(rows) - accepted,
        pass_s=tuple(times),
        pass_s_labels=tuple(r["trial_id"] for r in rows),
        median_pass_s=_median(good) if good else None,
        min_pass_s=min(good) if good else None,
        max_pass_s=max(good) if good else None,
        metric=quality.metric,
        median_metric=metric,
        subgroups=subgroups,
        min_agreement=min(agreements_known) if agreements_known else None,
        max_score_delta=max(deltas_known) if deltas_known else None,
        equivalent=equivalent,
        equivalence_reason=why,
        peak_rss_bytes=peak("peak_rss_bytes", rss),
        peak_allocated_bytes=peak("peak_allocated_bytes", allocated),
        peak_reserved_bytes=peak("peak_reserved_bytes", reserved),
        truncated_count=max(truncated) if truncated else None,
        oom_events=oom_events,
        empty_reasons=reasons,
    )


def _reason_for(column: str, reasons_text: str) -> str:
    for part in reasons_text.split("; "):
        key, _, reason = part.partition(": ")
        if key == column:
            return reason
    return ""


def _equivalence(
    reference_id: str, quality: Any, metric: float | None, ref_metric: float | None,
    agreements: list[float], accepted: int,
) -> tuple[bool | None, str]:
    if accepted == 0:
        return False, "no accepted pass"
    if ref_metric is None:
        return None, f"reference variant {reference_id} has no accepted pass to compare with"
    assert metric is not None
    drop = ref_metric - metric
    if drop > quality.max_metric_drop + 1e-12:
        return False, (f"{quality.metric} {metric:.4f} is {drop:.4f} below the reference "
                       f"({ref_metric:.4f}); tolerance {quality.max_metric_drop}")
    if agreements and min(agreements) < quality.min_agreement:
        return False, (f"agreement with the reference {min(agreements):.4f} < required "
                       f"{quality.min_agreement}")
    if not agreements:
        return None, "agreement with the reference not computed"
    return True, (f"within tolerance: {quality.metric} drop {max(drop, 0.0):.4f} ≤ {quality.max_metric_drop}, "
                  f"agreement ≥ {min(agreements):.4f}")


def _spread_warnings(summaries: list[VariantSummary]) -> list[str]:
    timed = [s for s in summaries if s.median_pass_s is not None and s.accepted >= 2]
    timed.sort(key=lambda s: s.median_pass_s or 0.0)
    warnings = []
    for a, b in zip(timed, timed[1:], strict=False):
        assert a.median_pass_s is not None and b.median_pass_s is not None
        difference = b.median_pass_s - a.median_pass_s
        spread = max((a.max_pass_s or 0) - (a.min_pass_s or 0), (b.max_pass_s or 0) - (b.min_pass_s or 0))
        if spread >= difference:
            warnings.append(
                f"{a.variant_id} vs {b.variant_id}: the spread of pass times ({spread:.3f} s) is comparable "
                f"to the difference between medians ({difference:.3f} s), so this series cannot yet "
                "discriminate them. Run more repetitions, or look for a cause (machine load, input shape, "
                "compilation, competing activity)."
            )
    return warnings
