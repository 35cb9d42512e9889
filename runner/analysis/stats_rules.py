"""The summary's judgements of one variant's figures: equivalence with its reference, and the warnings.

Pure functions of the figures :mod:`runner.analysis.stats` computes (no frame, no file).

Example::

    equivalence("b1", study.quality, 0.905, 0.91, 0.995, accepted=5)   # (True, "within tolerance: …")
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from protocol.records.summary import VariantSummary


def equivalence(
    reference_id: str, quality: Any, metric: float | None, ref_metric: float | None, min_agreement: float | None,
    accepted: int, failures: Sequence[str] = (),
) -> tuple[bool | None, str]:
    """Is a variant equivalent to its reference (True, False, None: cannot say), and why. ``failures``: the first
    pass's list of the task's conditions that do not hold (empty when every pass met them)."""
    if accepted == 0:
        return False, "no accepted pass"
    if ref_metric is None:
        return None, f"reference variant {reference_id} has no accepted pass to compare with"
    assert metric is not None
    drop = ref_metric - metric
    if drop > quality.max_metric_drop + 1e-12:
        return False, (f"{quality.metric} {metric:.4f} is {drop:.4f} below the reference "
                       f"({ref_metric:.4f}); tolerance {quality.max_metric_drop}")
    share = quality.extra.get("min_score_share") if getattr(quality, "extra", None) else None
    if share is not None and metric < share * ref_metric - 1e-12:
        return False, (f"{quality.metric} {metric:.4f} is {metric / ref_metric if ref_metric else 0.0:.4f} of the "
                       f"reference's {ref_metric:.4f}; the rule needs at least {share}")
    if failures:
        return False, f"{failures[0]} (and {len(failures) - 1} more)" if len(failures) > 1 else failures[0]
    if min_agreement is not None and min_agreement < quality.min_agreement:
        return False, (f"agreement with the reference {min_agreement:.4f} < required "
                       f"{quality.min_agreement}")
    if min_agreement is None:
        return None, "agreement with the reference not computed"
    return True, (f"within tolerance: {quality.metric} drop {max(drop, 0.0):.4f} ≤ {quality.max_metric_drop}, "
                  f"agreement ≥ {min_agreement:.4f}")


def spread_warnings(summaries: Sequence[VariantSummary]) -> list[str]:
    """Neighbours by median pass time whose spread is at least the difference between their medians."""
    timed = sorted(((s.median_pass_s, (s.max_pass_s or 0) - (s.min_pass_s or 0), s.variant_id) for s in summaries
                    if s.median_pass_s is not None and s.accepted >= 2), key=itemgetter(0))
    warnings = []
    for (median_a, spread_a, a), (median_b, spread_b, b) in zip(timed, timed[1:], strict=False):
        difference = median_b - median_a
        spread = max(spread_a, spread_b)
        if spread >= difference:
            warnings.append(
                f"{a} vs {b}: the spread of pass times ({spread:.3f} s) is comparable "
                f"to the difference between medians ({difference:.3f} s), so this series cannot yet "
                "discriminate them. Run more repetitions, or look for a cause (machine load, input shape, "
                "compilation, competing activity)."
            )
    return warnings


def scarce_warnings(summaries: Sequence[VariantSummary]) -> list[str]:
    """Variants with too few accepted passes for a median, or none."""
    warnings = []
    for summary in summaries:
        if 0 < summary.accepted < 3:
            warnings.append(
                f"{summary.variant_id}: only {summary.accepted} accepted pass(es); a median of fewer than 3 "
                "passes says little. Run more repetitions."
            )
        if summary.attempts and summary.accepted == 0:
            warnings.append(f"{summary.variant_id}: no accepted pass; it cannot enter the cost comparison.")
    return warnings
