"""Text classification: one label per input, scored against the corpus labels (accuracy or macro-F1).

The unit of output is one line per input in ``predictions.jsonl`` (``{"id", "label", "score"}``, read by
:mod:`protocol.tasks.classification.predictions`); the pass check is the exact id set, well-formed lines, labels inside
the corpus
label set, and the metric over the pass and its subgroups; two passes agree on an id when their labels are
equal (:func:`compare_predictions`). :data:`CLASSIFICATION` is the task as :mod:`protocol.tasks` registers it.

Example::

    check = check_pass(parse_predictions(Path("trials/t/predictions.jsonl")), reference, "accuracy", 0.9)
    check.accepted, check.metric_value
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import ne
from pathlib import Path
from types import MappingProxyType
from typing import Any

from protocol.errors import UserError
from protocol.study.keys import StudyKey
from protocol.tasks.base import TaskExample, TaskInit
from protocol.tasks.classification.init import CLASSIFICATION_INIT
from protocol.tasks.classification.predictions import ParsedPredictions, parse_predictions
from protocol.tasks.pass_check import Agreement, IdCheck, PassCheck, check_ids, id_problems

__all__ = ["CLASSIFICATION", "Reference", "check_pass", "compare_predictions", "compute_metric", "parse_predictions"]


@dataclass(frozen=True)
class Reference:
    """Expected labels and subgroup membership for every corpus id, in corpus order."""

    ids: tuple[str, ...]
    labels: dict[str, str]
    groups: dict[str, dict[str, str]]  # subgroup name -> id -> group value

    @property
    def label_set(self) -> frozenset[str]:
        return frozenset(self.labels.values())


def _problems(parsed: ParsedPredictions, ids: IdCheck, bad_labels: list[str]) -> list[str]:
    """Why the pass is incomplete or malformed, one reason per kind of problem (empty when none)."""
    reasons = id_problems(parsed.format_errors, ids)
    if bad_labels:
        reasons.append(f"label(s) outside the corpus label set: {bad_labels[:3]}")
    return reasons


def _quality(parsed: ParsedPredictions, ids: IdCheck, reference: Reference,
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
    ids = check_ids(parsed.ids, reference.ids, reference.labels)
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
        expected_ids=len(reference.ids), observed_ids=len(parsed.ids), ids_match=ids.ids_match,
        duplicate_ids=len(ids.duplicates), missing_ids=len(ids.missing), unexpected_ids=len(ids.unexpected),
        format_errors=len(parsed.format_errors), metric=metric, metric_value=metric_value, subgroups=subgroups,
        accepted=complete and metric_value is not None and metric_value >= minimum, reasons=tuple(reasons),
    )


def compute_metric(metric: str, ids: tuple[str, ...], truth: dict[str, str], predicted: dict[str, str]) -> float:
    return _Outcomes(metric, ids, truth, predicted).metric()


class _Outcomes:
    """Per-input outcomes of one pass, looked up once and counted in C (1,000,000 inputs in well under a second).

    Every figure is a ratio of the same integer counts the textbook loops produce, so it is the same float; the
    dictionaries are read in the same order, so a missing id raises the same ``KeyError``.
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
    """Macro F1 from counts of (true label, predicted label), averaged over every label in the truth or the
    predictions, as scikit-learn's ``f1_score(average="macro")`` does (a label predicted but absent from the
    truth scores 0 and counts); over a whole pass the two sets are the corpus label set, so only subgroups
    can differ from an average over the true labels alone."""
    labels = sorted({label for pair in pairs for label in pair})
    scores = []
    for label in labels:
        tp = pairs[(label, label)]
        fp = sum(count for (truth, predicted), count in pairs.items() if predicted == label and truth != label)
        fn = sum(count for (truth, predicted), count in pairs.items() if truth == label and predicted != label)
        denominator = 2 * tp + fp + fn
        scores.append(2 * tp / denominator if denominator else 0.0)
    return sum(scores) / len(scores)


def compare_predictions(candidate: ParsedPredictions, reference: ParsedPredictions) -> Agreement:
    """Agreement of labels, largest score difference and identity, over the same ids (else all None)."""
    ours = dict(zip(candidate.ids, zip(candidate.labels, candidate.scores, strict=True), strict=True))
    theirs = dict(zip(reference.ids, zip(reference.labels, reference.scores, strict=True), strict=True))
    if not ours or ours.keys() != theirs.keys():
        return Agreement(None, None, None)
    differing = tuple(i for i, (label, _) in ours.items() if label != theirs[i][0])
    delta = max(abs(score - theirs[i][1]) for i, (_, score) in ours.items())
    identical = all(label == theirs[i][0] and score == theirs[i][1] for i, (label, score) in ours.items())
    return Agreement((len(ours) - len(differing)) / len(ours), delta, identical, differing_ids=differing)


