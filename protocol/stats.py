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
    for row in sorted(rows, key=lambda r: (int(r["order_index"]), int(r["attempt"]))):
        by_variant.setdefault(row["variant_id"], []).append(row)

    reference_id = quality.reference_variant
    pick = reference_for or (lambda variant_id: reference_id)
    summaries = []
    for variant in variant_order:
        vid = variant["variant_id"]
        ref_metric = _median_metric(by_variant.get(pick(vid), []), verdicts)
        summaries.append(_summarize_variant(variant, by_variant.get(vid, []), verdicts, quality, ref_metric,
                                            pick(vid)))
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


def _summarize_variant(
    variant: dict[str, Any], rows: list[dict[str, str]], verdicts: dict[str, dict[str, Any]],
    quality: Any, ref_metric: float | None, reference_id: str,
) -> VariantSummary:
    reasons: dict[str, str] = {}
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    accepted_rows = [r for r in rows if verdicts.get(r["trial_id"], {}).get("corpus_accepted")]
    times = [_float(r["pass_s"]) if verdicts.get(r["trial_id"], {}).get("corpus_accepted") else None
             for r in rows]
    good = [t for t in times if t is not None]
    if not good:
        reasons["median_pass_s"] = "no accepted pass"
    metric = _median_metric(rows, verdicts)
    collected: dict[str, dict[str, list[float]]] = {}
    for row in accepted_rows:
        for group, values in verdicts[row["trial_id"]].get("subgroups", {}).items():
            for value, score in values.items():
                collected.setdefault(group, {}).setdefault(value, []).append(score)
    subgroups = {g: {k: statistics.median(v) for k, v in d.items()} for g, d in collected.items()}
    # Agreement is measured on every complete pass, accepted or not: it is part of the quality reading.
    agreements = [verdicts.get(r["trial_id"], {}).get("agreement") for r in rows]
    agreements_known = [a for a in agreements if a is not None]
    deltas = [verdicts.get(r["trial_id"], {}).get("max_score_delta") for r in rows]
    deltas_known = [d for d in deltas if d is not None]
    equivalent, why = _equivalence(reference_id, quality, metric, ref_metric, agreements_known,
                                   len(accepted_rows))

    def peak(column: str) -> int | None:
        values = [_int(r[column]) for r in rows if r.get(column)]
        if not values:
            first_reason = next((r["empty_reasons"] for r in rows if r.get("empty_reasons")), "")
            reasons[column] = _reason_for(column, first_reason) or "not measured"
            return None
        return max(v for v in values if v is not None)

    truncated = [_int(r["truncated_count"]) for r in rows if r.get("truncated_count")]
    return VariantSummary(
        variant_id=variant["variant_id"],
        series=tuple(variant.get("series", ())),
        config={k: variant[k] for k in variant if k not in ("variant_id", "series", "schema_version")},
        attempts=len(rows),
        statuses=statuses,
        accepted=len(accepted_rows),
        failed=len(rows) - len(accepted_rows),
        pass_s=tuple(times),
        pass_s_labels=tuple(r["trial_id"] for r in rows),
        median_pass_s=statistics.median(good) if good else None,
        min_pass_s=min(good) if good else None,
        max_pass_s=max(good) if good else None,
        metric=quality.metric,
        median_metric=metric,
        subgroups=subgroups,
        min_agreement=min(agreements_known) if agreements_known else None,
        max_score_delta=max(deltas_known) if deltas_known else None,
        equivalent=equivalent,
        equivalence_reason=why,
        peak_rss_bytes=peak("peak_rss_bytes"),
        peak_allocated_bytes=peak("peak_allocated_bytes"),
        peak_reserved_bytes=peak("peak_reserved_bytes"),
        truncated_count=max(t for t in truncated if t is not None) if truncated else None,
        oom_events=sum(_int(r.get("oom_events", "")) or 0 for r in rows),
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
