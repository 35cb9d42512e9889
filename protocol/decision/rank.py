"""Campaigns of one study × dated plan catalog × deadline → the decision (pure; money is ``Decimal``).

The question: which configuration processes ALL documents, meets
the quality rule, finishes before the deadline and costs the least budget?

A **configuration** is one variant on one campaign's hardware: the same
variant on another GPU (another rental) is another configuration. Two
campaigns on the same GPU type are listed separately too: each is its own
rental with its own measured period.

For each configuration this module states, from measured evidence only:

- the quality verdict (equivalent to the study's reference variant, with the
  reason from :mod:`protocol.records.summary`), the raw pass durations and failures;
- the accepted artifacts, counted by
  :func:`protocol.decision.configuration.count_artifacts` (the rule is in
  :data:`protocol.decision.records.ARTIFACT_RULE`): repetitions of one
  benchmark are not production corpora;
- the campaign period (:mod:`protocol.costing.period`), the plan lengths that cover
  it, the contracted plan (the cheapest priced one that covers it; the whole
  plan price, never prorated), the cost per validated corpus (undefined with
  zero accepted corpora: the spend still stands);
- whether the period plus declared waiting fits the study's deadline window
  (measured on a real calendar by :mod:`protocol.costing.calendar`).

Acceptable configurations are ranked by contracted cost, then failures, then
remaining uncertainty (spread warnings, relative spread), then median pass
time (:mod:`protocol.decision.order`); the reasons are written by
:mod:`protocol.decision.explain`. A campaign without a recorded rental, or a
GPU the catalog does not price, leaves the cost empty with the reason;
nothing is guessed. Other project expenses (a ledger,
:mod:`protocol.decision.ledger`) are shown apart and never added to a
configuration's cost.

Example: ``decide([evidence], study, load_catalog(default_catalog_path()))``
returns a :class:`Decision` whose ``chosen`` names the configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from protocol.costing.calendar import Window, access_window
from protocol.costing.period import CampaignPeriod, measure_period
from protocol.costing.plans import Catalog
from protocol.costing.timeline import trial_intervals
from protocol.decision.agreement import AgreementMatrix, judge_across
from protocol.decision.configuration import DecisionTerms, build_configuration, configuration_labels, with_rank
from protocol.decision.evidence import CampaignEvidence, check_same_study
from protocol.decision.explain import deadline_note, uncertain_lines, why_chosen
from protocol.decision.job_rank import job_decision
from protocol.decision.order import break_cost_ties, rank_key
from protocol.decision.plan_fit import plan_cost
from protocol.decision.records import CampaignResult, Configuration, Decision, Ledger
from protocol.tasks import study_task, task_words


def decide(
    campaigns: Sequence[CampaignEvidence],
    study: Any,
    catalog: Catalog,
    ledger: Ledger | None = None,
    *,
    now: datetime | None = None,
    agreement: AgreementMatrix | None = None,
) -> Decision:
    """Combine campaigns of ONE study into the decision.

    ``study`` is the frozen :class:`protocol.study.load.Study` (its ``expected_artifacts``,
    ``deadline`` and ``quality.reference_variant`` are used).

    With a ``[job]`` table in the study, the decision also carries the job's projection, priced under
    every billing option and ranked (:func:`protocol.decision.job_rank.job_decision`); ``now`` (default: the
    clock) refuses a deadline already past.

    Example: ``decide([evidence], study, catalog).chosen == "threads=4 on rtx-4090 ×2 lots"``.
    """
    check_same_study(campaigns)
    window, waiting_h, deadline_reason = deadline_terms(study)
    terms = DecisionTerms(catalog, window, deadline_reason, study.expected_artifacts)
    results, configs = _configurations(campaigns, terms, waiting_h, catalog)
    if agreement is not None:
        configs = [judge_across(config, agreement, study.quality) for config in configs]
    configs, ranked = _ranked(configs)
    chosen = ranked[0] if ranked else None
    first = campaigns[0]
    return Decision(
        study_name=first.study_name,
        study_sha256=first.study_sha256,
        question=str(getattr(study, "question", "")),
        expected_artifacts=study.expected_artifacts,
        corpus_fingerprint=first.corpus_fingerprint,
        corpus_inputs=first.corpus_inputs,
        model_fingerprint=first.model_fingerprint,
        reference_variant=study.quality.reference_variant,
        catalog_path=catalog.path,
        catalog_dates=catalog.dates_text,
        deadline=window,
        deadline_reason=deadline_reason,
        campaigns=tuple(results),
        configurations=tuple(configs),
        ranking=tuple(c.configuration_id for c in ranked),
        chosen=chosen.configuration_id if chosen else None,
        target_load=_target_load(study.expected_artifacts, first, task_words(study_task(study))["done"]),
        why=tuple(why_chosen(chosen, ranked, configs)),
        deadline_note=deadline_note(chosen, configs, window),
        uncertain=tuple(uncertain_lines(chosen, configs, results, campaigns, study)),
        ledger=ledger,
        job=None if getattr(study, "job", None) is None else job_decision(
            study.job, configs, campaigns, catalog, window, waiting_h or 0.0, now),
        agreement=agreement,
    )


def _configurations(campaigns: Sequence[CampaignEvidence], terms: DecisionTerms, waiting_h: float | None,
                    catalog: Catalog) -> tuple[list[CampaignResult], list[Configuration]]:
    """Each campaign priced as its own rental, and each of its variants as a configuration."""
    labels = configuration_labels(campaigns)
    results: list[CampaignResult] = []
    configs: list[Configuration] = []
    for evidence in campaigns:
        period = measure_period(evidence.events, evidence.rows, waiting_h)
        results.append(_campaign_result(evidence, period, catalog))
        spans = trial_intervals(evidence.events, evidence.rows)
        configs += [build_configuration(evidence, variant, labels[(evidence.campaign_id, variant.variant_id)],
                                        period, spans, terms) for variant in evidence.summary.variants]
    return results, configs


def deadline_terms(study: Any) -> tuple[Window | None, float | None, str]:
    """The study's deadline window and declared waiting hours, or why there is no deadline check."""
    deadline = getattr(study, "deadline", None)
    if deadline is None:
        return None, None, "the study declares no deadline table: no deadline check, no waiting period"
    return access_window(deadline.start, deadline.end, deadline.tz), float(deadline.waiting_h), ""