class Classification:
    """The text-classification task (see the module docstring)."""

    name: str = "text-classification"
    output_files: tuple[str, ...] = ("predictions.jsonl",)
    trial_module: str = "protocol.tasks.classification.trial"
    study_keys: tuple[StudyKey, ...] = ()
    init: TaskInit = CLASSIFICATION_INIT
    docs: Mapping[str, str] = MappingProxyType({
        "yields": 'a label', "model": '`AutoModelForSequenceClassification`',
        "metrics": '`accuracy`, `macro_f1`',
        "agreement": 'share of equal labels'})
    metrics: tuple[str, ...] = ("accuracy", "macro_f1")
    labels_required: bool = True
    corpus_fields: tuple[str, ...] = ()
    subgroups: tuple[str, ...] = ("label", "length_bucket")
    option_tables: Mapping[str, str] = MappingProxyType({})
    #: How the summary and the memo name the outputs and the agreement.
    words: Mapping[str, str] = MappingProxyType({
        "outputs": "labels", "done": "classified", "units": "inputs",
        "agreement": "share of inputs whose label equals the reference variant's"})

    def parse_options(self, top: Any, base_dir: Path) -> dict[str, Any]:
        return {}  # a classifier needs nothing beyond the variant

    def parse_quality_extras(self, quality: Any) -> dict[str, Any]:
        return {}

    def check_inputs(self, study: Any, corpus: Sequence[Any], tuning: Sequence[Any]) -> None:
        # the labels against the model's id2label: protocol.tasks.classification.labels, where every caller shows them
        return None

    def frozen_files(self, study: Any) -> dict[str, Path]:
        return {}  # corpus_index.csv holds the labels

    def tuning_study(self, study: Any) -> Any:
        return study

    def scored_units(self, reference: Reference) -> int:
        return len(reference.ids)

    def check_model(self, model_dir: Path, records: Sequence[Any], study: Any, where: str) -> tuple[str, ...]:
        """Every corpus label is one the model predicts; returns the model's labels the records lack."""
        from protocol.tasks.classification.labels import check_labels

        return check_labels([r.label for r in records], model_dir, where)

    def reference(self, index_rows: Sequence[Mapping[str, str]], study: Any,
                  subgroups: Sequence[str] | None = None) -> Reference:
        """Expected labels and the subgroups scored (default: the study's), in corpus order."""
        ids = tuple(row["id"] for row in index_rows)
        labels = {row["id"]: row["label"] for row in index_rows}
        groups: dict[str, dict[str, str]] = {}
        for group in study.quality.subgroups if subgroups is None else subgroups:
            column = "label" if group == "label" else "length_bucket"
            groups[group] = {row["id"]: row[column] for row in index_rows}
        return Reference(ids=ids, labels=labels, groups=groups)

    def read_pass(self, trial_dir: Path) -> ParsedPredictions:
        return parse_predictions(trial_dir / "predictions.jsonl")

    def check_pass(self, outputs: ParsedPredictions, reference: Reference, study: Any) -> PassCheck:
        return check_pass(outputs, reference, study.quality.metric, study.quality.minimum)

    def agreement(self, candidate: ParsedPredictions, reference: ParsedPredictions, study: Any) -> Agreement:
        return compare_predictions(candidate, reference)

    def pass_figures(self, trial_dir: Path, pass_s: float | None) -> dict[str, Any]:
        return {}  # a classifier's throughput is its pass time: nothing of its own

    def is_proportion(self, metric: str) -> bool:
        return metric == "accuracy"

    def resampled_metric(self, outputs: ParsedPredictions, reference: Reference,
                         study: Any) -> Callable[[Sequence[int]], float]:
        """The metric over a resample of the inputs (indices into the corpus order, repeats allowed): what a
        bootstrap of the metric draws (a complete pass only)."""
        predicted = dict(zip(outputs.ids, outputs.labels, strict=True))
        ids, metric = reference.ids, study.quality.metric

        def score(indices: Sequence[int]) -> float:
            return compute_metric(metric, tuple(ids[i] for i in indices), reference.labels, predicted)

        return score


    def example(self) -> TaskExample:
        rows = tuple({"id": f"e{i}", "label": label, "n_tokens": "4", "length_bucket": "all"}
                     for i, label in enumerate(("x", "y", "x")))
        return TaskExample("accuracy", 0.9, {}, {}, rows, (["x", "y", "x"], [0.9, 0.8, 0.7]))

CLASSIFICATION = TASK = Classification()
