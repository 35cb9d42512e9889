"""Serving capacity per configuration and the serving decision's arithmetic (issue 36, deliverable 5).

Built from records (:class:`protocol.decision.capacity.RunFacts`): accepted or not, the bound met or not, LoadGen
VALID or INVALID, a series of rates with a gap; replicas = ceil(peak ÷ capacity) exact; the money over the period
under every billing option of a MADE-UP catalog, hand-computed in Decimal; a configuration that is fast but answers
differently is not ranked; one that meets the bound only at the lower rate is counted at that rate.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from protocol.costing.catalog_file import load_catalog
from protocol.costing.plans import Catalog
from protocol.decision.capacity import RunFacts, capacities, capacity_of, configuration_of, rate_of
from protocol.decision.serving import (
    ServingConfigInput,
    ServingDemand,
    price_configuration,
    rank_serving,
    replicas_needed,
    serving_demand,
    why_lines,
)
from protocol.errors import UserError
from protocol.records.codec import to_dict
from runner.decision.serving.memo import render_serving_memo

HEADER = "gpu,cards_per_lot,billing,plan_days,price_usd_per_lot,minimum_s,increment_s,currency,catalog_date,source"
MADE_UP = "MADE-UP test catalog (not a real offer)"


def run(config: str, rate: float, trial: str, *, accepted: bool | None = True, result: str | None = "VALID",
        latency: float = 50.0, bound: float = 100.0, tokens: int | None = None) -> RunFacts:
    return RunFacts(trial, f"{config}@{rate:g}", config, rate, "ok" if accepted is not None else "failed",
                    accepted, "" if accepted else "not shown the same result as batch_size=1", result, latency,
                    bound, latency <= bound, 1.0, 100, tokens)


@pytest.fixture()
def catalog(tmp_path: Path) -> Catalog:
    path = tmp_path / "made-up-catalog.csv"
    path.write_text("\n".join([
        HEADER,
        f"rtx-4090,1,flat,7,110.00,,,USD,2026-11-30,{MADE_UP}",
        f"rtx-4090,1,hourly,,0.70,3600,3600,USD,2026-11-30,{MADE_UP}",
        f"b200,2,flat,7,2071.00,,,USD,2026-11-30,{MADE_UP}",
    ]) + "\n", encoding="utf-8")
    return load_catalog(path)


# --- capacity ------------------------------------------------------------------------------------------------------

def test_capacity_is_the_highest_rate_where_every_repetition_held() -> None:
    runs = [run("b=1", 2.0, "t1"), run("b=1", 2.0, "t2"), run("b=1", 4.0, "t3"),
            run("b=1", 4.0, "t4", latency=140.0)]  # one repetition at 4 qps over the bound
    cap = capacity_of("b=1", runs, (2.0, 4.0))
    assert (cap.capacity_qps, cap.fails_at_qps, cap.repetitions_at_capacity) == (2.0, 4.0, 2)
    assert "latency at the percentile 140.0 ms against the 100 ms bound (trial t4)" in cap.reason
    assert any("bracketed between 2 qps (held) and 4 qps" in line for line in cap.uncertain)
    assert any("2 kept repetition(s) at 2 qps" in line for line in cap.uncertain)


def test_loadgen_invalid_does_not_hold_even_within_the_bound() -> None:
    cap = capacity_of("b=1", [run("b=1", 2.0, "t1"), run("b=1", 4.0, "t2", result="INVALID")], (2.0, 4.0))
    assert cap.capacity_qps == 2.0 and "LoadGen INVALID (trial t2)" in cap.reason
    no_result = capacity_of("b=1", [run("b=1", 2.0, "t1", result=None)], (2.0,))
    assert no_result.capacity_qps is None and "no LoadGen result" in no_result.reason


def test_answers_not_accepted_give_no_capacity_never_a_zero() -> None:
    runs = [run("b=4", 2.0, "t1", accepted=False), run("b=4", 4.0, "t2", accepted=False, latency=5.0)]
    cap = capacity_of("b=4", runs, (2.0, 4.0))
    assert cap.capacity_qps is None and cap.accepted is False
    assert cap.reason.startswith("outputs not accepted (2 qps: answers not accepted: not shown the same result")
    assert cap.reason.endswith("whatever the latency")


def test_incomplete_answers_fail_the_rate_only() -> None:
    """A failed trial at the higher rate (ids never asked, a crash) is not a quality verdict: the lower rate holds."""
    cap = capacity_of("b=1", [run("b=1", 2.0, "t1"), run("b=1", 4.0, "t2", accepted=None)], (2.0, 4.0))
    assert cap.capacity_qps == 2.0 and cap.accepted is True and "answers incomplete" in cap.reason


def test_bound_missed_at_the_lowest_rate_is_no_capacity() -> None:
    cap = capacity_of("b=1", [run("b=1", 2.0, "t1", latency=300.0), run("b=1", 4.0, "t2", latency=400.0)],
                      (2.0, 4.0))
    assert cap.capacity_qps is None and cap.accepted is True and cap.fails_at_qps == 2.0
    assert cap.reason.startswith("the bound does not hold at the lowest declared rate 2 qps")
    assert "capacity below it, not measured" in cap.reason


def test_a_gap_in_the_series_stops_the_walk_and_a_later_success_is_not_counted() -> None:
    runs = [run("b=1", 1.0, "t1"), run("b=1", 4.0, "t3")]  # nothing kept at the declared 2 qps
    cap = capacity_of("b=1", runs, (1.0, 2.0, 4.0))
    assert (cap.capacity_qps, cap.fails_at_qps) == (1.0, 2.0)
    assert [(r.rate_qps, r.held) for r in cap.rates] == [(1.0, True), (2.0, False), (4.0, True)]
    assert cap.rates[1].reasons == ("no kept run at this declared rate (a gap in the series)",)
    assert any("held again at 4 qps after failing at 2 qps: not counted" in line for line in cap.uncertain)


def test_a_single_rate_or_the_highest_rate_is_not_bracketed_above() -> None:
    single = capacity_of("b=1", [run("b=1", 20.0, "t1")], (20.0,))
    assert single.capacity_qps == 20.0 and single.fails_at_qps is None
    assert any(line.startswith("a single rate declared") for line in single.uncertain)
    top = capacity_of("b=1", [run("b=1", 2.0, "t1"), run("b=1", 4.0, "t2")], (2.0, 4.0))
    assert any("highest declared rate 4 qps" in line for line in top.uncertain)


def test_configurations_are_grouped_and_kept_in_order() -> None:
    runs = [run("b=1", 2.0, "t1"), run("b=4", 2.0, "t2"), run("b=1", 4.0, "t3"), run("b=4", 4.0, "t4")]
    assert [c.configuration for c in capacities(runs, (2.0, 4.0))] == ["b=1", "b=4"]


def test_the_rate_and_configuration_come_from_the_variants_rate_field_and_id() -> None:
    from dataclasses import replace

    from protocol.records.stages import Variant
    from protocol.study.traffic import Traffic

    traffic = cast(Traffic, SimpleNamespace(rates_qps=(20.0,)))
    base = Variant(variant_id="batch_size=4", stack="cpu", device="cpu", precision="fp32", quantization="none",
                   compile=False, attention="sdpa", batch_size=4, padding="longest", max_length=64,
                   length_grouping="none", resume="none", threads=1, seed=0, deterministic=True)
    assert rate_of(base, traffic) == 20.0 and configuration_of(base) == "batch_size=4"  # made before rate_qps
    rated = replace(base, variant_id="batch_size=4@rate_qps=2", rate_qps=2.0)
    assert rate_of(rated, traffic) == 2.0 and configuration_of(rated) == "batch_size=4"
    seeded = replace(base, variant_id="batch_size=4@rate_qps=0.5@seed=3", rate_qps=0.5)
    assert configuration_of(seeded) == "batch_size=4@seed=3"


# --- demand, replicas and money ------------------------------------------------------------------------------------

def test_replicas_are_exact_on_the_decimals_written() -> None:
    assert replicas_needed(40.0, 15.0) == 3
    assert replicas_needed(40.0, 20.0) == 2
    assert replicas_needed(1.1, 0.1) == 11  # as floats, 1.1 / 0.1 = 11.000000000000002 would say 12


@pytest.mark.parametrize(("args", "option"), [
    ((0.0, 8.0, 30), "--peak-qps"), ((float("nan"), 8.0, 30), "--peak-qps"), ((float("inf"), 8.0, 30), "--peak-qps"),
    ((-1.0, 8.0, 30), "--peak-qps"), ((40.0, 0.0, 30), "--hours-per-day"), ((40.0, 25.0, 30), "--hours-per-day"),
    ((40.0, 8.0, 0), "--days"), ((40.0, 8.0, 10_000), "--days"), ((None, 8.0, 30), "--peak-qps"),
    ((40.0, None, 30), "--hours-per-day"), ((40.0, 8.0, None), "--days"),
])
def test_bad_demand_is_refused_naming_the_option(args: tuple, option: str) -> None:
    with pytest.raises(UserError) as error:
        serving_demand(*args)
    assert error.value.where == option and "--peak-qps Q" in error.value.fix


def test_money_over_the_period_every_billing_option(catalog: Catalog) -> None:
    demand = serving_demand(40.0, 8.0, 30)
    cap = capacity_of("b=4", [run("b=4", 15.0, "t1")], (15.0,))
    config = price_configuration(ServingConfigInput("b=4 on rtx-4090 ×1 lot", cap, "rtx-4090", "", None, "n/a"),
                                 demand, catalog)
    assert (config.replicas, config.lots, config.cards_per_lot) == (3, 3, 1)
    flat, hourly = config.options
    # flat: 720 h needs ceil(720 / 168) = 5 consecutive 7-day plans × 3 lots × 110.00
    assert flat.total_usd == Decimal("1650.00") and "5 consecutive 7-day plan(s) × 3 lot(s)" in flat.note
    # hourly: 720 h × 3 lots × 0.70 = 1512.00
    assert hourly.total_usd == Decimal("1512.00")
    assert config.cost_usd == Decimal("1512.00") and config.cost_option == "hourly (per hour)"
    # 40 qps × 3600 × 8 h × 30 days = 34,560,000 requests; 1512 / 34.56 = 43.75
    assert config.per_million_requests_usd == Decimal("43.75")
    assert config.per_million_tokens_usd is None and config.tokens_reason == "n/a"


def test_cards_per_lot_and_tokens(catalog: Catalog) -> None:
    demand = ServingDemand(50.0, 24.0, 7)
    cap = capacity_of("g", [run("g", 10.0, "t1")], (10.0,))
    config = price_configuration(ServingConfigInput("g on b200", cap, "b200", "", 200.0, ""), demand, catalog)
    assert (config.replicas, config.lots) == (5, 3)  # 5 cards, 2 a lot
    assert config.cost_usd == Decimal("6213.00")  # one 7-day plan × 3 lots × 2071.00
    # 50 × 3600 × 24 × 7 = 30,240,000 requests; 6213 / 30.24 = 205.456… → 205.46; tokens × 200: 1.03
    assert config.per_million_requests_usd == Decimal("205.46")
    assert config.per_million_tokens_usd == Decimal("1.03")


def test_no_rental_or_unpriced_gpu_is_an_empty_cost_with_the_reason(catalog: Catalog) -> None:
    demand = ServingDemand(10.0, 8.0, 7)
    cap = capacity_of("b=1", [run("b=1", 5.0, "t1")], (5.0,))
    none = price_configuration(ServingConfigInput("x", cap, None, "run without --gpu", None, ""), demand, catalog)
    assert none.replicas == 2 and none.cost_usd is None and "run without --gpu" in none.not_ranked
    h100 = price_configuration(ServingConfigInput("y", cap, "h100", "", None, ""), demand, catalog)
    assert h100.cost_usd is None and "prices no h100" in h100.not_ranked


def test_fast_but_different_answers_is_not_ranked(catalog: Catalog) -> None:
    """The disagree case: batch 4 serves every rate within the bound, faster, but answers differently."""
    demand = ServingDemand(40.0, 8.0, 7)
    runs = [run("b=1", 10.0, "t1"), run("b=1", 20.0, "t2"),
            run("b=4", 10.0, "t3", accepted=False, latency=5.0), run("b=4", 20.0, "t4", accepted=False, latency=6.0)]
    items = [ServingConfigInput(f"{c.configuration} on rtx-4090", c, "rtx-4090", "", None, "")
             for c in capacities(runs, (10.0, 20.0))]
    configs, ranking = rank_serving([price_configuration(item, demand, catalog) for item in items])
    assert ranking == ("b=1 on rtx-4090",)
    fast = next(c for c in configs if c.configuration_id == "b=4 on rtx-4090")
    assert fast.rank is None and fast.replicas is None and fast.not_ranked.startswith("no capacity: outputs not")


def test_bound_only_at_the_lower_rate_counts_the_replicas_there(catalog: Catalog) -> None:
    """b=8 holds at 10 qps but misses the bound at 20; b=1 holds at both. Peak 40 qps: 4 cards against 2."""
    demand = ServingDemand(40.0, 8.0, 7)
    runs = [run("b=1", 10.0, "t1"), run("b=1", 20.0, "t2"),
            run("b=8", 10.0, "t3"), run("b=8", 20.0, "t4", latency=180.0)]
    items = [ServingConfigInput(f"{c.configuration} on rtx-4090", c, "rtx-4090", "", None, "")
             for c in capacities(runs, (10.0, 20.0))]
    configs, ranking = rank_serving([price_configuration(item, demand, catalog) for item in items])
    by_id = {c.configuration_id: c for c in configs}
    assert by_id["b=8 on rtx-4090"].capacity.capacity_qps == 10.0 and by_id["b=8 on rtx-4090"].replicas == 4
    assert by_id["b=1 on rtx-4090"].replicas == 2
    # 7 days: one flat plan (110.00 a lot) against 168 h hourly (117.60 a lot): the flat plan, × cards
    assert by_id["b=1 on rtx-4090"].cost_usd == Decimal("220.00")
    assert by_id["b=8 on rtx-4090"].cost_usd == Decimal("440.00")
    assert ranking == ("b=1 on rtx-4090", "b=8 on rtx-4090")
    why = why_lines(by_id["b=1 on rtx-4090"], demand, configs, "p99 latency ≤ 100 ms")
    assert "replicas: ceil(40 qps ÷ 20 qps) = 2 card(s), 2 lot(s) of 1" in why[2]
    assert why[-1].startswith("runner-up b=8 on rtx-4090: 440.00 USD (4 card(s) at 10 qps each): dearer")


def test_the_memo_says_which_how_many_why_and_what_is_uncertain(catalog: Catalog) -> None:
    from protocol.decision.serving import ServingDecision

    demand = ServingDemand(40.0, 8.0, 7)
    runs = [run("b=1", 20.0, "t1"), run("b=4", 20.0, "t2", accepted=False)]
    items = [ServingConfigInput(f"{c.configuration} on rtx-4090", c, "rtx-4090", "", None, "not generation")
             for c in capacities(runs, (20.0,))]
    configs, ranking = rank_serving([price_configuration(item, demand, catalog) for item in items])
    chosen = configs[0]
    decision = ServingDecision("serve", "Which?", "text-classification", "p99 latency ≤ 100 ms", (20.0,), demand,
                               catalog.path, catalog.dates_text, configs, ranking, chosen.configuration_id,
                               why_lines(chosen, demand, configs, "p99 latency ≤ 100 ms"),
                               tuple(f"{chosen.configuration_id}: {u}" for u in chosen.capacity.uncertain))
    memo = render_serving_memo(decision)
    assert "**Chosen: b=1 on rtx-4090**: 2 card(s) (2 lot(s) of 1), 220.00 USD over 7 day(s)" in memo
    assert "- b=4 on rtx-4090: no capacity: outputs not accepted" in memo
    assert "a single rate declared" in memo and "1 kept repetition(s) at 20 qps" in memo
    assert "| 1 | b=1 on rtx-4090 | 20 | ≥ 20 (not bracketed above) | 2 | 2 | 220.00 |" in memo
    assert to_dict(decision)["chosen"] == "b=1 on rtx-4090"


# --- what a kept run's answers count as (runner/decision/serving/runs.py) ----------------------------------------

@pytest.mark.parametrize(("status", "gate", "same", "answers", "expected"), [
    ("ok", True, True, {}, True),
    ("ok", True, False, {}, False),  # the gate accepted, but not the reference's result: quality
    ("ok", False, True, {"differing_count": 2}, False),  # repeats of an id differ: quality
    ("ok", False, True, {"malformed_count": 1}, False),
    ("ok", False, True, {"missing_count": 3}, None),  # ids never asked (a run stopped early): the rate failed
    ("ok", False, True, {"failed_count": 1}, None),
    ("ok", False, True, {}, False),  # the gate refused on its quality rule
    ("failed", False, True, {}, None),  # the trial did not complete
])
def test_a_runs_answers_are_accepted_refused_or_incomplete(status: str, gate: bool, same: bool, answers: dict,
                                                           expected: bool | None) -> None:
    from runner.decision.serving.runs import _accepted

    accepted, reason = _accepted(SimpleNamespace(status=status), gate, same, {"answers": answers}, "", "b=1")
    assert accepted is expected and (reason == "") == (expected is True)


def test_a_generation_run_holds_only_when_ttft_and_tpot_both_meet_their_bounds() -> None:
    from runner.decision.serving.runs import _bound_detail, _within

    block = {"latency_bound_ms": None, "latency_within_bound": None, "percentile": 0.9,
             "ttft_bound_ms": 500.0, "ttft_at_percentile_ms": 120.0, "ttft_within_bound": True,
             "tpot_bound_ms": 50.0, "tpot_at_percentile_ms": 80.0, "tpot_within_bound": False}
    assert _within(block) is False
    assert _bound_detail(block) == "at p90: ttft 120.0 ms ≤ 500 ms, tpot 80.0 ms > 50 ms"
    assert _within({**block, "tpot_within_bound": True}) is True
    assert _within({**block, "tpot_within_bound": None}) is None
    assert _within({"latency_bound_ms": 100.0, "latency_within_bound": True}) is True
    assert _within({}) is None


def test_across_campaigns_a_variant_not_the_references_result_is_refused() -> None:
    """Several campaigns: a run accepted in its own campaign but not equivalent to the decision's one reference
    (another card answering differently) is refused, so its configuration gets no capacity."""
    from runner.decision.serving.stage import judged_across

    runs = (run("b=1", 20.0, "t1"), run("b=4", 20.0, "t2"), run("b=8", 20.0, "t3", accepted=None))
    verdicts = {"b=1@20": (True, "the decision's reference itself"), "b=4@20": (False, "agreement 0.5 < 0.9"),
                "b=8@20": (None, "no accepted pass")}
    judged = judged_across(runs, "c2", lambda campaign, variant: verdicts[variant])
    assert [r.accepted for r in judged] == [True, False, None]  # an incomplete run stays incomplete
    assert judged[1].accepted_reason == ("quality across campaigns: not equivalent to the decision's reference "
                                         "(agreement 0.5 < 0.9)")
    assert capacity_of("b=4", [judged[1]], (20.0,)).capacity_qps is None
    assert judged_across(runs, "c2", None) == runs


def test_across_campaigns_the_score_share_rule_applies_as_in_the_offline_decision(catalog: Catalog) -> None:
    """A generation server study decided over two campaigns: the variant on the second card answers every id as the
    reference does (near ties agree) but its median ROUGE-L is 0.38 against the reference's 0.40 (0.95 of it) under
    ``min_score_share = 0.99``. The offline decision refuses it (``judge_across`` passes the configuration's median
    metric to ``cross_equivalence``); the serving decision must too: no capacity, not ranked, the reason said."""
    from protocol.decision.agreement import ConfigurationOutputs, build_matrix
    from protocol.tasks.classification import CLASSIFICATION
    from protocol.tasks.classification.predictions import ParsedPredictions
    from runner.decision.serving.stage import across_campaigns, judged_across

    ids = ("a", "b", "c")
    quality = SimpleNamespace(metric="rouge_l", max_metric_drop=0.1, min_agreement=0.8,
                              extra={"min_score_share": 0.99})
    same = [ParsedPredictions.from_columns(ids, ["x", "y", "x"], [0.5] * 3)]
    configs = (ConfigurationOutputs("b=1 on x", "b=1@20", [0.40], same),
               ConfigurationOutputs("b=1 on y", "b=1@20", [0.38], same))
    matrix = build_matrix(configs, CLASSIFICATION, SimpleNamespace(quality=quality), reference="b=1 on x",
                          reference_dir="results/x")
    labels = {("c1", "b=1@20"): "b=1 on x", ("c2", "b=1@20"): "b=1 on y"}
    evidence = [SimpleNamespace(campaign_id=c, summary=SimpleNamespace(variants=[
        SimpleNamespace(variant_id="b=1@20", median_metric=m)])) for c, m in (("c1", 0.40), ("c2", 0.38))]
    across = across_campaigns(matrix, labels, cast(list, evidence), quality)
    assert across("c1", "b=1@20") == (True, "the decision's reference itself")
    [refused] = judged_across((run("b=1", 20.0, "t2"),), "c2", across)
    assert refused.accepted is False and refused.accepted_reason == (
        "quality across campaigns: not equivalent to the decision's reference (rouge_l 0.3800 is 0.9500 of the "
        "decision's reference b=1 on x's 0.4000; the rule needs at least 0.99)")
    [item] = [ServingConfigInput("b=1 on y", c, "rtx-4090", "", None, "") for c in capacities([refused], (20.0,))]
    configs_ranked, ranking = rank_serving([price_configuration(item, ServingDemand(40.0, 8.0, 7), catalog)])
    assert ranking == () and configs_ranked[0].not_ranked.startswith("no capacity: outputs not accepted")
