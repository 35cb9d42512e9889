"""The declared job over the decision's configurations: project, price, rank, compare (pure).

Called by :func:`protocol.decision.rank.decide` when the study has a ``[job]`` table.
Each configuration's accepted passes, with their per-batch records, are
projected (:mod:`protocol.costing.projection`), priced under every billing option of
its GPU (:mod:`protocol.costing.job_cost`), and ranked by expected cost among those
whose probability of fitting the deadline meets the job's level.

Example: ``job_decision(study.job, configs, campaigns, catalog, window, 0.0, now).chosen``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from protocol.costing.batch_fit import PassEvidence
from protocol.costing.calendar import Window
from protocol.costing.job import Job
from protocol.costing.job_cost import (
    TOP_COMPARED,
    BillingOption,
    JobConfiguration,
    JobDecision,
    compare,
    p_fits_deadline,
    pareto_front,
    price_options,
    rank_job,
)
from protocol.costing.plans import CENT, ROUNDING, Catalog
from protocol.costing.projection import ASSUMPTIONS, project, refusal
from protocol.costing.trial_files import energy_figures
from protocol.decision.nothing_fits import nothing_fits
from protocol.errors import UserError

if TYPE_CHECKING:
    from protocol.decision.evidence import CampaignEvidence
    from protocol.decision.records import Configuration

METHOD = (
    "fit: least squares of each batch's time on a per-batch constant and its tokens per length bucket (batches.jsonl "
    "of every accepted measured pass); without the constant, or one pooled rate, when that is singular or negative; "
    "its residual is reported beside the mean batch time",
    "check: the time a pass spends outside its batches is carried by the factor Σ pass_s / Σ batch_s, and each "
    "measured pass is predicted from its own batches with it (the relative errors are listed)",
    "job: seconds per input = factor × (seconds per batch ÷ measured inputs per batch + Σ share × tokens per input × "
    "seconds per token, per length bucket); × inputs × corpora, spread over lots × cards per lot workers, plus the "
    "measured set-up (imports, load, warm-up; median over the passes) once per worker",
    "uncertainty: a bootstrap over the accepted passes (drawn with replacement, refitted, re-projected); interval = "
    "2.5th–97.5th percentile; every billing option is charged for every resample",
)


def check_deadline_ahead(source: str, window: Window | None, now: datetime | None = None) -> None:
    """Refuse a job whose deadline window has already ended (``decide`` with ``[job]``; ``check`` before the run)."""
    now = now or datetime.now(UTC)
    if window is not None and window.end <= now:
        raise UserError(
            f"the deadline is already past: the window ended {window.end.isoformat()} (now {now.isoformat()})",
            f"{source}, key deadline.end",
            "A job is planned before its deadline: move the [deadline] window forward, or drop [job] to price "
            "the campaign as it ran.",
        )


def job_decision(
    job: Job,
    configs: Sequence[Configuration],
    campaigns: Sequence[CampaignEvidence],
    catalog: Catalog,
    window: Window | None,
    waiting_h: float,
    now: datetime | None = None,
) -> JobDecision:
    """Project and price the job for every configuration; rank, compare, mark the Pareto front."""
    check_deadline_ahead(job.source, window, now)
    evidence = {e.campaign_id: e for e in campaigns}
    level = job.fit_level
    results = [_one(job, c, evidence[c.campaign_id], catalog, window, waiting_h) for c in configs]
    short = nothing_fits(job, results)  # not an error: the memo says nothing fits, why, and what would cover it
    front = pareto_front(results)
    results = [replace(r, pareto=r.configuration_id in front) for r in results]
    ranked, why = rank_job(results, level)
    ranks = {c.configuration_id: i + 1 for i, c in enumerate(ranked)}
    results = [replace(r, rank=ranks.get(r.configuration_id)) for r in results]
    ranked = [next(r for r in results if r.configuration_id == c.configuration_id) for c in ranked]
    comparisons = tuple(compare(ranked[0], other, level) for other in ranked[1:TOP_COMPARED])
    return JobDecision(
        job=job, level=level, configurations=tuple(results),
        ranking=tuple(c.configuration_id for c in ranked),
        chosen=ranked[0].configuration_id if ranked else None, comparisons=comparisons, why=tuple(why),
        method=METHOD, assumptions=ASSUMPTIONS, nothing_fits=short,
    )


def _one(job: Job, config: Configuration, evidence: CampaignEvidence, catalog: Catalog, window: Window | None,
         waiting_h: float) -> JobConfiguration:
    """One configuration against the job: refused with the reason, or projected, priced and checked."""
    gpu, lots = evidence.rental_gpu, evidence.rental_lots or 1
    accepted = [p for p in config.passes if p.accepted]
    records = [evidence.trials[p.trial_id] for p in accepted if p.trial_id in evidence.trials]
    energy = energy_figures(records, evidence.corpus_inputs, job.inputs * job.corpora)
    options = catalog.options_for(gpu) if gpu else ()
    cards = job.cards_per_lot or (options[0].cards_per_lot if options else 1)
    base = JobConfiguration(
        configuration_id=config.configuration_id, gpu=gpu, lots=lots if gpu else None,
        workers=lots * cards if gpu else None, metric=config.metric, median_metric=config.median_metric,
        projection=None, refused="", options=(), chosen_option=None, choice_reason="", expected_usd=None,
        per_corpus_usd=None, p_fits_plan=None, p_fits_deadline=None, deadline_reason="", energy=energy,
        exclusions=(),
    )
    refused = _refusal(config, evidence)
    if refused:
        return replace(base, refused=refused, exclusions=("not projected: " + refused,))
    assert gpu is not None
    passes = [PassEvidence(p.trial_id, p.pass_s, evidence.trials[p.trial_id].setup_s,
                           evidence.trials[p.trial_id].batches or ())
              for p in accepted if p.pass_s is not None]
    try:
        projection = project(passes, job_inputs=job.inputs, corpora=job.corpora, workers=lots * cards, mix=job.mix,
                             seed=f"{job.bootstrap_seed}:{config.configuration_id}",
                             resamples=job.bootstrap_resamples)
    except ValueError as exc:
        return replace(base, refused=str(exc), exclusions=("not projected: " + str(exc),))
    priced, best, reason = price_options(catalog, gpu, lots, projection, job.fit_level)
    p_deadline = p_fits_deadline(projection.samples_h, window.elapsed_h if window else None, waiting_h)
    deadline_reason = ("no deadline declared" if window is None else
                       f"job hours + {waiting_h:g} h waiting against the window's {window.elapsed_h:.1f} h")
    exclusions = _price_exclusions(job, gpu, catalog, priced, best)
    if p_deadline is not None and p_deadline < job.fit_level:
        exclusions.append(f"P(fits deadline) {p_deadline:.1%} < {job.fit_level:g} ({deadline_reason})")
    keeps_up = None if job.days is None else p_fits_deadline(projection.samples_h, job.days * 24.0, 0.0)
    if keeps_up is not None and keeps_up < job.fit_level:
        exclusions.append(f"does not keep up with {job.inputs_per_day:,} inputs a day: P(job hours <= "
                          f"{job.days} days × 24 h) {keeps_up:.1%} < {job.fit_level:g}")
    expected = best.expected_usd if best else None
    return replace(
        base, projection=projection, options=priced, chosen_option=best.label if best else None,
        choice_reason=reason, expected_usd=expected,
        per_corpus_usd=None if expected is None else (expected / job.corpora).quantize(CENT, rounding=ROUNDING),
        p_fits_plan=best.p_covers if best else None, p_fits_deadline=p_deadline, deadline_reason=deadline_reason,
        exclusions=tuple(exclusions), p_keeps_up=keeps_up,
        per_million_tokens_usd=best.per_million_tokens_usd if best else None,
    )


def _refusal(config: Configuration, evidence: CampaignEvidence) -> str:
    """Why the configuration is not projected (``""`` when it is): the measured record, batches, rental."""
    refused = refusal(config.accepted_passes, config.failures, config.statuses, config.equivalent)
    accepted = [p for p in config.passes if p.accepted]
    missing = [evidence.trials[p.trial_id].batches_reason if p.trial_id in evidence.trials
               else f"trial {p.trial_id}: no per-trial record read" for p in accepted
               if p.trial_id not in evidence.trials or evidence.trials[p.trial_id].batches is None]
    if not refused and missing:
        refused = "no per-batch record: " + "; ".join(missing)
    if not refused and evidence.rental_gpu is None:
        refused = "no rental recorded: " + (evidence.rental_empty_reason or "the GPU is unknown")
    return refused


def _price_exclusions(
    job: Job, gpu: str, catalog: Catalog, priced: Sequence[BillingOption], best: BillingOption | None,
) -> list[str]:
    """No price for the GPU at all, or no billing option that covers the job at the declared level."""
    if not priced:
        return [f"no price for ({gpu}, any billing, any length) in the catalog dated {catalog.dates_text}: "
                "nothing is guessed"]
    if best is None:
        return ["no billing option covers the job with P >= "
                f"{job.fit_level:g}: " + "; ".join(f"{o.label}: {o.reason}" for o in priced)]
    return []
