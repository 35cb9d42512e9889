"""The parts of the decision on their own: labels, pass records, exclusions, ranks, reasons, shared helpers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from test_decide import CATALOG, FIVE_OK, campaign

from protocol.costing.period import measure_period
from protocol.costing.timeline import trial_intervals
from protocol.decision.configuration import (
    DecisionTerms,
    build_configuration,
    configuration_labels,
    pass_records,
    with_rank,
)
from protocol.decision.evidence import names_variant
from protocol.decision.explain import deadline_note, uncertain_lines, why_chosen
from protocol.study.load import load_study
from protocol.study.model import Study


@pytest.fixture
def study(tmp_path: Path, study_text: Callable[..., str]) -> Study:
    path = tmp_path / "study.toml"
    path.write_text(study_text(), encoding="utf-8")
    return load_study(path)


TERMS = DecisionTerms(CATALOG, window=None, deadline_reason="", expected_artifacts=1)


def test_names_variant_matches_own_and_pair_warnings_only() -> None:
    assert names_variant("threads=4: spread 12%", "threads=4")
    assert names_variant("threads=4 vs threads=1: overlap", "threads=4")
    assert names_variant("threads=4 vs threads=1: overlap", "threads=1")
    assert not names_variant("threads=40: spread", "threads=4")
    assert not names_variant("campaign: clock changed", "threads=4")


def test_labels_name_the_host_when_one_variant_runs_twice_on_one_gpu_type(study: Study) -> None:
    a = campaign(study, {"batch_size=1": FIVE_OK}, label="results/a", campaign_id="a-1")
    b = dataclasses.replace(campaign(study, {"batch_size=1": FIVE_OK}, label="results/b", campaign_id="b-1"),
                            host="vm2")
    labels = configuration_labels([a, b])
    assert labels[("a-1", "batch_size=1")] == "batch_size=1 on rtx-4090 ×2 lots [host vm]"
    assert labels[("b-1", "batch_size=1")] == "batch_size=1 on rtx-4090 ×2 lots [host vm2]"
    assert configuration_labels([a]) == {("a-1", "batch_size=1"): "batch_size=1 on rtx-4090 ×2 lots"}


def test_pass_records_keep_failures_in_run_order(study: Study) -> None:
    evidence = campaign(study, {"batch_size=1": [("ok", 10.0), ("oom", None), ("ok", 12.0)]})
    passes = pass_records(evidence, "batch_size=1")
    assert [(p.repetition, p.status, p.pass_s, p.accepted) for p in passes] == [
        (1, "ok", 10.0, True), (2, "oom", None, False), (3, "ok", 12.0, True)]
    assert pass_records(evidence, "batch_size=8") == ()


def test_build_configuration_excludes_with_every_reason(study: Study) -> None:
    evidence = campaign(study, {"batch_size=1": [("oom", None)]}, gpu=None)
    period = measure_period(evidence.events, evidence.rows, None)
    spans = trial_intervals(evidence.events, evidence.rows)
    variant = evidence.summary.variants[0]
    config = build_configuration(evidence, variant, "v on x", period, spans, TERMS)
    assert not config.acceptable and config.failures == 1 and config.accepted_artifacts == 0
    assert config.statuses == {"oom": 1} and config.median_pass_s is None
    assert [e.split(":")[0] for e in config.exclusions] == ["quality", "no accepted corpus", "contracted cost unknown"]
    assert with_rank(config, 3).rank == 3 and with_rank(config, 3).configuration_id == "v on x"


def test_reasons_for_one_acceptable_configuration(study: Study) -> None:
    evidence = campaign(study, {"batch_size=1": FIVE_OK})
    period = measure_period(evidence.events, evidence.rows, None)
    config = with_rank(build_configuration(evidence, evidence.summary.variants[0], "one", period,
                                           trial_intervals(evidence.events, evidence.rows), TERMS), 1)
    assert config.acceptable and config.cost.total_usd == Decimal("220.00")
    why = why_chosen(config, [config], [config])
    assert why[0].startswith("quality: equivalent to the reference")
    assert why[-1] == "it is the only acceptable configuration"
    assert why_chosen(None, [], []) == ["no configuration: the campaigns hold no variant"]
    assert deadline_note(config, [config], None) == ""
    lines = uncertain_lines(config, [config], [], [evidence], study)
    assert not any("could not be ranked" in line or "accepted pass(es)" in line for line in lines)
    two = dataclasses.replace(config, accepted_passes=2)
    assert f"{'one'}: only 2 accepted pass(es); a median of fewer than 3 passes says little" in uncertain_lines(
        two, [two], [], [evidence], study)
