"""Predictions × corpus × quality rule → a verdict for one pass.

A written file is not yet an accepted result: the expected id set must be
found exactly (no duplicates, none missing, none unexpected), every line must
be well-formed, and the main metric must meet the study's minimum. Wrong
predictions are kept: they are the quality measurement.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.errors import UserError


@dataclass(frozen=True)
class Prediction:
    id: str
    label: str
    score: float


@dataclass(frozen=True)
class ParsedPredictions:
    predictions: tuple[Prediction, ...]
    format_errors: tuple[str, ...]


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


def parse_predictions(path: Path) -> ParsedPredictions:
    """Read ``predictions.jsonl``; malformed lines are counted and described, never fatal."""
    predictions: list[Prediction] = []
    errors: list[str] = []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ParsedPredictions((), ("prediction file missing",))
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    truncated_line = 0
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        truncated_line = len(lines)
    for number, line in enumerate(lines, start=1):
        if number == truncated_line:
            errors.append(f"line {number}: truncated (no final newline)")
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            errors.append(f"line {number}: not valid JSON")
            continue
        problem = _prediction_problem(item)
        if problem:
            errors.append(f"line {number}: {problem}")
            continue
        predictions.append(Prediction(id=item["id"], label=item["label"], score=float(item["score"])))
    return ParsedPredictions(tuple(predictions), tuple(errors))


def _prediction_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return "not a JSON object"
    if not isinstance(item.get("id"), str):
        return "missing or non-string id"
    if not isinstance(item.get("label"), str):
        return "missing or non-string label"
    score = item.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return "missing or non-finite score"
    if not 0.0 <= score <= 1.0:
        return f"score {score} outside [0, 1]"
    return ""


def check_pass(parsed: ParsedPredictions, reference: Reference, metric: str, minimum: float) -> PassCheck:
    expected = set(reference.ids)
    seen: set[str] = set()
    duplicates: set[str] = set()
    for prediction in parsed.predictions:
        if prediction.id in seen:
            duplicates.add(prediction.id)
        seen.add(prediction.id)
    missing = expected - seen
    unexpected = seen - expected
    label_set = reference.label_set
    bad_labels = sorted({p.label for p in parsed.predictions} - label_set)
    reasons: list[str] = []
    if parsed.format_errors:
        reasons.append(f"{len(parsed.format_errors)} format error(s), first: {parsed.format_errors[0]}")
    if duplicates:
        reasons.append(f"{len(duplicates)} duplicate id(s), e.g. {sorted(duplicates)[0]!r}")
    if missing:
        reasons.append(f"{len(missing)} missing id(s), e.g. {sorted(missing)[0]!r}")
    if unexpected:
        reasons.append(f"{len(unexpected)} id(s) not in the corpus, e.g. {sorted(unexpected)[0]!r}")
    if bad_labels:
        reasons.append(f"label(s) outside the corpus label set: {bad_labels[:3]}")
    ids_match = not missing and not unexpected
    complete = ids_match and not duplicates and not parsed.format_errors and not bad_labels
    metric_value: float | None = None
    subgroups: dict[str, dict[str, float]] = {}
    if complete:
        predicted = {p.id: p.label for p in parsed.predictions}
        metric_value = compute_metric(metric, reference.ids, reference.labels, predicted)
        for group_name, membership in reference.groups.items():
            buckets: dict[str, list[str]] = defaultdict(list)
            for ident in reference.ids:
                buckets[membership[ident]].append(ident)
            subgroups[group_name] = {
                value: compute_metric(metric, tuple(ids), reference.labels, predicted)
                for value, ids in sorted(buckets.items())
            }
        if metric_value < minimum:
            reasons.append(f"{metric} {metric_value:.4f} below the study's minimum {minimum}")
    else:
        reasons.append("incomplete or malformed pass: quality not computed")
    return PassCheck(
        expected_ids=len(reference.ids),
        observed_ids=len(parsed.predictions),
        ids_match=ids_match,
        duplicate_ids=len(duplicates),
        missing_ids=len(missing),
        unexpected_ids=len(unexpected),
        format_errors=len(parsed.format_errors),
        metric=metric,
        metric_value=metric_value,
        subgroups=subgroups,
        accepted=complete and metric_value is not None and metric_value >= minimum,
        reasons=tuple(reasons),
    )


def compute_metric(metric: str, ids: tuple[str, ...], truth: dict[str, str], predicted: dict[str, str]) -> float:
    if not ids:
        raise ValueError("metric over an empty set")
    if metric == "accuracy":
        return sum(1 for i in ids if predicted[i] == truth[i]) / len(ids)
    if metric == "macro_f1":
        labels = sorted({truth[i] for i in ids})
        scores = []
        for label in labels:
            tp = sum(1 for i in ids if predicted[i] == label and truth[i] == label)
            fp = sum(1 for i in ids if predicted[i] == label and truth[i] != label)
            fn = sum(1 for i in ids if predicted[i] != label and truth[i] == label)
            denominator = 2 * tp + fp + fn
            scores.append(2 * tp / denominator if denominator else 0.0)
        return sum(scores) / len(scores)
    raise UserError(f"unknown metric {metric!r}", "quality.metric", "Use accuracy or macro_f1.")


@dataclass(frozen=True)
class Agreement:
    """How a pass compares with the reference variant's pass on the same ids."""

    agreement: float | None
    max_score_delta: float | None
    identical: bool | None


def compare_predictions(candidate: ParsedPredictions, reference: ParsedPredictions) -> Agreement:
    ours = {p.id: p for p in candidate.predictions}
    theirs = {p.id: p for p in reference.predictions}
    if not ours or set(ours) != set(theirs):
        return Agreement(None, None, None)
    same = sum(1 for i, p in ours.items() if p.label == theirs[i].label)
    delta = max(abs(p.score - theirs[i].score) for i, p in ours.items())
    identical = all(p.label == theirs[i].label and p.score == theirs[i].score for i, p in ours.items())
    return Agreement(same / len(ours), delta, identical)
