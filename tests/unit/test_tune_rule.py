"""The tuning rule (hand-computed) and the comment-keeping TOML edit that writes it (`isocost tune`)."""

from __future__ import annotations

import tomllib

import pytest

from protocol.io.tomledit import set_table_keys
from protocol.study.tuning import propose


def test_rule_by_hand():
    p = propose(0.9, 100)  # se = sqrt(0.09/100) = 0.03
    assert p.se == pytest.approx(0.03)
    assert (p.minimum, p.max_metric_drop, p.min_agreement) == (0.84, 0.03, 0.94)


def test_perfect_score_keeps_a_margin():
    p = propose(1.0, 20)  # se = 1/20 = 0.05
    assert (p.minimum, p.max_metric_drop, p.min_agreement) == (0.9, 0.05, 0.9)


TEXT = """\
# my study
[quality]
metric = "accuracy"  # the metric
minimum = 0.0  # not tuned yet
tuned_on = "not tuned yet"  # where

[warmup]
minimum = 3  # same key name in another table: untouched
"""


def test_edit_keeps_comments_and_other_tables():
    out = set_table_keys(TEXT, "quality", {"minimum": 0.84, "tuned_on": "tuning", "min_agreement": 0.94},
                         {"minimum": "tuned: accuracy 0.9 on 100"})
    assert "# my study\n" in out and 'metric = "accuracy"  # the metric\n' in out
    assert "minimum = 0.84  # tuned: accuracy 0.9 on 100\n" in out
    assert 'tuned_on = "tuning"  # where\n' in out
    data = tomllib.loads(out)
    assert data["quality"]["min_agreement"] == 0.94 and data["warmup"]["minimum"] == 3


def test_the_size_a_tuning_split_needs_comes_from_the_rule():
    from protocol.study.tuning import MAX_SE, MIN_TUNING_INPUTS, WORST_CASE_INPUTS, inputs_needed, standard_error

    assert (MAX_SE, MIN_TUNING_INPUTS, WORST_CASE_INPUTS) == (0.1, 10, 25)  # 1/0.1; 0.25/0.1²
    assert inputs_needed(1.0) == 10 and inputs_needed(0.5) == 25 and inputs_needed(0.8) == 16  # 0.16/0.01
    for m in (0.0, 0.3, 0.5, 0.8, 0.9167, 1.0):
        n = inputs_needed(m)
        assert standard_error(m, n) <= MAX_SE + 1e-12 < standard_error(m, n - 1)


@pytest.mark.parametrize("n, value, needed", [(1, None, "at least 10"), (9, None, "at least 10"),
                                              (12, 0.5, "at least 25"), (20, 0.7, "at least 21")])
def test_a_tuning_split_too_small_for_the_rule_is_refused_with_the_size_it_needs(n, value, needed):
    from protocol.errors import UserError
    from protocol.study.tuning import check_tuning_size

    with pytest.raises(UserError) as caught:
        check_tuning_size(n, "tuning.jsonl", "accuracy", value)
    assert needed in caught.value.message and "tuning.jsonl" in caught.value.message


@pytest.mark.parametrize("n, value", [(10, None), (10, 1.0), (12, 0.9167), (25, 0.5)])
def test_a_tuning_split_large_enough_passes(n, value):
    from protocol.study.tuning import check_tuning_size, propose

    check_tuning_size(n, "tuning.jsonl", "accuracy", value)
    if value is not None:
        p = propose(value, n)
        assert p.min_agreement >= 0.8 and p.max_metric_drop <= 0.1


def test_a_metric_that_is_no_share_gets_a_seeded_bootstrap_standard_error() -> None:
    """Issue 22: macro-F1 is not a proportion; its se comes from a seeded bootstrap, recorded with the rule."""
    import statistics

    from protocol.study.tuning import bootstrap_method, bootstrap_standard_error, propose
    from protocol.tasks.classification import CLASSIFICATION, Reference
    from protocol.tasks.classification.predictions import ParsedPredictions

    ids = tuple(f"t{i}" for i in range(60))
    truth = {i: ("x" if k % 3 else "y") for k, i in enumerate(ids)}
    labels = [truth[i] if k % 7 else ("y" if truth[i] == "x" else "x") for k, i in enumerate(ids)]
    outputs = ParsedPredictions.from_columns(ids, labels, [0.9] * len(ids))
    reference = Reference(ids=ids, labels=truth, groups={})

    class Study:
        class quality:  # noqa: N801 (a stand-in for the study's [quality])
            metric = "macro_f1"

    score = CLASSIFICATION.resampled_metric(outputs, reference, Study)
    se = bootstrap_standard_error(score, len(ids))
    assert se == bootstrap_standard_error(score, len(ids))  # seeded: the same every run
    assert se != bootstrap_standard_error(score, len(ids), seed=1)
    # by hand: the same resamples, scored one by one
    import random
    rng = random.Random(0)
    by_hand = [score([rng.randrange(60) for _ in range(60)]) for _ in range(1000)]
    assert se == max(statistics.pstdev(by_hand), 1 / 60)
    proposal = propose(score(range(60)), 60, se, bootstrap_method())
    assert proposal.se == se and "seeded bootstrap" in proposal.se_method and "random.Random(0)" in proposal.se_method
    assert not CLASSIFICATION.is_proportion("macro_f1") and CLASSIFICATION.is_proportion("accuracy")


def test_tune_warns_when_the_reference_scores_near_perfectly_on_the_tuning_split() -> None:
    """Issue 22: the demo's tuning split trained its head; tune measured 1.0 and proposed 0.99, which the final
    corpus (about 0.83) could never reach. A (near) perfect score is now flagged with its likely cause."""
    from runner.own.tune import _near_perfect

    class Study:
        class quality:  # noqa: N801
            metric = "accuracy"

    [warning] = _near_perfect(Study, 1.0)
    assert "scores accuracy 1.0000 on the tuning split" in warning and "trained" in warning
    assert _near_perfect(Study, 0.95) == ()
