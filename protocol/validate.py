"""Predictions × corpus × quality rule → a verdict for one pass.

A written file is not yet an accepted result: the expected id set must be
found exactly (no duplicates, none missing, none unexpected), every line must
be well-formed, and the main metric must meet the study's minimum. Wrong
predictions are kept: they are the quality measurement.
"""

from __future__ import annotations

import gc
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress
from operator import eq, itemgetter
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
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ParsedPredictions((), ("prediction file missing",))
    text = data.decode("utf-8", errors="replace")
    del data
    complete = text.rfind("\n") + 1  # text[:complete] is whole lines; anything after is a truncated line
    with _gc_paused():
        predictions, errors, lines_read = _parse_complete_lines(text, complete)
    if complete < len(text):
        errors.append(f"line {lines_read + 1}: truncated (no final newline)")
    return ParsedPredictions(tuple(predictions), tuple(errors))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a pass is parsed.

    Parsing allocates about two objects per line, none in a reference cycle; while they pile up,
    the collector would traverse the growing heap again and again for nothing (at 1,000,000 lines
    that tripled the parse time). Reference counting still frees everything as usual.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


#: Characters per chunk on the fast path (about 70,000 runner-written lines; bounds the memory).
_CHUNK_CHARS = 4 * 2**20


def _parse_complete_lines(text: str, complete: int) -> tuple[list[Prediction], list[str], int]:
    """Predictions, format errors and the number of lines in ``text[:complete]`` (whole lines).

    The text is taken in chunks of whole lines. A chunk of lines exactly as the runner writes them
    is read by one regular expression; another well-formed chunk by one ``json.loads`` and checks
    by column; a chunk with any problem line by line, which describes every problem exactly as a
    line-by-line reader does.
    """
    predictions: list[Prediction] = []
    errors: list[str] = []
    lines_before = 0
    start = 0
    while start < complete:
        stop = text.find("\n", min(start + _CHUNK_CHARS, complete) - 1) + 1
        body = text[start : stop - 1]  # the chunk's lines, without the last newline
        count = body.count("\n") + 1
        runner_written = _runner_lines(body, count)
        if runner_written is not None:
            predictions.extend(runner_written)
            lines_before += count
            start = stop
            continue
        items = _parse_chunk(body, count)
        fast = _predictions_from_items(items) if items is not None else None
        if fast is not None:
            predictions.extend(fast)
        else:
            for number, line in enumerate(body.split("\n"), start=lines_before + 1):
                if items is not None:
                    item = items[number - lines_before - 1]  # what json.loads(line) gives (see _parse_chunk)
                else:
                    try:
                        item = json.loads(line)
                    except (ValueError, RecursionError):  # bad JSON, integers over the digit limit, deep nesting
                        errors.append(f"line {number}: not valid JSON")
                        continue
                problem = _prediction_problem(item)
                if problem:
                    errors.append(f"line {number}: {problem}")
                    continue
                predictions.append(Prediction(id=item["id"], label=item["label"], score=float(item["score"])))
        lines_before += count
        start = stop
    return predictions, errors, lines_before


#: One line exactly as the runner writes it (``json.dumps`` of id, label, score): strings without
#: escapes or control characters (so the text between the quotes IS the value), and a JSON number
#: without a sign (so it is >= 0, and ``float`` of its text is what ``json.loads`` makes of it).
_RUNNER_LINE = re.compile(
    r'^\{"id": "([^"\\\x00-\x1f]*)", "label": "([^"\\\x00-\x1f]*)", '
    r'"score": ((?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\}$',
    re.MULTILINE,
)


def _runner_lines(body: str, count: int) -> list[Prediction] | None:
    """Predictions when all ``count`` lines are runner-written and well-formed; else None."""
    rows = _RUNNER_LINE.findall(body)
    if len(rows) != count:  # a line can match at most once, so every line matched
        return None
    ids, labels, numbers = zip(*rows, strict=True)
    scores = list(map(float, numbers))
    if not all(map(math.isfinite, scores)) or max(scores) > 1.0:
        return None  # the general path describes the problem
    return list(map(Prediction, ids, labels, scores))


def _parse_chunk(body: str, count: int) -> list[Any] | None:
    """Parse ``count`` newline-separated JSON lines with one ``json.loads``, or None when not exact.

    The lines become one array with ``",\n"`` between them. When every line starts with ``{`` and
    the text holds no ``[``, each separator can only be read as a top-level array comma: a string
    cannot run across it (strict JSON refuses a raw newline inside a string), numbers and literals
    end at a comma, and inside an object a comma must be followed by a key, never by the ``{``
    that starts the next line. So if the array parses and has exactly one item per line, item k
    is exactly what ``json.loads`` of line k returns; otherwise None, and the caller reads line
    by line.
    """
    if not body.startswith("{") or body.count("\n{") != count - 1 or "[" in body:
        return None
    try:
        items = json.loads("[" + body.replace("\n", ",\n") + "]")
    except (ValueError, RecursionError):
        return None
    if len(items) != count:
        return None
    return items


