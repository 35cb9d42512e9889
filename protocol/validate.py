"""Predictions × corpus × quality rule → a verdict for one pass.

A written file is not yet an accepted result: the expected id set must be
found exactly (no duplicates, none missing, none unexpected), every line must
be well-formed, and the main metric must meet the study's minimum. Wrong
predictions are kept: they are the quality measurement. Reading the file is
``protocol.predictions``; its names are re-exported here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import ne
from typing import Any

from protocol.errors import UserError
from protocol.predictions import ParsedPredictions, Prediction, parse_predictions

__all__ = ["Agreement", "ParsedPredictions", "PassCheck", "Prediction", "Reference", "check_pass",
           "compare_predictions", "compute_metric", "parse_predictions"]


@dataclass(frozen=True)
class Reference:
    """Expected labels and subgroup membership for every corpus id, in corpus order."""

    ids: tuple[str, ...]
    labels: dict[str, str]
    groups: dict[str, dict[str, str]]  # subgroup name -> id -> group value

    @property
    def label_set(self) -> frozenset[str]:
        return frozenset(self.labels.values())


@dataclass(frozen=True)
class PassCheck:
    expected_ids: int
    observed_ids: int
    ids_match: bool
    duplicate_ids: int
    missing_ids: int
    unexpected_ids: int
    format_errors: int
    metric: str
    metric_value: float | None
    subgroups: dict[str, dict[str, float]]
    accepted: bool
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> str:
        return "accepted" if self.accepted else "rejected: " + "; ".join(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        return {
            "expected_ids": self.expected_ids,
            "observed_ids": self.observed_ids,
            "ids_match": self.ids_match,
            "duplicate_ids": self.duplicate_ids,
            "missing_ids": self.missing_ids,
            "unexpected_ids": self.unexpected_ids,
            "format_errors": self.format_errors,
            "metric": self.metric,
            "metric_value": self.metric_value,
            "subgroups": self.subgroups,
            "accepted": self.accepted,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True)
class _IdCheck:
    """How the observed ids compare with the corpus's."""

    in_corpus_order: bool  # every expected id exactly once, in corpus order
    duplicates: frozenset[str]
    missing: frozenset[str]
    unexpected: frozenset[str]

    @property
    def ids_match(self) -> bool:
        return not self.missing and not self.unexpected


def _check_ids(observed: Sequence[str], reference: Reference) -> _IdCheck:
    expected_ids = tuple(reference.ids)
    # The usual pass: every expected id exactly once, in corpus order (one sequence comparison).
    if tuple(observed) == expected_ids and _all_distinct(expected_ids, reference.labels):
        return _IdCheck(True, frozenset(), frozenset(), frozenset())
    expected = set(expected_ids)
    seen = set(observed)
    duplicates: frozenset[str] = frozenset()
    if len(seen) != len(observed):
        duplicates = frozenset(ident for ident, count in Counter(observed).items() if count > 1)
    return _IdCheck(False, duplicates, frozenset(expected - seen), frozenset(seen - expected))


def _problems(parsed: ParsedPredictions, ids: _IdCheck, bad_labels: list[str]) -> list[str]:
    """Why the pass is incomplete or malformed, one reason per kind of problem (empty when none)."""
    reasons: list[str] = []
    if parsed.format_errors:
        reasons.append(f"{len(parsed.format_errors)} format error(s), first: {parsed.format_errors[0]}")
    if ids.duplicates:
        reasons.append(f"{len(ids.duplicates)} duplicate id(s), e.g. {sorted(ids.duplicates)[0]!r}")
    if ids.missing:
        reasons.append(f"{len(ids.missing)} missing id(s), e.g. {sorted(ids.missing)[0]!r}")
    if ids.unexpected:
        reasons.append(f"{len(ids.unexpected)} id(s) not in the corpus, e.g. {sorted(ids.unexpected)[0]!r}")
    if bad_labels:
        reasons.append(f"label(s) outside the corpus label set: {bad_labels[:3]}")
    return reasons


