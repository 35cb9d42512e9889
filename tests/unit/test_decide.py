"""The decision rules, on hand-built campaigns: artifacts, plans, cost, deadline, ranking, refusals, ledger."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from protocol.costing.calendar import access_window
from protocol.costing.catalog_file import load_catalog
from protocol.costing.plans import Catalog, default_catalog_path
from protocol.decision.configuration import count_artifacts
from protocol.decision.evidence import CampaignEvidence, TrialCapacity, check_same_study
from protocol.decision.ledger import parse_ledger
from protocol.decision.order import rank_key
from protocol.decision.plan_fit import deadline_fit, plan_cost
from protocol.decision.rank import decide
from protocol.decision.records import ARTIFACT_RULE, Decision, Expense, Ledger
from protocol.errors import UserError
from protocol.records import codec
from protocol.records.raw_columns import RAW_COLUMNS
from protocol.records.raw_record import RawRecord
from protocol.study.load import load_study
from protocol.study.model import Study
from runner.analysis.stats import summarize
from runner.campaign_dir.raw_frame import frame_of

CATALOG = load_catalog(default_catalog_path())
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # Monday 09:00 UTC
MONDAY_TO_FRIDAY = '\n[deadline]\nstart = "2026-11-02T09:00"\nend = "2026-11-06T09:00"\ntz = "Europe/Paris"\n'

Pass = tuple[str, float | None]  # (status, pass_s)


@pytest.fixture
def make_study(tmp_path: Path, study_text: Callable[..., str]) -> Callable[..., Study]:
    """The conftest study (variants batch_size=1/4/8, reference batch_size=1), optionally with a deadline."""
    count = iter(range(1000))

    def make(deadline: str = "", expected_artifacts: int = 1, **overrides: Any) -> Study:
        text = study_text(**overrides).replace(
            'scenario = "offline"', f'scenario = "offline"\nexpected_artifacts = {expected_artifacts}')
        path = tmp_path / f"study-{next(count)}.toml"
        path.write_text(text + deadline, encoding="utf-8")
        return load_study(path)

    return make


def campaign(
    study: Study,
    variants: dict[str, list[Pass]],
    *,
    label: str = "results/a",
    gpu: str | None = "rtx-4090",
    lots: int = 2,
    trial_s: float = 60.0,
    setup_s: float = 600.0,
    metric: dict[str, float] | None = None,
    agreement: dict[str, float] | None = None,
    sha: str | None = None,
    model: str = "sha256:" + "3" * 64,
    campaign_id: str | None = None,
    capacity: TrialCapacity | None = None,
    rss: int | None = 500 * 2**20,
) -> CampaignEvidence:
    """A campaign built by hand: trials in rotated order, each ``trial_s`` long after ``setup_s`` of set-up."""
    metric = metric or {}
    agreement = agreement or {}
    order: list[tuple[str, int, str, float | None]] = []
    longest = max(len(p) for p in variants.values())
    for rep in range(longest):
        for vid, passes in variants.items():
            if rep < len(passes):
                order.append((vid, rep + 1, *passes[rep]))
    rows: list[dict[str, str]] = []
    verdicts: dict[str, dict[str, Any]] = {}
    events = [{"at": _iso(T0), "event": "setup_start"}, {"at": _iso(T0 + timedelta(seconds=setup_s)),
                                                          "event": "setup_end"}]
    clock = T0 + timedelta(seconds=setup_s)
    for index, (vid, rep, status, pass_s) in enumerate(order, start=1):
        trial_id = f"{index:03d}-r{rep}-{vid}"
        accepted = status == "ok" and pass_s is not None
        row = {name: "" for name in RAW_COLUMNS}
        row.update({
            "trial_id": trial_id, "variant_id": vid, "repetition": str(rep), "order_index": str(index),
            "attempt": "1", "status": status, "pass_s": "" if pass_s is None else repr(pass_s),
            "corpus_accepted": "true" if accepted else "false", "peak_rss_bytes": "" if rss is None else str(rss),
            "started_at": _iso(clock), "ended_at": _iso(clock + timedelta(seconds=trial_s)),
            "empty_reasons": "peak_allocated_bytes: CPU trial: no GPU",
        })
        rows.append(row)
        events += [{"at": _iso(clock), "event": "trial_start", "trial_id": trial_id},
                   {"at": _iso(clock + timedelta(seconds=trial_s)), "event": "trial_end", "trial_id": trial_id}]
        clock += timedelta(seconds=trial_s)
        verdicts[trial_id] = {
            "corpus_accepted": accepted, "metric_value": metric.get(vid, 0.9) if accepted else None,
            "agreement": agreement.get(vid, 1.0) if accepted else None, "max_score_delta": 0.0, "subgroups": {},
        }
    events.append({"at": _iso(clock), "event": "trials_end"})
    variant_dicts = [{"variant_id": v.variant_id, "series": list(v.series), **v.config()}
                     for v in study.variants() if v.variant_id in variants]
    records = tuple(RawRecord.from_text(row) for row in rows)
    summary = summarize(frame_of(records), verdicts, variant_dicts, study.quality)
    return CampaignEvidence(
        label=label,
        campaign_id=campaign_id or f"{label.replace('/', '')}-0000000000",
        study_name=study.name,
        study_sha256=sha or study.sha256,
        corpus_fingerprint=study.corpus.fingerprint,
        corpus_content_fingerprint="sha256:" + "c" * 64,
        corpus_inputs=12,
        model_fingerprint=model,
        rental_gpu=gpu,
        rental_lots=lots if gpu else None,
        rental_empty_reason="" if gpu else "no --gpu given to `isocost run`: the plan this host is rented under is "
                                           "unknown",
        host="vm",
        launcher="process",
        rows=records,
        events=tuple(events),
        summary=summary,
        accepted_trials=frozenset(t for t, v in verdicts.items() if v["corpus_accepted"]),
        capacities={r.trial_id: capacity for r in records} if capacity else {},
    )


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


FIVE_OK = [("ok", 10.0), ("ok", 11.0), ("ok", 12.0), ("ok", 10.5), ("ok", 11.5)]


# -- accepted artifacts ---------------------------------------------------------------------


def test_five_accepted_passes_of_one_corpus_are_one_artifact() -> None:
    assert count_artifacts({"sha256:c"}, 1) == (1, "1 of 1 expected")


def test_no_accepted_pass_is_zero_artifacts() -> None:
    count, note = count_artifacts(set(), 1)
    assert count == 0 and "no accepted pass" in note


def test_one_corpus_cannot_count_for_three_expected() -> None:
    count, note = count_artifacts({"sha256:c"}, 3)
    assert count == 1
    assert "1 of 3 expected" in note and "were not produced and are not counted" in note


def test_artifacts_beyond_the_declared_need_are_not_counted() -> None:
    count, note = count_artifacts({"sha256:a", "sha256:b"}, 1)
    assert count == 1 and "beyond the declared need" in note


def test_decision_counts_a_corpus_once_whatever_the_repetitions(make_study: Callable[..., Study]) -> None:
    study = make_study()
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG)
    config = decision.configurations[0]
    assert config.accepted_passes == 5
    assert config.distinct_accepted_corpora == 1
    assert config.accepted_artifacts == 1
    assert config.cost.cost_per_validated_corpus_usd == Decimal("220.00")  # 220.00 / 1, not 220.00 / 5
    assert decision.artifact_rule == ARTIFACT_RULE
    assert "five accepted passes of one corpus are ONE validated corpus" in ARTIFACT_RULE


# -- plans and cost -------------------------------------------------------------------------


def test_short_period_on_rtx_4090_two_lots_is_the_whole_7_day_plan() -> None:
    cost = plan_cost(CATALOG, "rtx-4090", 2, 1.2, 1)
    assert [(o.plan_days, o.covers, o.total_usd) for o in cost.options] == [
        (3, True, None), (7, True, Decimal("220.00")), (30, True, None)]
    assert "no price for rtx-4090 for 3 days" in cost.options[0].reason
    assert "2026-09-24" in cost.options[0].reason
    assert cost.contracted is not None and cost.contracted.plan.plan_days == 7
    assert cost.total_usd == Decimal("220.00")  # never prorated to 1.2 h
    assert cost.cost_per_validated_corpus_usd == Decimal("220.00")
    assert cost.per_result_state == "defined"


def test_b200_lot_already_holds_two_cards() -> None:
    cost = plan_cost(CATALOG, "b200", 1, 10, 1)
    assert cost.contracted is not None
    assert cost.contracted.cards == 2
    assert cost.total_usd == Decimal("2071.00")


def test_zero_accepted_leaves_the_ratio_undefined_and_the_spend_standing() -> None:
    cost = plan_cost(CATALOG, "rtx-4090", 2, 1.2, 0)
    assert cost.total_usd == Decimal("220.00")
    assert cost.cost_per_validated_corpus_usd is None
    assert cost.per_result_state == "undefined"


def test_a_period_longer_than_3_days_needs_the_7_day_plan() -> None:
    cost = plan_cost(CATALOG, "rtx-4090", 1, 96, 1)  # Monday 09:00 to Friday 09:00
    assert [(o.plan_days, o.covers) for o in cost.options] == [(3, False), (7, True), (30, True)]
    assert cost.options[0].reason == "too short: 72 h < needed 96 h (short by 24 h)"
    assert cost.total_usd == Decimal("110.00")


def test_no_plan_covers_a_very_long_period_and_nothing_is_extended() -> None:
    cost = plan_cost(CATALOG, "rtx-4090", 1, 800, 1)
    assert cost.contracted is None
    assert "reschedule" in cost.empty_reason and "no automatic extension" in cost.empty_reason


def test_unknown_gpu_gives_the_catalogs_own_error_text() -> None:
    cost = plan_cost(CATALOG, "h100", 1, 5, 1)
    assert cost.contracted is None
    assert cost.empty_reason.startswith("unknown GPU 'h100' (catalog dated 2026-09-24")
    assert "Known GPUs: b200, rtx-4090" in cost.empty_reason


def test_no_rental_or_no_period_leaves_the_cost_empty_with_the_reason() -> None:
    assert plan_cost(CATALOG, None, None, 5, 1, no_gpu_reason="no --gpu given").empty_reason == "no --gpu given"
    assert plan_cost(CATALOG, "rtx-4090", 1, None, 1).empty_reason.startswith("campaign period unknown")


def own_catalog(tmp_path: Path, rows: str) -> Catalog:
    path = tmp_path / "catalog.csv"
    path.write_text("gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source\n" + rows,
                    encoding="utf-8")
    return load_catalog(path)


def test_the_cheapest_covering_plan_is_contracted(tmp_path: Path) -> None:
    catalog = own_catalog(tmp_path, "l40s,1,3,50.00,USD,2026-10-01,test\nl40s,1,7,110.00,USD,2026-10-01,test\n")
    assert plan_cost(catalog, "l40s", 2, 10, 1).total_usd == Decimal("100.00")  # 3-day, 2 lots
    assert plan_cost(catalog, "l40s", 2, 80, 1).total_usd == Decimal("220.00")  # 80 h > 72 h: 7-day
    odd = own_catalog(tmp_path, "l40s,1,3,120.00,USD,2026-10-01,test\nl40s,1,7,110.00,USD,2026-10-01,test\n")
    cost = plan_cost(odd, "l40s", 1, 10, 1)
    assert cost.contracted is not None and cost.contracted.plan.plan_days == 7  # cheaper although longer


def test_per_corpus_cost_is_exact_decimal(tmp_path: Path) -> None:
    catalog = own_catalog(tmp_path, "l40s,1,3,100.00,USD,2026-10-01,test\n")
    cost = plan_cost(catalog, "l40s", 1, 10, 3)
    assert cost.cost_per_validated_corpus_usd == Decimal("33.33")


# -- deadline -------------------------------------------------------------------------------


def test_deadline_fit_monday_to_friday_is_96_hours() -> None:
    window = access_window("2026-11-02T09:00", "2026-11-06T09:00", "Europe/Paris")
    assert deadline_fit(95.5, window) == (True, "fits: needs 95.5 h, the deadline window holds 96 h (0.5 h to spare)")
    fits, note = deadline_fit(100, window)
    assert fits is False and note == "does not fit: needs 100 h > the deadline window's 96 h (over by 4 h)"


def test_deadline_window_across_dst_counts_real_hours() -> None:
    # Saturday 09:00 to Monday 09:00 across the Paris fall-back: 49 real hours, 48 on the wall clock.
    window = access_window("2026-10-24T09:00", "2026-10-26T09:00", "Europe/Paris")
    assert deadline_fit(48.5, window)[0] is True
    assert deadline_fit(49.5, window)[0] is False


def test_no_deadline_is_no_check() -> None:
    fits, note = deadline_fit(5, None)
    assert fits is None and "no deadline" in note


def test_declared_waiting_is_part_of_the_needed_period(make_study: Callable[..., Study]) -> None:
    study = make_study(deadline=MONDAY_TO_FRIDAY + "waiting_h = 90\n")
    # 600 s setup + 5 trials × 3600 s = 5.1666… h used; + 90 h waiting = 95.17 h <= 96 h.
    evidence = campaign(study, {"batch_size=1": FIVE_OK}, trial_s=3600)
    decision = decide([evidence], study, CATALOG)
    period = decision.campaigns[0].period
    assert period.used_h == pytest.approx(5 + 1 / 6)
    assert period.waiting_h == 90
    assert period.needed_h == pytest.approx(95 + 1 / 6)
    config = decision.configurations[0]
    assert config.deadline_fits is True
    assert config.cost.total_usd == Decimal("220.00")  # 95.17 h > 72 h: the 7-day plan
    assert [o.covers for o in config.cost.options] == [False, True, True]


# -- refusing to mix studies ----------------------------------------------------------------


def test_results_from_different_studies_are_refused_naming_the_difference(make_study: Callable[..., Study]) -> None:
    study = make_study()
    a = campaign(study, {"batch_size=1": FIVE_OK}, label="results/a")
    b = campaign(study, {"batch_size=1": FIVE_OK}, label="results/b", sha="sha256:" + "9" * 64)
    with pytest.raises(UserError) as info:
        decide([a, b], study, CATALOG)
    message = info.value.message
    assert message.startswith("results come from different studies: study sha256 differs (results/a: "
                              f"{study.sha256}, results/b: sha256:{'9' * 64})")
    assert "model fingerprint" not in message
    assert "run decide on each study separately" in message


def test_every_difference_is_named(make_study: Callable[..., Study]) -> None:
    study = make_study()
    a = campaign(study, {"batch_size=1": FIVE_OK}, label="results/a")
    b = campaign(study, {"batch_size=1": FIVE_OK}, label="results/b", sha="sha256:" + "9" * 64,
                 model="sha256:" + "8" * 64)
    with pytest.raises(UserError, match=r"study sha256 differs .*; model fingerprint differs \(results/a: "):
        check_same_study([a, b])


def test_the_same_campaign_twice_is_refused(make_study: Callable[..., Study]) -> None:
    study = make_study()
    a = campaign(study, {"batch_size=1": FIVE_OK}, label="results/a", campaign_id="abc")
    b = campaign(study, {"batch_size=1": FIVE_OK}, label="copy/a", campaign_id="abc")
    with pytest.raises(UserError, match="campaign abc is given twice"):
        check_same_study([a, b])


# -- configurations and ranking -------------------------------------------------------------


def test_equal_cost_is_ranked_by_failures_not_speed(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {
        "batch_size=1": FIVE_OK,
        "batch_size=4": [("ok", 5.0), ("ok", 5.5), ("oom", None), ("ok", 6.0), ("ok", 5.2)],
    })
    decision = decide([evidence], study, CATALOG)
    one, four = decision.configurations
    assert one.configuration_id == "batch_size=1 on rtx-4090 ×2 lots"
    assert four.passes[2].status == "oom" and four.passes[2].pass_s is None
    assert (one.failures, four.failures) == (0, 1)
    assert four.statuses == {"ok": 4, "oom": 1}
    assert one.cost.total_usd == four.cost.total_usd == Decimal("220.00")
    assert decision.ranking == ("batch_size=1 on rtx-4090 ×2 lots", "batch_size=4 on rtx-4090 ×2 lots")
    assert decision.chosen == "batch_size=1 on rtx-4090 ×2 lots"
    assert (one.rank, four.rank) == (1, 2)
    assert decision.why[-1] == (
        "ties on contracted cost (220.00 USD) with 1 other configuration(s); ranked first by fewer failed attempts "
        "(0 against 1 for batch_size=4 on rtx-4090 ×2 lots)")
    assert "quality: equivalent to the reference" in decision.why[0]
    assert decision.why[2] == ("contracted plan: rtx-4090 7-day plan, 2 lot(s) × 110.00 USD = 220.00 USD (whole plan "
                               "price, catalog 2026-09-24)")


def test_then_by_relative_spread(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {
        "batch_size=1": [("ok", 10.0), ("ok", 10.1), ("ok", 10.2)],  # spread 0.2 / 10.1 = 2.0 %
        "batch_size=4": [("ok", 30.0), ("ok", 35.0), ("ok", 40.0)],  # spread 10 / 35 = 28.6 %
    })
    decision = decide([evidence], study, CATALOG)
    assert not decision.configurations[0].uncertainty and not decision.configurations[1].uncertainty
    assert decision.chosen == "batch_size=1 on rtx-4090 ×2 lots"
    assert decision.why[-1].endswith("ranked first by a smaller relative spread of pass times (2.0% against 28.6% for "
                                     "batch_size=4 on rtx-4090 ×2 lots)")


def test_rank_key_orders_cost_then_failures_then_uncertainty(make_study: Callable[..., Study]) -> None:
    study = make_study()
    base = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG).configurations[0]
    cheaper = dataclasses.replace(base, configuration_id="z", cost=plan_cost(CATALOG, "rtx-4090", 1, 1, 1),
                                  failures=3, uncertainty=("w1", "w2"))
    worried = dataclasses.replace(base, configuration_id="a", uncertainty=("spread warning",))
    failing = dataclasses.replace(base, configuration_id="b", failures=1)
    assert sorted([failing, worried, base, cheaper], key=rank_key) == [cheaper, base, worried, failing]


def test_spread_warnings_are_uncertainty(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {"batch_size=1": [("ok", 10.0), ("ok", 12.0), ("ok", 11.0)],
                                "batch_size=4": [("ok", 10.5), ("ok", 11.5), ("ok", 11.2)]})
    decision = decide([evidence], study, CATALOG)
    for config in decision.configurations:
        assert any("cannot yet discriminate" in w for w in config.uncertainty)
    assert any("cannot yet discriminate" in line for line in decision.uncertain)


def test_not_equivalent_and_all_failed_are_listed_but_not_ranked(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {
        "batch_size=1": FIVE_OK,
        "batch_size=4": FIVE_OK,
        "batch_size=8": [("oom", None)] * 5,
    }, metric={"batch_size=1": 0.90, "batch_size=4": 0.85})
    decision = decide([evidence], study, CATALOG)
    one, four, eight = decision.configurations
    assert decision.ranking == (one.configuration_id,)
    assert four.equivalent is False and four.rank is None
    assert four.exclusions[0].startswith("quality: not equivalent to the reference (accuracy 0.8500 is 0.0500 below")
    assert eight.exclusions[0] == "quality: not equivalent to the reference (no accepted pass)"
    assert eight.exclusions[1] == "no accepted corpus: 5 oom"
    assert eight.accepted_artifacts == 0
    assert eight.cost.total_usd == Decimal("220.00")  # the spend still counts
    assert eight.cost.cost_per_validated_corpus_usd is None
    assert eight.cost.per_result_state == "undefined"
    assert decision.why[-1] == "it is the only acceptable configuration"


def test_the_same_variant_on_other_hardware_is_another_configuration(make_study: Callable[..., Study]) -> None:
    study = make_study()
    a = campaign(study, {"batch_size=1": FIVE_OK}, label="results/rtx")
    b = campaign(study, {"batch_size=1": FIVE_OK}, label="results/b200", gpu="b200", lots=1)
    decision = decide([a, b], study, CATALOG)
    assert [c.configuration_id for c in decision.configurations] == [
        "batch_size=1 on rtx-4090 ×2 lots", "batch_size=1 on b200 ×1 lot"]
    assert decision.chosen == "batch_size=1 on rtx-4090 ×2 lots"
    assert decision.why[-1] == ("cheapest acceptable: 220.00 USD against 2071.00 USD for the next, batch_size=1 on "
                                "b200 ×1 lot")
    assert decision.deadline_note == ""


def test_two_campaigns_on_the_same_gpu_stay_apart(make_study: Callable[..., Study]) -> None:
    study = make_study()
    a = campaign(study, {"batch_size=1": FIVE_OK}, label="results/a", campaign_id="aaaaaaaa1111")
    b = campaign(study, {"batch_size=1": FIVE_OK}, label="results/b", campaign_id="bbbbbbbb2222")
    ids = [c.configuration_id for c in decide([a, b], study, CATALOG).configurations]
    assert ids == ["batch_size=1 on rtx-4090 ×2 lots [campaign aaaaaaaa]",
                   "batch_size=1 on rtx-4090 ×2 lots [campaign bbbbbbbb]"]


def test_a_faster_option_that_wins_only_because_of_the_deadline_is_named(make_study: Callable[..., Study]) -> None:
    study = make_study(deadline=MONDAY_TO_FRIDAY + "waiting_h = 0\n")
    # RTX 4090: 600 s + 5 × 72000 s = 100.17 h > 96 h. B200: 600 s + 5 × 7200 s = 10.17 h.
    slow = campaign(study, {"batch_size=1": FIVE_OK}, label="results/rtx", trial_s=72000)
    fast = campaign(study, {"batch_size=1": FIVE_OK}, label="results/b200", gpu="b200", lots=1, trial_s=7200)
    decision = decide([slow, fast], study, CATALOG)
    rtx, b200 = decision.configurations
    assert rtx.deadline_fits is False and rtx.exclusions == (
        "deadline: does not fit: needs 100.17 h > the deadline window's 96 h (over by 4.17 h)",)
    assert rtx.cost.total_usd == Decimal("220.00")
    assert b200.deadline_fits is True
    assert decision.chosen == "batch_size=1 on b200 ×1 lot"
    assert decision.deadline_note == (
        "batch_size=1 on b200 ×1 lot wins only because of the deadline: batch_size=1 on rtx-4090 ×2 lots would cost "
        "220.00 USD instead of 2071.00 USD, but it needs 100.17 h, more than the deadline window's 96 h; the faster "
        "batch_size=1 on b200 ×1 lot fits")
    # Without the deadline the cheaper one wins and nothing is said about the deadline.
    no_deadline = make_study()
    decision = decide([campaign(no_deadline, {"batch_size=1": FIVE_OK}, label="results/rtx", trial_s=72000),
                       campaign(no_deadline, {"batch_size=1": FIVE_OK}, label="results/b200", gpu="b200", lots=1)],
                      no_deadline, CATALOG)
    assert decision.chosen == "batch_size=1 on rtx-4090 ×2 lots"
    assert decision.deadline_note == ""


def test_nothing_fits_the_deadline(make_study: Callable[..., Study]) -> None:
    study = make_study(deadline=MONDAY_TO_FRIDAY)
    slow = campaign(study, {"batch_size=1": FIVE_OK}, trial_s=72000)
    decision = decide([slow], study, CATALOG)
    assert decision.chosen is None
    assert decision.deadline_note.startswith("no configuration fits the deadline: batch_size=1 on rtx-4090 ×2 lots "
                                             "would be acceptable at 220.00 USD, but it needs 100.17 h")


def test_campaign_without_rental_is_listed_with_an_empty_cost(make_study: Callable[..., Study]) -> None:
    study = make_study()
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK}, gpu=None)], study, CATALOG)
    config = decision.configurations[0]
    assert config.configuration_id == "batch_size=1 on host vm (no rental recorded)"
    assert config.cost.total_usd is None and config.cost.per_result_state == "unknown"
    assert config.cost.empty_reason.startswith("no --gpu given to `isocost run`")
    assert config.exclusions == ("contracted cost unknown: " + config.cost.empty_reason,)
    assert decision.chosen is None
    assert decision.why[0] == "no configuration is acceptable, so none is chosen:"


def test_unknown_gpu_in_a_campaign_carries_the_catalog_error(make_study: Callable[..., Study]) -> None:
    study = make_study()
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK}, gpu="h100", lots=1)], study, CATALOG)
    config = decision.configurations[0]
    assert "unknown GPU 'h100'" in config.cost.empty_reason
    assert "Known GPUs: b200, rtx-4090" in config.exclusions[0]


def test_more_expected_artifacts_than_corpora_is_uncertain(make_study: Callable[..., Study]) -> None:
    study = make_study(expected_artifacts=3)
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG)
    config = decision.configurations[0]
    assert (config.accepted_artifacts, config.expected_artifacts) == (1, 3)
    assert config.cost.cost_per_validated_corpus_usd == Decimal("220.00")
    assert any("the job needs 3 corpora" in line for line in decision.uncertain)
    assert decision.target_load.startswith("3 accepted corpora of 12 inputs")


def test_memory_counters_carry_their_capacity_or_say_it_was_not_recorded(make_study: Callable[..., Study]) -> None:
    study = make_study()
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG)
    (rss,) = decision.configurations[0].memory  # CPU: no GPU counter at all
    assert rss.name == "host peak RSS" and rss.peak_bytes == 500 * 2**20
    assert rss.capacity_bytes is None and "host RAM not recorded" in rss.capacity_reason
    with_capacity = campaign(study, {"batch_size=1": FIVE_OK},
                             capacity=TrialCapacity(None, "", 64 * 2**30, "manifest.json host.memory_total_bytes"))
    (rss,) = decide([with_capacity], study, CATALOG).configurations[0].memory
    assert rss.capacity_bytes == 64 * 2**30 and rss.capacity_reason == ""


def test_the_campaign_period_is_the_comparisons_and_said_so(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {"batch_size=1": FIVE_OK, "batch_size=4": FIVE_OK}, trial_s=60, setup_s=600)
    decision = decide([evidence], study, CATALOG)
    one = decision.configurations[0]
    assert one.campaign_needed_h == pytest.approx((600 + 10 * 60) / 3600)
    assert one.own_trials_s == 300  # its own five trials
    assert any("measured the whole comparison (10 passes of 2 variants)" in line for line in decision.uncertain)


# -- ledger ---------------------------------------------------------------------------------

LEDGER = ("date,description,amount_usd,evidence\n"
          "2026-09-30,object storage for bundles,12.50,invoice S-17\n"
          '2026-10-02,"engineer time, setup",250.00,timesheet week 40\n'
          "2026-10-03,refund of a duplicate charge,-12.50,credit note C-3\n")


def test_ledger_is_parsed_with_exact_totals() -> None:
    ledger = parse_ledger(LEDGER, "ledger.csv")
    assert [e.amount_usd for e in ledger.expenses] == [Decimal("12.50"), Decimal("250.00"), Decimal("-12.50")]
    assert ledger.total_usd == Decimal("250.00")
    assert ledger.expenses[1].description == "engineer time, setup"
    assert codec.from_dict(Ledger, codec.to_dict(ledger)) == ledger
    assert codec.from_dict(Expense, codec.to_dict(ledger.expenses[0])) == ledger.expenses[0]
    assert codec.to_dict(ledger)["total_usd"] == "250.00"


@pytest.mark.parametrize(("text", "message"), [
    ("", "expenses ledger is empty"),
    ("date,what,amount_usd,evidence\n", "header is 'date,what,amount_usd,evidence'"),
    ("date,description,amount_usd,evidence\n30/09/2026,x,1.00,inv\n", "date is not YYYY-MM-DD"),
    ("date,description,amount_usd,evidence\n2026-09-30,x,$1.00,inv\n", "amount_usd is not a decimal number"),
    ("date,description,amount_usd,evidence\n2026-09-30,x,1.00,\n", "evidence is empty"),
    ("date,description,amount_usd,evidence\n2026-09-30,,1.00,inv\n", "description is empty"),
    ("date,description,amount_usd,evidence\n2026-09-30,x,1.00\n", "line has 3 fields"),
])
def test_bad_ledgers_are_refused(text: str, message: str) -> None:
    with pytest.raises(UserError, match="ledger.csv") as info:
        parse_ledger(text, "ledger.csv")
    assert message in info.value.message


def test_ledger_is_never_mixed_into_a_configuration_cost(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {"batch_size=1": FIVE_OK})
    without = decide([evidence], study, CATALOG)
    with_ledger = decide([evidence], study, CATALOG, parse_ledger(LEDGER, "ledger.csv"))
    assert with_ledger.configurations == without.configurations
    assert with_ledger.ledger is not None and with_ledger.ledger.total_usd == Decimal("250.00")


# -- the record -----------------------------------------------------------------------------


def test_decision_to_dict_is_json_with_money_as_strings(make_study: Callable[..., Study]) -> None:
    study = make_study(deadline=MONDAY_TO_FRIDAY)
    evidence = campaign(study, {"batch_size=1": FIVE_OK, "batch_size=8": [("oom", None)] * 2})
    decision = decide([evidence], study, CATALOG, parse_ledger(LEDGER, "ledger.csv"))
    data = json.loads(json.dumps(codec.to_dict(decision)))
    assert data["schema_version"] == 2  # decision.json 2: the agreement matrix (CHANGELOG)
    assert data["chosen"] == "batch_size=1 on rtx-4090 ×2 lots"
    config = data["configurations"][0]
    assert config["cost"]["total_usd"] == "220.00"
    assert config["cost"]["cost_per_validated_corpus_usd"] == "220.00"
    assert config["cost"]["contracted"]["plan"]["price_usd_per_lot"] == "110.00"
    assert data["configurations"][1]["cost"]["cost_per_validated_corpus_usd"] is None
    assert data["deadline"]["elapsed_h"] == 96
    assert data["ledger"]["total_usd"] == "250.00"
    assert isinstance(decision, Decision)
    assert decision.configuration(decision.chosen or "").rank == 1



def test_decision_json_reads_back_with_its_deadline_and_ledger(make_study: Callable[..., Study],
                                                                 tmp_path: Path) -> None:
    study = make_study(deadline=MONDAY_TO_FRIDAY)
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG, parse_ledger(LEDGER, "l.csv"))
    codec.write_record(tmp_path / "decision.json", decision)
    read = codec.read_record(tmp_path / "decision.json", Decision)
    assert codec.to_dict(read) == codec.to_dict(decision)
    assert read.ledger == decision.ledger and read.configurations == decision.configurations
    assert read.deadline is not None and read.deadline.elapsed_h == 96


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["configurations"][0]["cost"].update(total_usd="1.00"),
     "key 'configurations[0].cost.total_usd' is '1.00', but the record's other keys give '220.00'"),
    (lambda d: d["configurations"][0]["cost"]["contracted"].update(total_usd=220),
     "key 'configurations[0].cost.contracted.total_usd' must be a decimal number as text"),
    (lambda d: d["configurations"][0]["cost"]["contracted"]["plan"].update(catalog_date="soon"),
     "key 'configurations[0].cost.contracted.plan.catalog_date' must be a date as text"),
    (lambda d: d["campaigns"][0]["period"].update(needed_h=0.1), "key 'campaigns[0].period.needed_h' is 0.1"),
    (lambda d: d["configurations"][0]["passes"][0].update(pass_s="fast"),
     "key 'configurations[0].passes[0].pass_s' must be a number or null, got 'fast'"),
    (lambda d: d["deadline"].update(offset_start="+x"), "key 'deadline.offset_start' must be a UTC offset"),
    (lambda d: d["deadline"].update(elapsed_h=1.0), "key 'deadline.elapsed_h' is 1.0"),
    (lambda d: d["ledger"].update(total_usd="0.00"), "key 'ledger.total_usd' is '0.00'"),
    (lambda d: d["ledger"]["expenses"][0].update(amount_usd=12.5), "key 'ledger.expenses[0].amount_usd' must be a"),
    (lambda d: d["ledger"]["expenses"][0].update(day="2026-09-30"), "unknown key 'ledger.expenses[0].day'"),
    (lambda d: d.update(schema_version=3), "decision.json has schema_version 3"),
])
def test_a_hostile_decision_json_is_refused_naming_the_key(make_study: Callable[..., Study], tmp_path: Path,
                                                          edit: Any, message: str) -> None:
    study = make_study(deadline=MONDAY_TO_FRIDAY)
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG, parse_ledger(LEDGER, "l.csv"))
    data = json.loads(json.dumps(codec.to_dict(decision)))
    edit(data)
    (tmp_path / "decision.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError, match="decision.json") as info:
        codec.read_record(tmp_path / "decision.json", Decision)
    assert message in info.value.message

def test_campaign_wide_warnings_reach_the_memo(make_study: Callable[..., Study]) -> None:
    study = make_study()
    evidence = campaign(study, {"batch_size=1": FIVE_OK})
    summary = dataclasses.replace(evidence.summary, warnings=(
        "this final corpus had already been evaluated by campaign x under another quality rule",
        *evidence.summary.warnings))
    decision = decide([dataclasses.replace(evidence, summary=summary, notes=("frozen copy edited",))], study, CATALOG)
    assert ("results/a: this final corpus had already been evaluated by campaign x under another quality rule"
            in decision.uncertain)
    assert "results/a: frozen copy edited" in decision.uncertain


def test_a_campaigns_own_rental_is_priced_without_a_per_corpus_figure(make_study: Callable[..., Study]) -> None:
    study = make_study()
    decision = decide([campaign(study, {"batch_size=1": FIVE_OK})], study, CATALOG)
    cost = decision.campaigns[0].cost
    assert cost.total_usd == Decimal("220.00")
    assert cost.per_result_state == "not_requested" and cost.cost_per_validated_corpus_usd is None
