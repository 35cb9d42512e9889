"""protocol.decision.agreement: the matrix of configurations by id and the rule against the one reference,
computed by hand on small passes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from protocol.decision.agreement import (
    ConfigurationOutputs,
    build_matrix,
    cross_equivalence,
    judge_across,
)
from protocol.tasks.classification import CLASSIFICATION
from protocol.tasks.classification.predictions import ParsedPredictions

IDS = ("a", "b", "c", "d", "e")
QUALITY = SimpleNamespace(metric="accuracy", max_metric_drop=0.1, min_agreement=0.8)
STUDY = SimpleNamespace(quality=QUALITY)


def passes(*label_rows: str) -> list[ParsedPredictions]:
    return [ParsedPredictions.from_columns(IDS, list(labels), [0.5] * len(IDS)) for labels in label_rows]


def config(name: str, metrics: list[float], *label_rows: str) -> ConfigurationOutputs:
    return ConfigurationOutputs(name, name.split(" on ")[0], metrics, passes(*label_rows))


def matrix(*configs: ConfigurationOutputs, reference: str | None = "ref on x"):
    return build_matrix(configs, CLASSIFICATION, STUDY, reference=reference, reference_dir="results/x",
                        reference_reason="" if reference else "no accepted pass")


def test_cells_by_hand() -> None:
    ref = config("ref on x", [1.0], "xxxxx")
    one_off = config("v on y", [0.8, 0.6], "xxxxy", "xxxyy")
    m = matrix(ref, one_off)
    cell = m.against_reference("v on y")
    assert (cell.share_equal, cell.min_share_equal) == (0.8, 0.6)  # first pass 4/5; lowest pass 3/5
    assert cell.metric_difference == pytest.approx(0.7 - 1.0)  # median 0.7 against 1.0
    assert (cell.ids_differ, cell.examples) == (2, ("d", "e"))  # ids differing in any pass
    back = m.cell("ref on x", "v on y")
    assert (back.share_equal, back.min_share_equal, back.ids_differ) == (0.8, 0.8, 1)
    assert len(m.cells) == 4 and m.configurations == ("ref on x", "v on y")


def test_repeatability_counts_the_ids_that_moved() -> None:
    m = matrix(config("ref on x", [1.0, 1.0, 1.0], "xxxxx", "xxxxx", "xxxxx"),
               config("v on y", [1.0, 1.0, 1.0], "xxxxx", "yxxxx", "xxxxy"), config("w on z", [1.0], "xxxxx"))
    same, moved, single = (m.repeat_of(n) for n in ("ref on x", "v on y", "w on z"))
    assert (same.identical, same.ids_moved) == (True, 0)
    assert (moved.identical, moved.ids_moved, moved.examples) == (False, 2, ("a", "e"))
    assert single.identical is None and "one accepted pass" in single.reason


def test_the_rule_against_the_one_reference() -> None:
    m = matrix(config("ref on x", [1.0], "xxxxx"), config("ok on y", [0.95], "xxxxy"),
               config("low on y", [0.8], "xxxxy"), config("far on y", [1.0], "xxyyy"), config("none on y", []))
    assert cross_equivalence(m, "ref on x", QUALITY) == (True, "the decision's reference itself")
    ok, why = cross_equivalence(m, "ok on y", QUALITY)
    assert ok is True and "1 id(s) differ (e.g. e)" in why
    low, why = cross_equivalence(m, "low on y", QUALITY)
    assert low is False and "accuracy 0.2000 below the decision's reference ref on x; tolerance 0.1" in why
    far, why = cross_equivalence(m, "far on y", QUALITY)
    assert far is False and "agreement with the decision's reference ref on x 0.4000 < required 0.8: 3 id(s) " \
        "differ (e.g. c, d, e)" in why
    unknown, why = cross_equivalence(m, "none on y", QUALITY)
    assert unknown is None and "none on y has no accepted pass" in why


def test_no_reference_leaves_equivalence_unknown() -> None:
    m = matrix(config("ref on x", []), config("v on y", [1.0], "xxxxx"), reference=None)
    assert cross_equivalence(m, "v on y", QUALITY) == (None, "no reference configuration for the decision: "
                                                             "no accepted pass")


def test_common_seeds_compare_with_the_same_seeds_reference() -> None:
    configs = (config("ref@seed=1 on x", [1.0], "xxxxx"), config("ref@seed=2 on x", [1.0], "yyyyy"),
               config("v@seed=2 on y", [1.0], "yyyyy"))
    m = build_matrix(configs, CLASSIFICATION, STUDY, reference="ref@seed=1 on x", reference_dir="x",
                     reference_of={"v@seed=2 on y": "ref@seed=2 on x"})
    assert cross_equivalence(m, "v@seed=2 on y", QUALITY)[0] is True  # not against seed 1's labels


def test_a_configuration_not_equivalent_across_campaigns_is_not_ranked() -> None:
    m = matrix(config("ref on x", [1.0], "xxxxx"), config("far on y", [1.0], "xxyyy"))
    base = SimpleNamespace(configuration_id="far on y", equivalent=True, accepted_passes=1, acceptable=True,
                           exclusions=(), cross_equivalent=None, cross_reason="")
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Config:
        configuration_id: str
        equivalent: bool | None
        accepted_passes: int
        acceptable: bool
        exclusions: tuple[str, ...] = ()
        cross_equivalent: bool | None = None
        cross_reason: str = ""
        median_metric: float | None = None
        extra: dict = field(default_factory=dict)

    judged = judge_across(Config(**vars(base)), m, QUALITY)
    assert judged.acceptable is False and judged.cross_equivalent is False
    assert judged.exclusions[0].startswith("quality across campaigns: not equivalent to the decision's reference")
    already = judge_across(Config(**{**vars(base), "equivalent": False, "acceptable": False}), m, QUALITY)
    assert already.exclusions == ()  # its own campaign's verdict is the reason: not repeated


def test_the_score_share_rule_applies_across_campaigns_as_in_the_summary() -> None:
    """A generation study's ``min_score_share`` (the median score at least that share of the reference's) holds
    across campaigns as it does in a campaign's own summary: a configuration whose outputs agree (near ties count
    as agreeing) but whose score is 0.95 of the reference's is not equivalent under ``min_score_share = 0.99``."""
    quality = SimpleNamespace(metric="rouge_l", max_metric_drop=0.1, min_agreement=0.8,
                              extra={"min_score_share": 0.99})
    m = matrix(config("ref on x", [0.40], "xxxxx"), config("bf16 on y", [0.38], "xxxxx"),
               config("close on y", [0.397], "xxxxx"))
    low, why = cross_equivalence(m, "bf16 on y", quality, row_metric=0.38)
    assert low is False and "rouge_l 0.3800 is 0.9500 of the decision's reference ref on x's 0.4000" in why, why
    close, _ = cross_equivalence(m, "close on y", quality, row_metric=0.397)
    assert close is True
    assert cross_equivalence(m, "bf16 on y", QUALITY, row_metric=0.38)[0] is True  # no share declared: the drop


def test_the_memo_says_what_differ_means_for_a_generation_and_only_there() -> None:
    from dataclasses import replace as with_task

    from runner.decision.render.matrix import NEAR_TIE_NOTE, reference_lines

    m = matrix(config("ref on x", [1.0], "xxxxx"), config("v on y", [1.0], "xxxxy"))
    judged = [SimpleNamespace(configuration_id=name, cross_equivalent=True) for name in ("ref on x", "v on y")]
    assert NEAR_TIE_NOTE.strip() not in "\n".join(reference_lines(m, judged))  # classification: no note
    generation = "\n".join(reference_lines(with_task(m, task="text-generation"), judged))
    assert NEAR_TIE_NOTE.strip() in generation and "not a near tie" in generation