def _quality(parsed: ParsedPredictions, ids: _IdCheck, reference: Reference,
             metric: str) -> tuple[float, dict[str, dict[str, float]]]:
    """The metric over the whole pass and within each subgroup (of a complete pass)."""
    if ids.in_corpus_order:
        outcome = _Outcomes(metric, reference.ids, reference.labels, in_order=parsed.labels)
    else:
        predicted = dict(zip(parsed.ids, parsed.labels, strict=True))
        outcome = _Outcomes(metric, reference.ids, reference.labels, predicted)
    subgroups = {group_name: outcome.by_group(membership) for group_name, membership in reference.groups.items()}
    return outcome.metric(), subgroups


def check_pass(parsed: ParsedPredictions, reference: Reference, metric: str, minimum: float) -> PassCheck:
    """The verdict on one pass: ids exactly the corpus's, every line well-formed, labels in the corpus label
    set, and the metric at least ``minimum``; every reason for a rejection is listed."""
    ids = _check_ids(parsed.ids, reference)
    bad_labels = sorted(set(parsed.labels) - reference.label_set)
    reasons = _problems(parsed, ids, bad_labels)
    complete = not reasons
    metric_value: float | None = None
    subgroups: dict[str, dict[str, float]] = {}
    if complete:
        metric_value, subgroups = _quality(parsed, ids, reference, metric)
        if metric_value < minimum:
            reasons.append(f"{metric} {metric_value:.4f} below the study's minimum {minimum}")
    else:
        reasons.append("incomplete or malformed pass: quality not computed")
    return PassCheck(
        expected_ids=len(reference.ids),
        observed_ids=len(parsed.ids),
        ids_match=ids.ids_match,
        duplicate_ids=len(ids.duplicates),
        missing_ids=len(ids.missing),
        unexpected_ids=len(ids.unexpected),
        format_errors=len(parsed.format_errors),
        metric=metric,
        metric_value=metric_value,
        subgroups=subgroups,
        accepted=complete and metric_value is not None and metric_value >= minimum,
        reasons=tuple(reasons),
    )


def _all_distinct(ids: tuple[str, ...], keyed: dict[str, str]) -> bool:
    """True if no id repeats; cheap when ``keyed`` (the reference labels) has exactly these keys in order."""
    if len(keyed) == len(ids) and tuple(keyed) == ids:
        return True  # dictionary keys are distinct
    return len(set(ids)) == len(ids)


def compute_metric(metric: str, ids: tuple[str, ...], truth: dict[str, str], predicted: dict[str, str]) -> float:
    return _Outcomes(metric, ids, truth, predicted).metric()


