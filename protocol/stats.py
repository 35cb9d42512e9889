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
from itertools import accumulate, compress, repeat
from operator import is_not, itemgetter
from typing import Any, NamedTuple

from protocol.gc_pause import collection_paused
from protocol.rawrecord import RawRecord, column_values
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
    rows: Sequence[RawRecord],
    verdicts: dict[str, dict[str, Any]],
    variant_order: Sequence[Variant] | Sequence[Mapping[str, Any]],
    quality: Any,
    reference_for: Callable[[str], str] | None = None,
) -> Summary:
    """``rows``: raw.csv rows (:class:`RawRecord`); ``verdicts``: trial_id → verdict dict from validation;
    ``variant_order``: the campaign's variants, in the order to report them.

    ``reference_for`` maps a variant to its reference variant (the same seed when the study
    declares common seeds); by default every variant is compared with ``quality.reference_variant``.
    (Variants as dicts are still read, for callers not yet converted.)
    """
    with collection_paused():
        return _summarize(rows, verdicts, variant_order, quality, reference_for)


def _summarize(
    rows: Sequence[RawRecord],
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
    runs = _Runs.of(table, verdicts, [by_variant.get(entry[0], []) for entry in variants])
    summaries = []
    for number, entry in enumerate(variants):
        ref = pick(entry[0])
        if ref not in reference_metrics:
            reference_metrics[ref] = _median_metric(by_variant.get(ref, []), table, verdicts)
        summaries.append(_summarize_variant(entry, runs, number, table, quality, reference_metrics[ref], ref))
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


def _read_table(rows: Sequence[RawRecord]) -> _Table:
    return _Table(**column_values(rows, _Table._fields))


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


class _Runs(NamedTuple):
    """Every reported variant's rows, one variant after another (each in run order), a column at a time.

    Variant ``k``'s rows are items ``bounds[k]:bounds[k + 1]`` of the per-row columns. The filtered columns (only
    the accepted passes, only the cells that hold a value) come with the running count of what they kept, so a
    variant's share of them is a slice too: no loop over a variant's rows in Python.
    """

    bounds: list[int]
    rows: list[int]  # row numbers in the table
    status: list[str]
    trial_id: list[str]
    times: list[float | None]  # the pass time of an accepted pass, else None
    accepted: _Kept  # verdicts of the accepted passes
    good: _Kept  # accepted pass times that are not None
    agreements: _Kept
    deltas: _Kept
    failures: _Kept  # a task's conditions of equivalence that do not hold, per pass (a list of reasons)
    peaks: dict[str, _Kept]
    oom_events: list[int | None]
    subgroups: list[dict[str, dict[str, float]]] | None  # per variant; None: the passes scored other subgroups

    @classmethod
    def of(cls, table: _Table, verdicts: dict[str, dict[str, Any]], groups: list[list[int]]) -> _Runs:
        rows = [index for group in groups for index in group]
        bounds = list(accumulate(map(len, groups), initial=0))
        trial_id = list(map(table.trial_id.__getitem__, rows))
        found = list(map(verdicts.get, trial_id))
        accepted = [verdict is not None and bool(verdict["corpus_accepted"]) for verdict in found]
        times = [seconds if ok else None for seconds, ok in zip(map(table.pass_s.__getitem__, rows), accepted,
                                                                 strict=True)]
        # Agreement is measured on every complete pass, accepted or not: part of the quality reading.
        agreements = [None if verdict is None else verdict.get("agreement") for verdict in found]
        deltas = [None if verdict is None else verdict.get("max_score_delta") for verdict in found]
        failures = [None if verdict is None else verdict.get("agreement_failures") for verdict in found]
        passed: _Kept = _Kept.of(found, accepted)
        return cls(
            bounds=bounds, rows=rows, status=list(map(table.status.__getitem__, rows)), trial_id=trial_id,
            times=times, accepted=passed, good=_Kept.present(times),
            agreements=_Kept.present(agreements), deltas=_Kept.present(deltas), failures=_Kept.present(failures),
            peaks={column: _Kept.present(list(map(getattr(table, column).__getitem__, rows))) for column in _PEAKS},
            oom_events=list(map(table.oom_events.__getitem__, rows)),
            subgroups=_all_subgroup_medians([verdict.get("subgroups", {}) for verdict in passed.values],
                                            [passed.before[bound] for bound in bounds]),
        )


class _Kept(NamedTuple):
    """The items of a per-row column that a filter kept, and how many it had kept before each row."""

    values: list[Any]
    before: list[int]

    @classmethod
    def of(cls, column: Sequence[Any], keep: Sequence[bool]) -> _Kept:
        return cls(list(compress(column, keep)), list(accumulate(keep, initial=0)))

    @classmethod
    def present(cls, column: Sequence[Any]) -> _Kept:
        return cls.of(column, list(map(is_not, column, repeat(None))))

    def between(self, start: int, end: int) -> list[Any]:
        """What was kept of rows ``start:end``."""
        before = self.before
        return self.values[before[start]:before[end]]


_PEAKS = ("peak_rss_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "truncated_count")


def _all_subgroup_medians(tables: list[dict[str, dict[str, float]]],
                          starts: list[int]) -> list[dict[str, dict[str, float]]] | None:
    """:func:`_subgroup_medians` of ``tables[starts[k]:starts[k + 1]]`` for every variant ``k`` at once, when every
    pass scored the same subgroups in the same order (the usual case: one column of scores per subgroup value for
    the whole table, cut per variant); None otherwise."""
    first = tables[0] if tables else {}
    groups = tuple(first)
    if not groups:  # no pass scored a subgroup (or none passed): if any did, the shapes differ
        return [{} for _ in starts[1:]] if not any(tables) else None
    if list(map(tuple, tables)).count(groups) != len(tables):
        return None
    shapes = []
    for group in groups:  # one pass over the passes per group: each verdict is a dict somewhere in memory
        keys = tuple(first[group])
        scores = list(map(itemgetter(group), tables))
        if list(map(tuple, scores)).count(keys) != len(tables):
            return None
        flat = [score for values in map(dict.values, scores) for score in values]
        shapes.append((group, keys, [flat[index::len(keys)] for index in range(len(keys))]))
    spans = [slice(start, end) for start, end in zip(starts, starts[1:], strict=False) if start != end]
    medians = {(group, key): _span_medians(column, spans)
               for group, keys, columns in shapes for key, column in zip(keys, columns, strict=True)}
    per_variant = iter([{group: dict(zip(keys, values, strict=True)) for group, keys, values in
                         zip(groups, [keys for _, keys, _ in shapes], row, strict=True)}
                        for row in zip(*[list(zip(*[medians[group, key] for key in keys], strict=True))
                                         for group, keys, _ in shapes], strict=True)])
    return [next(per_variant) if start != end else {} for start, end in zip(starts, starts[1:], strict=False)]


def _span_medians(column: Sequence[float], spans: list[slice]) -> list[float]:
    """:func:`_median` of ``column[span]`` for each span (the same arithmetic, without a call per span)."""
    return [data[len(data) // 2] if len(data) % 2 else (data[len(data) // 2 - 1] + data[len(data) // 2]) / 2
            for data in map(sorted, map(column.__getitem__, spans))]


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


def _peaks(runs: _Runs, start: int, end: int, table: _Table, reasons: dict[str, str]) -> dict[str, int | None]:
    """The largest measured memory peaks and truncation count; an empty peak gets its reason in ``reasons``."""
    found: dict[str, int | None] = {}
    for column, kept in runs.peaks.items():
        values = kept.between(start, end)
        found[column] = max(values) if values else None
        if not values and column != "truncated_count":
            rows = runs.rows[start:end]
            first_reason = next((table.empty_reasons[i] for i in rows if table.empty_reasons[i]), "")
            reasons[column] = _reason_for(column, first_reason) or "not measured"
    return found


def _summarize_variant(
    variant: _VariantEntry, runs: _Runs, number: int, table: _Table, quality: Any, ref_metric: float | None,
    reference_id: str,
) -> VariantSummary:
    """The summary of variant ``number`` of the report (its rows: ``runs.bounds[number]:runs.bounds[number + 1]``)."""
    variant_id, series, config = variant
    start, end = runs.bounds[number], runs.bounds[number + 1]
    statuses: dict[str, int] = {}
    for status in runs.status[start:end]:
        statuses[status] = statuses.get(status, 0) + 1
    verdicts = runs.accepted.between(start, end)
    good = runs.good.between(start, end)
    agreements = runs.agreements.between(start, end)
    deltas = runs.deltas.between(start, end)
    reasons: dict[str, str] = {}
    accepted = len(verdicts)
    if not good:
        reasons["median_pass_s"] = "no accepted pass"
    metric = _median([verdict["metric_value"] for verdict in verdicts]) if verdicts else None
    equivalent, why = _equivalence(reference_id, quality, metric, ref_metric, agreements, accepted,
                                   runs.failures.between(start, end))
    peaks = _peaks(runs, start, end, table, reasons)
    return VariantSummary.of(
        variant_id=variant_id,
        series=series,
        config=config,
        attempts=end - start,
        statuses=statuses,
        accepted=accepted,
        failed=end - start - accepted,
        pass_s=tuple(runs.times[start:end]),
        pass_s_labels=tuple(runs.trial_id[start:end]),
        median_pass_s=_median(good) if good else None,
        min_pass_s=min(good) if good else None,
        max_pass_s=max(good) if good else None,
        metric=quality.metric,
        median_metric=metric,
        subgroups=(runs.subgroups[number] if runs.subgroups is not None
                   else _subgroup_medians([verdict.get("subgroups", {}) for verdict in verdicts])),
        min_agreement=min(agreements) if agreements else None,
        max_score_delta=max(deltas) if deltas else None,
        equivalent=equivalent,
        equivalence_reason=why,
        oom_events=sum([count or 0 for count in runs.oom_events[start:end]]),
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
    agreements: list[float], accepted: int, failures: Sequence[Sequence[str]] = (),
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
    share = quality.extra.get("min_score_share") if getattr(quality, "extra", None) else None
    if share is not None and metric < share * ref_metric - 1e-12:
        return False, (f"{quality.metric} {metric:.4f} is {metric / ref_metric if ref_metric else 0.0:.4f} of the "
                       f"reference's {ref_metric:.4f}; the rule needs at least {share}")
    failed = next((reasons for reasons in failures if reasons), None)
    if failed:
        return False, f"{failed[0]} (and {len(failed) - 1} more)" if len(failed) > 1 else failed[0]
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
