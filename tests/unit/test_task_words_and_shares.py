"""Summaries say what the rule says: every task names its own outputs (a generation pass yields no labels), and a
generation summary always reports the identical and near-tie shares against the reference variant."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from protocol.tasks import describe_task, task_named, task_names, task_words
from runner.analysis.agreement_shares import share_lines, shares_by_variant


@pytest.mark.parametrize("name", task_names())
def test_every_task_names_its_own_output_unit(name: str) -> None:
    task = task_named(name)
    own = dict(getattr(task, "words", {}))
    assert own.get("outputs"), f"{name} names no output unit of its own"
    line = describe_task(SimpleNamespace(task=name, quality=SimpleNamespace(metric=task.metrics[0])))
    assert f"each pass yields {own['outputs']}" in line


def test_a_generation_pass_yields_no_labels_and_classifies_nothing() -> None:
    generation = task_named("text-generation")
    line = describe_task(SimpleNamespace(task="text-generation", quality=SimpleNamespace(metric="rouge_l")))
    assert "labels" not in line and "label" not in task_words(generation)["agreement"]
    assert task_words(generation)["done"] != "classified"
    assert "identical" in line and "near tie" in line  # what agreeing means for this task


def verdict(trial: str, identical: float | None, near: float | None) -> dict[str, object]:
    details = {} if identical is None else {"identical_share": identical, "near_tie_share": near}
    return {"trial_id": trial, **({"agreement_details": details} if details else {})}


def test_a_generation_summary_reports_identical_and_near_tie_shares_for_every_variant() -> None:
    task = task_named("text-generation")
    rows = [SimpleNamespace(trial_id=t, variant_id=v) for t, v in (
        ("t1", "batch_size=4"), ("t2", "batch_size=1"), ("t3", "batch_size=4"), ("t4", "batch_size=1"),
        ("t5", "batch_size=8"))]
    verdicts = {"t1": verdict("t1", 1.0, 1.0), "t2": verdict("t2", 0.5, 0.75), "t3": verdict("t3", 1.0, 1.0),
                "t4": verdict("t4", 0.25, 1.0), "t5": verdict("t5", None, None)}
    shares = shares_by_variant(task, rows, verdicts)
    assert shares["batch_size=1"]["identical_share"] == {"median": 0.375, "min": 0.25, "passes": 2}
    assert shares["batch_size=1"]["near_tie_share"] == {"median": 0.875, "min": 0.75, "passes": 2}
    assert shares["batch_size=8"]["identical_share"] == {"median": None, "min": None, "passes": 0}
    text = share_lines(task, shares)
    assert "identical token sequences" in text and "near tie" in text
    assert "| batch_size=1 | 0.3750 / 0.2500 | 0.8750 / 0.7500 | 2 |" in text
    assert "| batch_size=8 | — | — | 0 (no pass compared with the reference) |" in text


def test_a_classification_summary_has_no_such_section() -> None:
    task = task_named("text-classification")
    rows = [SimpleNamespace(trial_id="t1", variant_id="batch_size=1")]
    assert shares_by_variant(task, rows, {"t1": verdict("t1", None, None)}) == {}
    assert share_lines(task, {}) == ""