def _predictions_from_items(items: list[Any]) -> tuple[Prediction, ...] | None:
    """Predictions from parsed lines when every line is well-formed, else None (checked item by item)."""
    try:
        ids = list(map(itemgetter("id"), items))
        labels = list(map(itemgetter("label"), items))
        scores = list(map(itemgetter("score"), items))
    except (KeyError, TypeError):  # a missing key, or not an object
        return None
    if set(map(type, ids)) != {str} or set(map(type, labels)) != {str}:
        return None
    score_types = set(map(type, scores))
    if not score_types <= {float, int}:  # bool is its own type here, as in _prediction_problem
        return None
    try:
        if not all(map(math.isfinite, scores)):
            return None
    except OverflowError:  # an integer too large for a float: the item-by-item path describes it
        return None
    if min(scores) < 0.0 or max(scores) > 1.0:
        return None
    if int in score_types:
        scores = list(map(float, scores))
    return tuple(map(Prediction, ids, labels, scores))


def _finite(score: int | float) -> bool:
    try:
        return math.isfinite(score)
    except OverflowError:  # an integer beyond the float range
        return False


def _prediction_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return "not a JSON object"
    if not isinstance(item.get("id"), str):
        return "missing or non-string id"
    if not isinstance(item.get("label"), str):
        return "missing or non-string label"
    score = item.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not _finite(score):
        return "missing or non-finite score"
    if not 0.0 <= score <= 1.0:
        return f"score {score} outside [0, 1]"
    return ""


def check_pass(parsed: ParsedPredictions, reference: Reference, metric: str, minimum: float) -> PassCheck:
    observed_ids = [p.id for p in parsed.predictions]
    observed_labels = [p.label for p in parsed.predictions]
    expected_ids = list(reference.ids)
    duplicates: set[str] = set()
    # The usual pass: every expected id exactly once, in corpus order (one list comparison).
    in_corpus_order = observed_ids == expected_ids and _all_distinct(expected_ids, reference.labels)
    if in_corpus_order:
        missing: set[str] = set()
        unexpected: set[str] = set()
    else:
        expected = set(expected_ids)
        seen = set(observed_ids)
        if len(seen) != len(observed_ids):
            duplicates = {ident for ident, count in Counter(observed_ids).items() if count > 1}
        missing = expected - seen
        unexpected = seen - expected
    label_set = reference.label_set
    bad_labels = sorted(set(observed_labels) - label_set)
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
        if in_corpus_order:
            outcome = _Outcomes(metric, expected_ids, reference.labels, in_order=observed_labels)
        else:
            predicted = dict(zip(observed_ids, observed_labels, strict=True))
            outcome = _Outcomes(metric, expected_ids, reference.labels, predicted)
        metric_value = outcome.metric()
        for group_name, membership in reference.groups.items():
            subgroups[group_name] = outcome.by_group(list(outcome.lookup(membership)))
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


def _all_distinct(ids: list[str], keyed: dict[str, str]) -> bool:
    """True if no id repeats; cheap when ``keyed`` (the reference labels) has exactly these keys in order."""
    if len(keyed) == len(ids) and list(keyed) == ids:
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
                 in_order: list[str] | None = None) -> None:
        """``predicted`` maps id → label; or ``in_order[k]`` is the label predicted for ``ids[k]``."""
        if not ids:
            raise ValueError("metric over an empty set")
        self.metric_name = metric
        self.n = len(ids)
        self.ids = ids
        self._ids_list: list[str] | None = ids if isinstance(ids, list) else None
        labels: Iterable[str]
        if in_order is not None:
            labels = in_order
        elif predicted is not None:
            labels = map(predicted.__getitem__, ids)
        else:
            raise TypeError("_Outcomes needs predicted or in_order")
        if metric == "accuracy":
            self.correct = list(map(eq, labels, self.lookup(truth)))
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
        if len(mapping) == self.n:
            if self._ids_list is None:
                self._ids_list = list(self.ids)
            if list(mapping) == self._ids_list:
                return iter(mapping.values())
        return map(mapping.__getitem__, self.ids)

    def metric(self) -> float:
        if self.metric_name == "accuracy":
            return sum(self.correct) / self.n
        return _macro_f1(Counter(zip(self.truth, self.predicted, strict=True)))

    def by_group(self, values: list[str]) -> dict[str, float]:
        """The metric within each group value (``values[k]`` is the group of input k), sorted by value."""
        if self.metric_name == "accuracy":
            totals = Counter(values)
            correct = Counter(compress(values, self.correct))
            return {value: correct[value] / totals[value] for value in sorted(totals)}
        triples = Counter(zip(values, self.truth, self.predicted, strict=True))
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
    ours = {p.id: p for p in candidate.predictions}
    theirs = {p.id: p for p in reference.predictions}
    if not ours or set(ours) != set(theirs):
        return Agreement(None, None, None)
    same = sum(1 for i, p in ours.items() if p.label == theirs[i].label)
    delta = max(abs(p.score - theirs[i].score) for i, p in ours.items())
    identical = all(p.label == theirs[i].label and p.score == theirs[i].score for i, p in ours.items())
    return Agreement(same / len(ours), delta, identical)
