"""Raw table frame (+ verdicts) → per-variant summary. A pure function: no files, no clock.

Five passes describe a small series; they prove nothing about long-term stability. So: every raw time is shown,
with median, min and max; no percentile is computed from a handful of runs; failures are counted, never dropped;
and when the spread is comparable to the difference between two medians the summary says the series cannot yet
discriminate them.

The figures are group-bys of one frame: raw.csv's rows (:func:`runner.campaign_dir.raw_frame.read_frame`) in run
order, with each row's verdict beside it. The records it returns (:class:`protocol.records.summary.Summary`) are what
summary.json holds.

Example::

    summarize(read_frame(raw, SUMMARY_COLUMNS), verdicts, campaign.variants, study.quality).variants[0].median_pass_s
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from itertools import accumulate, chain, repeat
from operator import itemgetter, sub
from typing import Any

import numpy as np
import pandas as pd

from protocol.io.gc_pause import collection_paused
from protocol.records.raw_record import reason_in
from protocol.records.stages import Variant
from protocol.records.summary import Summary, VariantSummary
from runner.analysis.stats_rules import equivalence, scarce_warnings, spread_warnings

#: The raw columns a summary reads.
SUMMARY_COLUMNS = ("trial_id", "variant_id", "status", "order_index", "attempt", "pass_s", "peak_rss_bytes",
                   "peak_allocated_bytes", "peak_reserved_bytes", "truncated_count", "oom_events", "empty_reasons")
_PEAKS = ("peak_rss_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "truncated_count")

#: (variant_id, series, configuration) of one variant, whichever form it came in.
_VariantEntry = tuple[str, tuple[str, ...], dict[str, Any]]


@collection_paused()  # tens of thousands of records and tables at once, none in a cycle
def summarize(
    frame: pd.DataFrame,
    verdicts: Mapping[str, Mapping[str, Any]],
    variant_order: Sequence[Variant] | Sequence[Mapping[str, Any]],
    quality: Any,
    reference_for: Callable[[str], str] | None = None,
) -> Summary:
    """``frame``: raw.csv's rows (at least :data:`SUMMARY_COLUMNS`); ``verdicts``: trial_id → verdict dict from
    validation; ``variant_order``: the campaign's variants, in the order to report them.

    ``reference_for`` maps a variant to its reference variant (the same seed when the study declares common
    seeds); by default every variant is compared with ``quality.reference_variant``. (Variants as dicts are
    still read, for callers not yet converted.)
    """
    runs = _runs(frame, verdicts)
    ran = pd.unique(runs["variant_id"]).tolist()  # item k: the k-th variant to run
    entries = list(map(_variant_entry, variant_order))
    ids = [variant_id for variant_id, _, _ in entries]
    figures = _figures(runs, pd.Index(ran, dtype=object).get_indexer(ids))
    metric_of = _median_metrics(runs, ran)
    reference_id = quality.reference_variant
    references = list(map(reference_for, ids)) if reference_for else [reference_id] * len(ids)
    judged = list(map(equivalence, references, repeat(quality), figures["median_metric"],
                      map(metric_of.get, references), figures["min_agreement"], figures["accepted"],
                      figures["failures"]))
    figures.update(
        variant_id=ids, series=[series for _, series, _ in entries], config=[config for _, _, config in entries],
        failed=list(map(sub, figures["attempts"], figures["accepted"])), metric=repeat(quality.metric),
        equivalent=[equivalent for equivalent, _ in judged], equivalence_reason=[why for _, why in judged],
        empty_reasons=list(map(_empty_reasons, figures["timed"], figures["first_reason"],
                               *(figures[column] for column in _PEAKS[:-1]))))
    # One record per variant, its fields taken from the columns by name.
    summaries = list(map(VariantSummary, *(figures[spec.name] for spec in fields(VariantSummary))))
    warnings = [*spread_warnings(summaries), *scarce_warnings(summaries)]
    return Summary(variants=tuple(summaries), warnings=tuple(warnings), reference_variant=reference_id)


def _runs(frame: pd.DataFrame, verdicts: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The rows in run order (order index, then attempt), each with its verdict's fields beside it
    (:func:`verdict_columns`: ``agreement``, ``max_score_delta``, ``agreement_failures``, ``subgroups``); ``time_s``
    and ``metric_value`` of accepted passes only; ``variant`` numbered in the order the variants first ran."""
    runs = frame[list(SUMMARY_COLUMNS)].sort_values(["order_index", "attempt"], kind="stable", ignore_index=True)
    runs = runs.join(verdict_columns(verdicts, runs["trial_id"].tolist()))
    accepted = runs["corpus_accepted"].fillna(False).astype(bool)
    return runs.assign(variant=pd.factorize(runs["variant_id"])[0], accepted=accepted,
                       time_s=runs["pass_s"].where(accepted), metric_value=runs["metric_value"].where(accepted))


