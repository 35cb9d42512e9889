"""The tuning rule (hand-computed) and the comment-keeping TOML edit that writes it (`isocost tune`)."""

from __future__ import annotations

import tomllib

import pytest

from protocol.tomledit import set_table_keys
from protocol.tuning import propose


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
