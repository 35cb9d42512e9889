from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.tasks.classification import Reference, check_pass, compare_predictions, compute_metric, parse_predictions

REFERENCE = Reference(
    ids=("a", "b", "c", "d"),
    labels={"a": "x", "b": "x", "c": "y", "d": "y"},
    groups={"length_bucket": {"a": "short", "b": "short", "c": "long", "d": "long"}},
)


def write(tmp_path: Path, lines: list[object], tail: str = "") -> Path:
    path = tmp_path / "predictions.jsonl"
    text = "".join((json.dumps(line) if not isinstance(line, str) else line) + "\n" for line in lines)
    path.write_text(text + tail, encoding="utf-8")
    return path


def pred(i: str, label: str, score: float = 0.9) -> dict[str, object]:
    return {"id": i, "label": label, "score": score}


def test_complete_pass_is_accepted_and_wrong_predictions_are_kept(tmp_path):
    path = write(tmp_path, [pred("a", "x"), pred("b", "y"), pred("c", "y"), pred("d", "y")])
    check = check_pass(parse_predictions(path), REFERENCE, "accuracy", 0.7)
    assert check.ids_match and check.accepted
    assert (check.expected_ids, check.observed_ids) == (4, 4)
    assert check.metric_value == 0.75  # b is wrong and still counted
    assert check.subgroups == {"length_bucket": {"long": 1.0, "short": 0.5}}


def test_below_minimum_is_rejected_with_the_reason(tmp_path):
    path = write(tmp_path, [pred("a", "x"), pred("b", "y"), pred("c", "y"), pred("d", "y")])
    check = check_pass(parse_predictions(path), REFERENCE, "accuracy", 0.8)
    assert not check.accepted
    assert "accuracy 0.7500 below the study's minimum 0.8" in check.verdict


def test_duplicate_ids(tmp_path):
    path = write(tmp_path, [pred("a", "x"), pred("a", "x"), pred("b", "x"), pred("c", "y"), pred("d", "y")])
    check = check_pass(parse_predictions(path), REFERENCE, "accuracy", 0.0)
    assert check.ids_match and not check.accepted
    assert check.duplicate_ids == 1
    assert "1 duplicate id(s), e.g. 'a'" in check.verdict


def test_missing_and_unexpected_ids(tmp_path):
    path = write(tmp_path, [pred("a", "x"), pred("b", "x"), pred("zz", "y")])
    check = check_pass(parse_predictions(path), REFERENCE, "accuracy", 0.0)
    assert not check.ids_match and not check.accepted
    assert (check.missing_ids, check.unexpected_ids) == (2, 1)
    assert "2 missing id(s), e.g. 'c'" in check.verdict
    assert "1 id(s) not in the corpus, e.g. 'zz'" in check.verdict
    assert check.metric_value is None


def test_truncated_last_line_is_a_format_error_and_earlier_lines_count(tmp_path):
    path = write(tmp_path, [pred("a", "x"), pred("b", "x"), pred("c", "y")], tail='{"id": "d", "lab')
    parsed = parse_predictions(path)
    assert len(parsed.predictions) == 3
    assert parsed.format_errors == ("line 4: truncated (no final newline)",)
    check = check_pass(parsed, REFERENCE, "accuracy", 0.0)
    assert not check.accepted and check.observed_ids == 3


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "not valid JSON"),
        ([1, 2], "not a JSON object"),
        ({"id": 3, "label": "x", "score": 0.5}, "non-string id"),
        ({"id": "d", "score": 0.5}, "non-string label"),
        ({"id": "d", "label": "y", "score": "high"}, "non-finite score"),
        ({"id": "d", "label": "y", "score": 1.5}, "outside [0, 1]"),
    ],
)
def test_malformed_lines(tmp_path, line, problem):
    path = write(tmp_path, [pred("a", "x"), pred("b", "x"), pred("c", "y"), line])
    parsed = parse_predictions(path)
    assert problem in parsed.format_errors[0]
    assert not check_pass(parsed, REFERENCE, "accuracy", 0.0).accepted


def test_label_outside_the_label_set(tmp_path):
    path = write(tmp_path, [pred("a", "x"), pred("b", "x"), pred("c", "y"), pred("d", "sports")])
    check = check_pass(parse_predictions(path), REFERENCE, "accuracy", 0.0)
    assert not check.accepted
    assert "label(s) outside the corpus label set: ['sports']" in check.verdict


def test_missing_prediction_file(tmp_path):
    parsed = parse_predictions(tmp_path / "absent.jsonl")
    assert parsed.format_errors == ("prediction file missing",)


def test_macro_f1_by_hand():
    truth = {"1": "x", "2": "x", "3": "y", "4": "y"}
    predicted = {"1": "x", "2": "y", "3": "y", "4": "y"}
    # x: tp1 fp0 fn1 -> 2/3; y: tp2 fp1 fn0 -> 4/5; mean = 0.7333…
    assert compute_metric("macro_f1", ("1", "2", "3", "4"), truth, predicted) == pytest.approx((2 / 3 + 4 / 5) / 2)


def test_agreement_and_score_delta(tmp_path):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(p) + "\n" for p in [pred("a", "x", 0.9), pred("b", "y", 0.6)]))
    b.write_text("".join(json.dumps(p) + "\n" for p in [pred("a", "x", 0.8), pred("b", "x", 0.55)]))
    agreement = compare_predictions(parse_predictions(a), parse_predictions(b))
    assert agreement.agreement == 0.5
    assert agreement.max_score_delta == pytest.approx(0.1)
    assert agreement.identical is False


def test_metrics_equal_scikit_learn_on_whole_passes_and_subgroups():
    """Issue 22: macro-F1 averages over the labels of the truth or the predictions, as scikit-learn does."""
    metrics = pytest.importorskip("sklearn.metrics")
    import random

    rng = random.Random(7)
    for trial in range(200):
        n = rng.randint(1, 40)
        labels = ["a", "b", "c", "d"][: rng.randint(1, 4)]
        ids = tuple(f"i{k}" for k in range(n))
        truth = {i: rng.choice(labels) for i in ids}
        predicted = {i: rng.choice(labels) for i in ids}
        y_true, y_pred = [truth[i] for i in ids], [predicted[i] for i in ids]
        assert compute_metric("accuracy", ids, truth, predicted) == pytest.approx(
            metrics.accuracy_score(y_true, y_pred), abs=1e-12), trial
        assert compute_metric("macro_f1", ids, truth, predicted) == pytest.approx(
            metrics.f1_score(y_true, y_pred, average="macro", zero_division=0), abs=1e-12), trial


def test_macro_f1_of_a_subgroup_counts_a_label_only_predicted():
    """Truth x,x,x,x, prediction x,y,x,x: 0.429 as scikit-learn (x 6/7, y 0); not 0.857 (x alone)."""
    ids = ("1", "2", "3", "4")
    truth = dict.fromkeys(ids, "x")
    predicted = {"1": "x", "2": "y", "3": "x", "4": "x"}
    assert compute_metric("macro_f1", ids, truth, predicted) == pytest.approx((6 / 7 + 0) / 2)