#: The verdict fields a summary reads, and their dtypes.
_VERDICT_FIELDS = {"corpus_accepted": object, "metric_value": "float64", "agreement": "float64",
                   "max_score_delta": "float64", "agreement_failures": object, "subgroups": object}
_NO_VERDICT: Mapping[str, Any] = {}


def verdict_columns(verdicts: Mapping[str, Mapping[str, Any]], trial_ids: Sequence[str]) -> pd.DataFrame:
    """The verdict of each of ``trial_ids`` (row ``i``: the ``i``-th trial), one column per field a summary reads
    (a trial without a verdict, or a verdict without the field: missing)."""
    found = list(map(verdicts.get, trial_ids, repeat(_NO_VERDICT)))
    return pd.DataFrame(found, columns=list(_VERDICT_FIELDS)).astype(_VERDICT_FIELDS)


def _figures(runs: pd.DataFrame, picks: np.ndarray) -> dict[str, Any]:
    """The figures of the variants that ran ``picks[i]``-th (``picks[i]`` -1: a variant that never ran, the
    figures of no rows), one list per figure named as :class:`VariantSummary`'s fields, with ``timed`` (its
    accepted passes with a time) and ``first_reason`` (:func:`_first_reasons`)."""
    groups = runs.groupby(runs["variant"].to_numpy(), sort=True)
    counts = {"attempts": groups.size(), "accepted": groups["accepted"].sum(), "timed": groups["time_s"].count(),
              "oom_events": groups["oom_events"].sum()}
    aggregates = {
        "median_pass_s": groups["time_s"].median(), "min_pass_s": groups["time_s"].min(),
        "max_pass_s": groups["time_s"].max(), "median_metric": groups["metric_value"].median(),
        "min_agreement": groups["agreement"].min(), "max_score_delta": groups["max_score_delta"].max(),
        **{column: groups[column].max() for column in _PEAKS}, "first_reason": _first_reasons(runs),
    }
    figures = {name: _python_list(series.reindex(picks, fill_value=0)) for name, series in counts.items()}
    figures.update({name: _python_list(series.reindex(picks)) for name, series in aggregates.items()})
    never: dict[str, Any] = {"pass_s": (), "pass_s_labels": (), "statuses": {}, "failures": (), "subgroups": {}}
    chosen = picks.tolist()
    for name, per_variant in _listed(runs, counts["attempts"].tolist()).items():
        figures[name] = list(map([*per_variant, never[name]].__getitem__, chosen))  # -1: the last, no rows
    return figures


def _listed(runs: pd.DataFrame, attempts: list[int]) -> dict[str, list[Any]]:
    """The figures that are lists or tables, per variant in the order they first ran (``attempts``: each one's rows):
    its pass times and their trials in run order, its statuses, its first failed conditions, its subgroup medians."""
    count = len(attempts)
    ordered = runs[["time_s", "trial_id"]].take(np.argsort(runs["variant"].to_numpy(), kind="stable"))  # each
    # variant's rows together, in run order
    bounds = [0, *accumulate(attempts)]
    found: dict[str, list[Any]] = {}
    for name, source in (("pass_s", "time_s"), ("pass_s_labels", "trial_id")):
        values = _python_list(ordered[source])
        found[name] = list(map(tuple, map(values.__getitem__, map(slice, bounds, bounds[1:]))))
    found["statuses"] = [{} for _ in range(count)]
    statuses = runs.groupby(["variant", "status"], sort=False).size().reset_index()
    for k, status, n in zip(*(statuses[c].tolist() for c in statuses.columns), strict=True):
        found["statuses"][k][status] = n
    found["failures"] = _first_failures(runs, count)
    found["subgroups"] = _subgroup_medians(runs.loc[runs["accepted"], ["variant", "subgroups"]], count)
    return found


def _median_metrics(runs: pd.DataFrame, ran: list[str]) -> dict[str, float | None]:
    """Variant id → the median metric of its accepted passes (None: none), for every variant that ran."""
    medians = runs.groupby(runs["variant"].to_numpy(), sort=True)["metric_value"].median()
    return dict(zip(ran, _python_list(medians), strict=True))


def _first_failures(runs: pd.DataFrame, count: int) -> list[tuple[str, ...]]:
    """Per variant, the task's failed conditions of its first pass (in run order) that has any; () if none."""
    found: list[tuple[str, ...]] = [() for _ in range(count)]
    given = runs["agreement_failures"]
    given = given[given.notna()]  # most passes have none
    failed = [(k, failures) for k, failures in zip(runs["variant"][given.index].tolist(), given.tolist(), strict=True)
              if isinstance(failures, list) and failures]
    for k, failures in reversed(failed):  # the first in run order wins
        found[k] = tuple(failures)
    return found


