"""Raw table (+ verdicts) → per-variant summary. A pure function: no files, no clock.

Five passes describe a small series; they prove nothing about long-term
stability. So: every raw time is shown, with median, min and max; no
percentile is computed from a handful of runs; failures are counted, never
dropped; and when the spread is comparable to the difference between two
medians the summary says the series cannot yet discriminate them.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from protocol.rawrecord import RawRecord, collection_paused, column_values
from protocol.records import VARIANT_FIELDS, Variant

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

    @classmethod
    def of(cls, **fields: Any) -> VariantSummary:
        """The summary with these fields, every one given: made without a call per field (a sweep makes tens of
        thousands); the same record ``VariantSummary(**fields)`` makes."""
        summary = object.__new__(cls)
        summary.__dict__.update({name: fields[name] for name in _SUMMARY_FIELDS})
        return summary

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["series"] = list(self.series)
        data["pass_s"] = list(self.pass_s)
        data["pass_s_labels"] = list(self.pass_s_labels)
        return data


_SUMMARY_FIELDS = tuple(f.name for f in dataclasses.fields(VariantSummary))


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


def summarize(
    rows: Sequence[RawRecord] | Sequence[Mapping[str, str]],
    verdicts: dict[str, dict[str, Any]],
    variant_order: Sequence[Variant] | Sequence[Mapping[str, Any]],
    quality: Any,
    reference_for: Callable[[str], str] | None = None,
) -> Summary:
    """``rows``: raw.csv rows (:class:`RawRecord`); ``verdicts``: trial_id → verdict dict from validation;
    ``variant_order``: the campaign's variants, in the order to report them.

    ``reference_for`` maps a variant to its reference variant (the same seed when the study
    declares common seeds); by default every variant is compared with ``quality.reference_variant``.
    (Rows as dicts of cells and variants as dicts are still read, for callers not yet converted.)
    """
    with collection_paused():
        return _summarize(rows, verdicts, variant_order, quality, reference_for)


def _summarize(
    rows: Sequence[RawRecord] | Sequence[Mapping[str, str]],
    verdicts: dict[str, dict[str, Any]],
    variant_order: Sequence[Variant] | Sequence[Mapping[str, Any]],
    quality: Any,
    reference_for: Callable[[str], str] | None,
) -> Summary:
    table = _read_table(rows)
    variants = [_variant_entry(v) for v in variant_order]
    by_variant: dict[str, list[int]] = {entry[0]: [] for entry in variants}  # row numbers, in run order
    order_keys = list(zip(table.order_index, table.attempt, strict=True))
    variant_of = table.variant_id
    for index in sorted(range(len(order_keys)), key=order_keys.__getitem__):  # stable, as sorted(rows, key=…)
        group = by_variant.get(variant_of[index])
        if group is None:
            group = by_variant[variant_of[index]] = []
        group.append(index)

    reference_id = quality.reference_variant
    pick = reference_for or (lambda variant_id: reference_id)
    reference_metrics: dict[str, float | None] = {}  # a pure function of the reference's rows: computed once
    summaries = []
    for entry in variants:
        ref = pick(entry[0])
        if ref not in reference_metrics:
            reference_metrics[ref] = _median_metric(by_variant.get(ref, []), table, verdicts)
        summaries.append(_summarize_variant(entry, by_variant.get(entry[0], []), table, verdicts, quality,
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


class _Table(NamedTuple):
    """The raw columns a summary reads, typed, one list per column (item i of each is row i of the table)."""

    trial_id: list[str]
    variant_id: list[str]
    status: list[str]
    order_index: list[int]
    attempt: list[int]
    pass_s: list[float | None]
    peak_rss_bytes: list[int | None]
    peak_allocated_bytes: list[int | None]
    peak_reserved_bytes: list[int | None]
    truncated_count: list[int | None]
    oom_events: list[int | None]
    empty_reasons: list[str]


def _read_table(rows: Sequence[RawRecord] | Sequence[Mapping[str, str]]) -> _Table:
    typed = [row if isinstance(row, RawRecord) else RawRecord.from_text(row) for row in rows]
    return _Table(**column_values(typed, _Table._fields))


_config_of = itemgetter(*VARIANT_FIELDS)  # Variant.config(), without a getattr per field

#: (variant_id, series, configuration) of one variant, whichever form it came in.
_VariantEntry = tuple[str, tuple[str, ...], dict[str, Any]]


def _variant_entry(variant: Variant | Mapping[str, Any]) -> _VariantEntry:
    if isinstance(variant, Variant):
        return variant.variant_id, variant.series, dict(zip(VARIANT_FIELDS, _config_of(vars(variant)), strict=True))
    return (variant["variant_id"], tuple(variant.get("series", ())),
            {k: variant[k] for k in variant if k not in ("variant_id", "series", "schema_version")})


def _median_metric(rows: list[int], table: _Table, verdicts: dict[str, dict[str, Any]]) -> float | None:
    trial_ids = table.trial_id
    values = [verdicts[trial_ids[i]]["metric_value"] for i in rows
              if trial_ids[i] in verdicts and verdicts[trial_ids[i]]["corpus_accepted"]]
    return statistics.median(values) if values else None


def _median(values: Sequence[float]) -> float:
    """``statistics.median`` without its per-call overhead (same arithmetic, same result)."""
    data = sorted(values)
    n = len(data)
    if n % 2 == 1:
        return data[n // 2]
    i = n // 2
    return (data[i - 1] + data[i]) / 2


class _Passes(NamedTuple):
    """What the verdicts say about one variant's passes, in run order."""

    statuses: dict[str, int]
    times: list[float | None]  # every attempt; None = no accepted pass time
    good: list[float]  # accepted pass times
    metrics: list[Any]
    subgroup_tables: list[dict[str, dict[str, float]]]  # one per accepted pass
    agreements: list[float]
    deltas: list[float]


