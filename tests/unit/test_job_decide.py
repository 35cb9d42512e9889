"""The declared job through ``decide``: hand-made per-batch records, a MADE-UP catalog, hand-computed answers.

Every pass holds 12 one-input batches: 6 short inputs of 10 tokens at 0.1 s/token and 6 long inputs of
20 tokens at 0.2 s/token (× ``speed``), so 2.5 s per input (× speed) and a whole pass of 30 s (× speed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from test_decide import campaign

from protocol.costing.batch_fit import Batch, PassEvidence
from protocol.costing.catalog_file import load_catalog
from protocol.costing.job_cost import compare, price_options
from protocol.costing.plans import default_catalog_path
from protocol.costing.projection import project
from protocol.costing.trial_files import TrialRecord
from protocol.decision.evidence import CampaignEvidence
from protocol.decision.rank import decide
from protocol.errors import UserError
from protocol.records import codec
from protocol.study.load import load_study
from protocol.study.model import Study

MADE_UP = "MADE-UP test catalog (not a real offer)"
CATALOG_TEXT = (
    "gpu,cards_per_lot,billing,plan_days,price_usd_per_lot,minimum_s,increment_s,currency,catalog_date,source\n"
    f"rtx-4090,1,flat,7,110.00,,,USD,2026-09-24,{MADE_UP}\n"
    f"rtx-4090,1,hourly,,0.70,3600,3600,USD,2026-09-24,{MADE_UP}\n"
    f"rtx-4090,1,monthly,30,400.00,,,USD,2026-09-24,{MADE_UP}\n"
)
LONG_DEADLINE = '\n[deadline]\nstart = "2026-12-01T09:00"\nend = "2027-01-31T09:00"\ntz = "UTC"\n'
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def batches(speed: float) -> tuple[Batch, ...]:
    short = [Batch(i, 1, 10, {"short": 1}, {"short": 10}, 1.0 * speed) for i in range(6)]
    long = [Batch(6 + i, 1, 20, {"long": 1}, {"long": 20}, 4.0 * speed) for i in range(6)]
    return tuple(short + long)


def with_trials(evidence: CampaignEvidence, speeds: dict[str, float | None]) -> CampaignEvidence:
    trials = {}
    for row in evidence.rows:
        speed = speeds[row.variant_id]
        trials[row.trial_id] = TrialRecord(
            batches=None if speed is None else batches(speed), batches_reason="no batches.jsonl (test)",
            setup_s=0.0, gpu_energy_j=None, cpu_energy_j=120.0 * (speed or 1),
            gpu_energy_reason="CPU trial: no GPU energy counter",
        )
    return dataclasses.replace(evidence, trials=trials)


@pytest.fixture
def job_study(tmp_path: Path, study_text: Callable[..., str]) -> Callable[..., Study]:
    def make(job: str = "inputs = 1000000\nbootstrap_resamples = 200\n", deadline: str = LONG_DEADLINE) -> Study:
        path = tmp_path / "study.toml"
        path.write_text(study_text() + deadline + "\n[job]\n" + job, encoding="utf-8")
        return load_study(path)

    return make


@pytest.fixture
def made_up_catalog(tmp_path: Path) -> Any:
    path = tmp_path / "made-up-catalog.csv"
    path.write_text(CATALOG_TEXT, encoding="utf-8")
    return load_catalog(path)


def two_variants(study: Study, **kw: Any) -> CampaignEvidence:
    evidence = campaign(study, {"batch_size=1": [("ok", 30.0)] * 5, "batch_size=4": [("ok", 15.0)] * 5},
                        lots=1, **kw)
    return with_trials(evidence, {"batch_size=1": 1.0, "batch_size=4": 0.5})


def test_job_is_projected_priced_under_every_billing_and_ranked(job_study, made_up_catalog) -> None:
    study = job_study()
    decision = decide([two_variants(study)], study, made_up_catalog, now=NOW)
    job = decision.job
    assert job is not None
    slow = next(c for c in job.configurations if c.configuration_id.startswith("batch_size=1 "))
    fast = next(c for c in job.configurations if c.configuration_id.startswith("batch_size=4 "))
    assert slow.projection is not None and fast.projection is not None
    # 1,000,000 × 2.5 s = 694.44 h; × 0.5 = 347.22 h (one worker, no set-up).
    assert slow.projection.job_h == pytest.approx(2_500_000 / 3600)
    assert fast.projection.job_h == pytest.approx(1_250_000 / 3600)
    # slow: flat 7-day too short; hourly 695 h × 0.70 = 486.50; monthly 1 × 400.00 → monthly.
    options = {o.label: o for o in slow.options}
    assert options["flat 7-day"].p_covers == 0.0 and not options["flat 7-day"].fits
    assert options["hourly"].expected_usd == Decimal("486.50")
    assert options["monthly (30-day months)"].expected_usd == Decimal("400.00")
    assert slow.chosen_option == "monthly (30-day months)" and slow.per_corpus_usd == Decimal("400.00")
    # fast: hourly 348 h × 0.70 = 243.60 beats monthly 400.00.
    assert fast.chosen_option == "hourly" and fast.expected_usd == Decimal("243.60")
    assert job.ranking == (fast.configuration_id, slow.configuration_id)
    assert job.chosen == fast.configuration_id
    assert (slow.p_fits_deadline, fast.p_fits_deadline) == (1.0, 1.0)  # 1464 h window
    assert job.comparisons[0].verdict == "decisive" and job.comparisons[0].p_a_cheaper == 1.0
    assert fast.pareto and not slow.pareto  # fast is cheaper AND shorter at equal quality
    # energy: median 60 J (fast) over 12 inputs = 5 J per input; × 1,000,000 per validated corpus
    assert fast.energy["cpu_j_per_input"] == pytest.approx(5.0)
    assert fast.energy["cpu_j_per_validated_corpus"] == pytest.approx(5_000_000.0)
    assert fast.energy["gpu_j_per_input"] is None and fast.energy["gpu_reason"] == "CPU trial: no GPU energy counter"
    data = codec.to_dict(decision)["job"]
    assert data["pareto"] == [fast.configuration_id]
    assert data["configurations"][0]["projection"]["bootstrap"]["seed"].startswith("0:batch_size=")


def test_deadline_level_excludes_with_the_reason(job_study, made_up_catalog) -> None:
    window = '\n[deadline]\nstart = "2026-12-01T09:00"\nend = "2026-12-20T09:00"\ntz = "UTC"\n'  # 456 h
    study = job_study(deadline=window)
    job = decide([two_variants(study)], study, made_up_catalog, now=NOW).job
    assert job is not None
    slow = next(c for c in job.configurations if c.configuration_id.startswith("batch_size=1 "))
    assert slow.rank is None and slow.p_fits_deadline == 0.0
    assert "P(fits deadline) 0.0% < 0.95" in slow.exclusions[0]
    assert len(job.ranking) == 1


def test_job_larger_than_any_plan_is_decided_as_nothing_fits_with_why_and_what_would_cover_it(job_study) -> None:
    """Not an error: the decision says nothing fits, why (the shortfall against the nearest plan), and what would
    cover it (more lots, another billing, a longer period), so decide writes the memo saying so."""
    study = job_study()
    job = decide([two_variants(study)], study, load_catalog(default_catalog_path()), now=NOW).job
    assert job is not None and job.chosen is None
    nothing = job.nothing_fits
    assert nothing is not None
    # fastest: 347.22 h against the 168 h seed plan → short by 179.2 h
    assert nothing.configuration_id.startswith("batch_size=4 ")
    assert (round(nothing.needs_h, 1), nothing.plan_hours, round(nothing.short_h, 1)) == (347.2, 168, 179.2)
    assert nothing.plan == "rtx-4090 flat 7-day" and nothing.lots == 1
    assert nothing.lots_needed == 3  # ceil(1 × 347.2 / 168)
    remedies = " ".join(nothing.remedies)
    assert "--lots 3" in remedies  # more lots
    assert "hourly" in remedies and "--catalog" in remedies  # another billing
    assert "at least 348 h (15 days)" in remedies  # a longer period
    assert "key job.inputs" in nothing.where
    assert codec.to_dict(job)["nothing_fits"]["lots_needed"] == 3


def test_a_job_that_fits_has_no_nothing_fits(job_study, made_up_catalog) -> None:
    study = job_study()
    job = decide([two_variants(study)], study, made_up_catalog, now=NOW).job
    assert job is not None and job.nothing_fits is None and "nothing_fits" not in codec.to_dict(job)


def test_deadline_already_past_is_refused(job_study, made_up_catalog) -> None:
    study = job_study()
    with pytest.raises(UserError, match="the deadline is already past.*key deadline.end"):
        decide([two_variants(study)], study, made_up_catalog, now=datetime(2027, 2, 1, tzinfo=UTC))


def test_refusals_zero_accepted_failed_variant_and_missing_batches(job_study, made_up_catalog) -> None:
    study = job_study()
    evidence = campaign(study, {"batch_size=1": [("ok", 30.0)] * 3, "batch_size=4": [("ok", 15.0), ("oom", None)],
                                "batch_size=8": [("ok", 15.0)] * 2}, lots=1)
    evidence = with_trials(evidence, {"batch_size=1": 1.0, "batch_size=4": 0.5, "batch_size=8": None})
    job = decide([evidence], study, made_up_catalog, now=NOW).job
    assert job is not None
    by = {c.configuration_id.split(" ")[0]: c for c in job.configurations}
    assert "failed 1 of its attempts (1 oom)" in by["batch_size=4"].refused
    assert by["batch_size=8"].refused.startswith("no per-batch record")
    assert by["batch_size=1"].rank == 1


def test_without_a_job_table_the_decision_has_no_job(tmp_path, study_text) -> None:
    path = tmp_path / "study.toml"
    path.write_text(study_text(), encoding="utf-8")
    study = load_study(path)
    decision = decide([two_variants(study)], study, load_catalog(default_catalog_path()))
    assert decision.job is None and codec.to_dict(decision)["job"] is None


def test_not_yet_decisive_estimates_the_extra_passes(made_up_catalog) -> None:
    def passes(speeds: list[float]) -> list[PassEvidence]:
        return [PassEvidence(f"t{i}", 30.0 * s, 0.0, batches(s)) for i, s in enumerate(speeds)]

    a = project(passes([1.0, 1.3, 0.8]), job_inputs=100_000, corpora=1, workers=1, mix=None, seed="1:a",
                resamples=400)
    b = project(passes([1.05, 1.2, 0.9]), job_inputs=100_000, corpora=1, workers=1, mix=None, seed="1:b",
                resamples=400)
    from protocol.costing.job_cost import JobConfiguration

    def config(name: str, projection: Any) -> JobConfiguration:
        options, best, reason = price_options(made_up_catalog, "rtx-4090", 1, projection, 0.95)
        assert best is not None and best.label == "hourly"
        return JobConfiguration(name, "rtx-4090", 1, 1, "accuracy", 0.9, projection, "", options, best.label, reason,
                                best.expected_usd, best.expected_usd, 1.0, None, "", {}, ())

    result = compare(config("a", a), config("b", b), 0.95)
    assert result.verdict == "not yet decisive"
    assert 0.0 < result.p_a_cheaper < 0.95
    assert result.p_a_cheaper + result.p_tie + result.p_b_cheaper == pytest.approx(1.0)
    assert result.extra_passes is not None and result.extra_passes >= 1
    assert f"about {result.extra_passes} more accepted pass(es)" in result.note


def test_memo_report_and_csv_show_the_job(job_study, made_up_catalog) -> None:
    import csv
    import io

    from runner.decision.offline.memo import render_memo
    from runner.decision.offline.report import render_report
    from runner.decision.render.csv_table import render_csv

    study = job_study()
    data = decide([two_variants(study)], study, made_up_catalog, now=NOW)
    memo = render_memo(data)
    assert "## The declared job" in memo
    assert "**Cheapest for the job: batch_size=4 on rtx-4090 ×1 lot**: projected 347.22 h " \
           "(interval 347.22–347.22 h), hourly billing, expected 243.60 USD; cost per validated corpus " \
           "243.60 USD; P(fits plan) 100.0%; P(fits deadline) 100.0%." in memo
    assert "| monthly (30-day months) **picked** | 100.0% | 400.00 |" in memo
    assert "**decisive**" in memo
    assert "CPU: 5 J per input, 5e+06 J (1.389 kWh) per validated corpus (1,000,000 inputs)" in memo  # 5e6 J / 3.6e6
    assert "GPU: empty (CPU trial: no GPU energy counter)" in memo
    html = render_report(data)
    assert html.count('<circle class="pareto front"') == 1 and html.count('<circle class="pareto dominated"') == 1
    assert html.count('<svg class="plot pareto"') == 1 and html.count('<line class="interval"') == 2
    assert "non-dominated (Pareto front)" in html and "Cheapest for the job" in html
    rows = list(csv.DictReader(io.StringIO(render_csv(data))))
    assert [(r["job_rank"], r["job_billing"], r["job_per_validated_corpus_usd"], r["pareto"]) for r in rows] == [
        ("2", "monthly (30-day months)", "400.00", "False"), ("1", "hourly", "243.60", "True")]


def test_a_daily_job_must_keep_up(job_study, made_up_catalog) -> None:
    # 24,000 a day × 10 days = 240,000 inputs × 2.5 s = 166.7 h on one worker: within 240 h, both keep up.
    # 120,000 a day × 10 days: 833.3 h (slow) and 416.7 h (fast), both over 240 h: neither keeps up.
    study = job_study(job="inputs_per_day = 24000\ndays = 10\nbootstrap_resamples = 100\n")
    job = decide([two_variants(study)], study, made_up_catalog, now=NOW).job
    assert job is not None and all(c.p_keeps_up == 1.0 for c in job.configurations)
    study = job_study(job="inputs_per_day = 120000\ndays = 10\nbootstrap_resamples = 100\n")
    job = decide([two_variants(study)], study, made_up_catalog, now=NOW).job
    assert job is not None and job.chosen is None
    assert all("does not keep up with 120,000 inputs a day: P(job hours <= 10 days × 24 h) 0.0% < 0.95"
               in c.exclusions[-1] for c in job.configurations)