class _Outcomes:
    """Per-input outcomes of one pass, looked up once and counted in C (1,000,000 inputs in well under a second).

    Every figure is a ratio of the same integer counts the textbook loops produce, so it is the
    same float; the dictionaries are read in the same order, so a missing id raises the same
    ``KeyError``.
    """

    def __init__(self, metric: str, ids: Sequence[str], truth: dict[str, str], predicted: dict[str, str] | None = None,
                 in_order: Sequence[str] | None = None) -> None:
        """``predicted`` maps id → label; or ``in_order[k]`` is the label predicted for ``ids[k]``."""
        if not ids:
            raise ValueError("metric over an empty set")
        self.metric_name = metric
        self.n = len(ids)
        self.ids = ids
        self._ids_list: list[str] | None = ids if isinstance(ids, list) else None
        self._checked: list[tuple[dict[str, str], bool]] = []  # (mapping, its keys are ``ids`` in order)
        labels: Iterable[str]
        if in_order is not None:
            labels = in_order
        elif predicted is not None:
            labels = map(predicted.__getitem__, ids)
        else:
            raise TypeError("_Outcomes needs predicted or in_order")
        if metric == "accuracy":
            # The wrong ones (about a tenth of a usual pass) are what the group counts go through.
            self.wrong = list(map(ne, labels, self.lookup(truth)))
            self.n_wrong = sum(self.wrong)
        elif metric == "macro_f1":
            self.truth = list(self.lookup(truth))
            self.predicted = list(labels)
        else:
            raise UserError(f"unknown metric {metric!r}", "quality.metric", "Use accuracy or macro_f1.")

    def lookup(self, mapping: dict[str, str]) -> Any:
        """``mapping[i] for i in ids``, lazily; read straight off the dict when its keys are ids in order.

        A reference's dictionaries are built from the corpus index in corpus order, so this is the
        usual case: a sequential read instead of a million scattered hash lookups.
        """
        in_order = next((known for seen, known in self._checked if seen is mapping), None)
        if in_order is None:  # once per mapping (a pass reads a few): a group's lookups read the same one twice
            in_order = len(mapping) == self.n and list(mapping) == self._ids()
            self._checked.append((mapping, in_order))
        if in_order:
            return iter(mapping.values())
        return map(mapping.__getitem__, self.ids)

    def _ids(self) -> list[str]:
        if self._ids_list is None:
            self._ids_list = list(self.ids)
        return self._ids_list

    def metric(self) -> float:
        if self.metric_name == "accuracy":
            return (self.n - self.n_wrong) / self.n
        return _macro_f1(Counter(zip(self.truth, self.predicted, strict=True)))

    def by_group(self, membership: dict[str, str]) -> dict[str, float]:
        """The metric within each group value (``membership[id]`` is the group of input ``id``), sorted by value."""
        if self.metric_name == "accuracy":
            totals = Counter(self.lookup(membership))
            wrong = Counter(compress(self.lookup(membership), self.wrong))
            return {value: (totals[value] - wrong[value]) / totals[value] for value in sorted(totals)}
        triples = Counter(zip(self.lookup(membership), self.truth, self.predicted, strict=True))
        pairs: dict[str, Counter[tuple[str, str]]] = {}
        for (value, truth, predicted), count in triples.items():
            pairs.setdefault(value, Counter())[(truth, predicted)] += count
        return {value: _macro_f1(pairs[value]) for value in sorted(pairs)}


def _macro_f1(pairs: Counter[tuple[str, str]]) -> float:
    """Macro F1 over the true labels, from counts of (true label, predicted label)."""
    labels = sorted({truth for truth, _ in pairs})
    scores = []
    for label in labels:
        tp = pairs[(label, label)]
        fp = sum(count for (truth, predicted), count in pairs.items() if predicted == label and truth != label)
        fn = sum(count for (truth, predicted), count in pairs.items() if truth == label and predicted != label)
        denominator = 2 * tp + fp + fn
        scores.append(2 * tp / denominator if denominator else 0.0)
    return sum(scores) / len(scores)


@dataclass(frozen=True)
class Agreement:
    """How a pass compares with the reference variant's pass on the same ids."""

    agreement: float | None
    max_score_delta: float | None
    identical: bool | None


def compare_predictions(candidate: ParsedPredictions, reference: ParsedPredictions) -> Agreement:
    """Agreement of labels, largest score difference and identity, over the same ids (else all None)."""
    ours = dict(zip(candidate.ids, zip(candidate.labels, candidate.scores, strict=True), strict=True))
    theirs = dict(zip(reference.ids, zip(reference.labels, reference.scores, strict=True), strict=True))
    if not ours or ours.keys() != theirs.keys():
        return Agreement(None, None, None)
    same = sum(1 for i, (label, _) in ours.items() if label == theirs[i][0])
    delta = max(abs(score - theirs[i][1]) for i, (_, score) in ours.items())
    identical = all(label == theirs[i][0] and score == theirs[i][1] for i, (label, score) in ours.items())
    return Agreement(same / len(ours), delta, identical)