def _passes(rows: list[int], table: _Table, verdicts: dict[str, dict[str, Any]]) -> _Passes:
    # One pass over the rows: this runs once per variant, and a big sweep has tens of thousands.
    found = _Passes({}, [], [], [], [], [], [])
    statuses, times, good, metrics, tables, agreements, deltas = found
    get_verdict = verdicts.get
    status_of, trial_of, pass_s = table.status, table.trial_id, table.pass_s
    for i in rows:
        status = status_of[i]
        statuses[status] = statuses.get(status, 0) + 1
        verdict = get_verdict(trial_of[i])
        if verdict is None:
            times.append(None)
            continue
        if verdict["corpus_accepted"]:
            seconds = pass_s[i]
            times.append(seconds)
            if seconds is not None:
                good.append(seconds)
            tables.append(verdict.get("subgroups", {}))
            metrics.append(verdict["metric_value"])
        else:
            times.append(None)
        # Agreement is measured on every complete pass, accepted or not: part of the quality reading.
        agreement = verdict.get("agreement")
        if agreement is not None:
            agreements.append(agreement)
        delta = verdict.get("max_score_delta")
        if delta is not None:
            deltas.append(delta)
    return found


def _subgroup_medians(tables: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per subgroup value, the median score over the accepted passes (groups and values in first-seen order)."""
    if not tables:
        return {}
    first = tables[0]
    if [table.keys() for table in tables].count(first.keys()) == len(tables):
        shapes = [(group, tuple(values)) for group, values in first.items()]
        if all([tuple(table[group]) for table in tables].count(keys) == len(tables) for group, keys in shapes):
            # The usual case, every pass scored the same subgroups: one column of scores per value.
            return {group: dict(zip(keys, _medians(zip(*(table[group].values() for table in tables), strict=True),
                                                   len(tables)), strict=True))
                    for group, keys in shapes}
    collected: dict[str, dict[str, list[float]]] = {}
    for table in tables:
        for group, values in table.items():
            per_group = collected.setdefault(group, {})
            for value, score in values.items():
                per_group.setdefault(value, []).append(score)
    return {g: {k: _median(v) for k, v in d.items()} for g, d in collected.items()}


def _medians(columns: Iterable[Sequence[float]], n: int) -> list[float]:
    """:func:`_median` of each column of ``n`` values (the same arithmetic, without a call per column)."""
    mid = n // 2
    if n % 2 == 1:
        return [sorted(column)[mid] for column in columns]
    return [(data[mid - 1] + data[mid]) / 2 for data in map(sorted, columns)]


def _peaks(rows: list[int], table: _Table, reasons: dict[str, str]) -> dict[str, int | None]:
    """The largest measured memory peaks and truncation count; an empty peak gets its reason in ``reasons``."""
    found: dict[str, int | None] = {}
    for column in ("peak_rss_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "truncated_count"):
        cells: list[int | None] = getattr(table, column)
        values = [value for value in map(cells.__getitem__, rows) if value is not None]
        found[column] = max(values) if values else None
        if not values and column != "truncated_count":
            first_reason = next((table.empty_reasons[i] for i in rows if table.empty_reasons[i]), "")
            reasons[column] = _reason_for(column, first_reason) or "not measured"
    return found


def _summarize_variant(
    variant: _VariantEntry, rows: list[int], table: _Table, verdicts: dict[str, dict[str, Any]],
    quality: Any, ref_metric: float | None, reference_id: str,
) -> VariantSummary:
    """One variant's summary; ``rows``: its row numbers in ``table``, in run order."""
    variant_id, series, config = variant
    found = _passes(rows, table, verdicts)
    reasons: dict[str, str] = {}
    good = found.good
    accepted = len(found.subgroup_tables)
    if not good:
        reasons["median_pass_s"] = "no accepted pass"
    metric = _median(found.metrics) if found.metrics else None
    equivalent, why = _equivalence(reference_id, quality, metric, ref_metric, found.agreements, accepted)
    peaks = _peaks(rows, table, reasons)
    return VariantSummary.of(
        variant_id=variant_id,
        series=series,
        config=config,
        attempts=len(rows),
        statuses=found.statuses,
        accepted=accepted,
        failed=len(rows) - accepted,
        pass_s=tuple(found.times),
        pass_s_labels=tuple(map(table.trial_id.__getitem__, rows)),
        median_pass_s=_median(good) if good else None,
        min_pass_s=min(good) if good else None,
        max_pass_s=max(good) if good else None,
        metric=quality.metric,
        median_metric=metric,
        subgroups=_subgroup_medians(found.subgroup_tables),
        min_agreement=min(found.agreements) if found.agreements else None,
        max_score_delta=max(found.deltas) if found.deltas else None,
        equivalent=equivalent,
        equivalence_reason=why,
        oom_events=sum(table.oom_events[i] or 0 for i in rows),
        empty_reasons=reasons,
        **peaks,
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