def _campaign_result(evidence: CampaignEvidence, period: CampaignPeriod, catalog: Catalog) -> CampaignResult:
    """One campaign's hardware, rental and measured period, priced as its own rental (no per-corpus figure)."""
    campaign_cost = plan_cost(catalog, evidence.rental_gpu, evidence.rental_lots, period.needed_h, None,
                              no_gpu_reason=evidence.rental_empty_reason,
                              no_period_reason="; ".join(period.empty_reasons.values()))
    return CampaignResult(
        label=evidence.label, campaign_id=evidence.campaign_id, hardware=evidence.hardware,
        rental_gpu=evidence.rental_gpu, rental_lots=evidence.rental_lots,
        rental_empty_reason=evidence.rental_empty_reason, host=evidence.host, launcher=evidence.launcher,
        attempts=len(evidence.rows), period=period, cost=campaign_cost, notes=evidence.notes,
    )


def _ranked(configs: list[Configuration]) -> tuple[list[Configuration], list[Configuration]]:
    """Every configuration with its rank (``None`` when not acceptable), and the acceptable ones in rank order."""
    acceptable = break_cost_ties(sorted((c for c in configs if c.acceptable), key=rank_key))
    ranks = {c.configuration_id: i + 1 for i, c in enumerate(acceptable)}
    configs = [with_rank(c, ranks.get(c.configuration_id)) for c in configs]
    ranked = [c for c in sorted(configs, key=lambda c: ranks.get(c.configuration_id, 10**9)) if c.acceptable]
    return configs, ranked


def _target_load(needed: int, first: CampaignEvidence, done: str = "classified") -> str:
    """Example: ``"1 accepted corpus of 200 inputs (corpus sha256:…): every id classified once, quality rule met"``
    (``done``: the task's word, "embedded" for sentence embeddings)."""
    return (f"{needed} accepted {'corpus' if needed == 1 else 'corpora'} of {first.corpus_inputs} inputs "
            f"(corpus {first.corpus_fingerprint}): every id {done} once, quality rule met")