def _subgroup_medians(accepted: pd.DataFrame, count: int) -> list[dict[str, dict[str, float]]]:
    """Per variant, per subgroup value, the median score over its accepted passes (groups and values in the
    order the passes first scored them)."""
    tables = [table if isinstance(table, dict) else {} for table in accepted["subgroups"].tolist()]
    variants = accepted["variant"].to_numpy()
    found: list[dict[str, dict[str, float]]] = [{} for _ in range(count)]
    scored = _score_columns(tables, variants)
    if scored is not None:
        layout, scores = scored
        if not layout:  # no pass scored a subgroup
            return found
        medians = pd.DataFrame(scores).groupby(variants).median()
        ends = list(accumulate(len(values) for _, values in layout))
        spans = [(group, values, end - len(values), end) for (group, values), end in zip(layout, ends, strict=True)]
        for k, row in zip(medians.index.tolist(), medians.to_numpy().tolist(), strict=True):
            found[k] = {group: dict(zip(values, row[start:end], strict=True)) for group, values, start, end in spans}
        return found
    long = pd.DataFrame([(k, group, value, score) for k, table in zip(variants.tolist(), tables, strict=True)
                         for group, values in table.items() for value, score in values.items()],
                        columns=["variant", "group", "value", "score"])
    medians_long = long.groupby(["variant", "group", "value"], sort=False)["score"].median().reset_index()
    for k, group, value, median in zip(*(medians_long[c].tolist() for c in medians_long.columns), strict=True):
        found[k].setdefault(group, {})[value] = median
    return found


def _score_columns(tables: list[dict[str, dict[str, float]]], variants: np.ndarray) -> \
        tuple[list[tuple[str, list[str]]], np.ndarray] | None:
    """The (group, values) layout of the first pass and every pass's scores in it (one row per pass), when
    every pass scored the same subgroups and each variant's first pass scored them in that order (one task's
    passes do: the medians then come out in the order :func:`_subgroup_medians` gives them one by one); None
    when they differ, or a score is not a number."""
    groups = list(tables[0]) if tables else []
    if sum(map(len, tables)) != len(groups) * len(tables):  # with each of these groups (else KeyError below)
        return None
    if not groups:
        return [], np.empty((len(tables), 0))
    firsts = [tables[i] for i in np.unique(variants, return_index=True)[1].tolist()]  # each variant's first pass
    if set(map(tuple, firsts)) != {tuple(groups)}:
        return None
    layout, columns = [], []
    try:
        for group in groups:
            scores = list(map(itemgetter(group), tables))
            values = list(scores[0])
            # Every pass has each of these values (else KeyError below), so as many in all means no other.
            if not values or sum(map(len, scores)) != len(values) * len(scores) or \
                    set(map(tuple, map(itemgetter(group), firsts))) != {tuple(values)}:
                return None
            taken = map(itemgetter(*values), scores) if len(values) > 1 else zip(map(itemgetter(*values), scores))
            columns.append(np.fromiter(chain.from_iterable(taken), "float64", len(scores) * len(values))
                           .reshape(len(scores), len(values)))
            layout.append((group, values))
    except (KeyError, TypeError, ValueError):  # a pass without one of the first pass's groups or values, or not a
        # table of numbers
        return None
    return layout, np.hstack(columns)


def _empty_reasons(timed: int, first_reason: str | None, *peaks: int | None) -> dict[str, str]:
    """Why a variant's median pass time or a memory peak (:data:`_PEAKS` but the last) is empty."""
    reasons = {} if timed else {"median_pass_s": "no accepted pass"}
    for column, peak in zip(_PEAKS[:-1], peaks, strict=True):
        if peak is None:
            reasons[column] = reason_in(first_reason or "", column) or "not measured"
    return reasons


def _first_reasons(runs: pd.DataFrame) -> pd.Series:
    """Per variant, the first ``empty_reasons`` that says something, in run order."""
    given = runs.loc[runs["empty_reasons"] != "", ["variant", "empty_reasons"]]
    return given.groupby(given["variant"].to_numpy())["empty_reasons"].first()


def _python_list(column: pd.Series) -> list[Any]:
    """A column's values as the records hold them: None for a missing value (NaN, <NA>), else Python values."""
    return column.to_numpy(dtype=object, na_value=None).tolist()


def _variant_entry(variant: Variant | Mapping[str, Any]) -> _VariantEntry:
    if isinstance(variant, Variant):
        return variant.variant_id, variant.series, variant.config()
    return (variant["variant_id"], tuple(variant.get("series", ())),
            {k: variant[k] for k in variant if k not in ("variant_id", "series", "schema_version")})
