"""Issue 13: ties on whole-plan price break by a real speed difference; no rental still ranks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from test_decide import CATALOG, FIVE_OK, campaign

from protocol.decision.order import break_cost_ties, really_faster
from protocol.decision.plan_fit import plan_cost
from protocol.decision.rank import decide
from protocol.study.load import load_study
from protocol.study.model import Study


@pytest.fixture
def make_study(tmp_path, study_text) -> Callable[..., Study]:
    def make() -> Study:
        path = tmp_path / "study.toml"
        path.write_text(study_text(), encoding="utf-8")
        return load_study(path)

    return make


def test_really_faster_needs_ranges_that_do_not_overlap(make_study: Callable[..., Study]) -> None:
    study = make_study()
    base = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG).configurations[0]
    fast = dataclasses.replace(base, configuration_id="fast", min_pass_s=5.0, max_pass_s=6.0, median_pass_s=5.5)
    slow = dataclasses.replace(base, configuration_id="slow", min_pass_s=6.5, max_pass_s=9.0, median_pass_s=7.0)
    overlapping = dataclasses.replace(slow, configuration_id="overlap", min_pass_s=5.8)
    assert really_faster(fast, slow) and not really_faster(slow, fast)
    assert not really_faster(fast, overlapping)
    # The tie-break: same plan price, same failures: the really faster one goes first, whatever the spread.
    assert [c.configuration_id for c in break_cost_ties([slow, fast])] == ["fast", "slow"]
    assert [c.configuration_id for c in break_cost_ties([overlapping, fast])] == ["overlap", "fast"]
    pricier = dataclasses.replace(fast, cost=plan_cost(CATALOG, "rtx-4090", 3, 1, 1))
    assert [c.configuration_id for c in break_cost_ties([slow, pricier])] == ["slow", "fast"]


def test_same_plan_price_prefers_the_really_faster_median_and_says_so(make_study: Callable[..., Study]) -> None:
    study = make_study()
    # batch_size=1 has the smaller relative spread, but batch_size=4 is faster on every pass.
    evidence = campaign(study, {
        "batch_size=1": [("ok", 10.0), ("ok", 10.1), ("ok", 10.2)],
        "batch_size=4": [("ok", 5.0), ("ok", 6.0), ("ok", 7.0)],
    })
    decision = decide([evidence], study, CATALOG)
    assert decision.chosen == "batch_size=4 on rtx-4090 ×2 lots"
    assert "faster median pass" in decision.why[-1] and "the difference is real" in decision.why[-1]


def test_without_a_rental_decide_still_ranks_and_says_what_is_missing(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {"batch_size=1": FIVE_OK, "batch_size=4": [("ok", 5.0), ("ok", 5.5), ("ok", 6.0)]},
                        gpu=None)
    decision = decide([evidence], study, CATALOG)
    assert decision.chosen is None
    text = "\n".join(decision.why)
    assert "isocost rental" in text and "--gpu" in text
    assert "by measured time and quality" in text
    assert text.index("1. batch_size=4") < text.index("2. batch_size=1")
