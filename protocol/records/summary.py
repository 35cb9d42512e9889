"""The summary's records: one :class:`VariantSummary` per variant, the :class:`Summary` of a campaign, and the
:class:`SummaryRecord` summary.json holds (written and read by :mod:`protocol.records.codec`).

They are computed on the host from the raw table's frame (:func:`runner.analysis.stats.summarize`); they live
here because the decision code (``protocol.decision``) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from protocol.hardware.memory import MemoryEstimate
from protocol.records.codec import OMIT_NONE, Schema
from protocol.records.serving import ServingSummary

#: summary.json's format. History: 1 (1.0); 2 (1.1): a server study's summary holds ``serving``
#: (:class:`protocol.records.serving.ServingSummary`). An offline study's summary is still written as version 1,
#: byte for byte as 1.0 wrote it (``verify`` re-derives a 1.0 bundle's exactly); both are read.
SUMMARY_SCHEMA_VERSION = 2
#: The version an offline study's summary.json is written with (it holds no ``serving``).
OFFLINE_SUMMARY_VERSION = 1


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


@dataclass(frozen=True)
class Summary:
    variants: tuple[VariantSummary, ...]
    warnings: tuple[str, ...]
    reference_variant: str


@dataclass(frozen=True)
class SummaryRecord(Summary):
    """summary.json: the summary, the campaign it is of, and the figures summary.md shows beside its table (per variant:
    the memory estimate, energy per input and per corpus, the device's busy share, the task's own figures of each
    accepted pass). ``inconsistent``: the banner of a directory read with ``--allow-inconsistent``."""

    campaign_id: str
    study_sha256: str
    slots_planned: int
    rows_total: int
    memory_estimates: dict[str, MemoryEstimate | None]
    energy: dict[str, dict[str, Any]]
    device_busy_share: dict[str, dict[str, Any]]
    task_figures: dict[str, dict[str, Any]] | None = field(default=None, metadata=OMIT_NONE)
    inconsistent: str | None = field(default=None, metadata=OMIT_NONE)
    #: A server study's runs per variant (configuration and rate); None (not written) for an offline study.
    serving: ServingSummary | None = field(default=None, metadata=OMIT_NONE)
    schema_version: int = OFFLINE_SUMMARY_VERSION  # SUMMARY_SCHEMA_VERSION with ``serving``
    CODEC: ClassVar[Schema] = Schema("summary.json", SUMMARY_SCHEMA_VERSION, reads=(1, 2),
                                     check=lambda record: _version_problem(record))


def _version_problem(record: SummaryRecord) -> str:
    """Version 1 holds no ``serving``; version 2 holds one."""
    if (record.serving is not None) != (record.schema_version == SUMMARY_SCHEMA_VERSION):
        return (f"summary.json version {record.schema_version} "
                f"{'holds' if record.serving is not None else 'lacks'} a serving record")
    return ""
