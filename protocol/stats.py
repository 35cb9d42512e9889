"""The summary's records: one :class:`VariantSummary` per variant and the :class:`Summary` summary.json holds.

They are computed on the host from the raw table's frame (:func:`runner.analysis.stats.summarize`); they live
here because the decision code (``protocol.decision``) reads them.
"""

from __future__ import annotations

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
