"""The decision's reasons, in words: why the chosen configuration, the deadline's effect, what stays uncertain.

Pure text from the records :func:`protocol.decision.rank.decide` has built:
:func:`why_chosen` (quality, artifacts, plan, deadline, and what set the chosen
configuration ahead of the next), :func:`deadline_note` (a faster option that
wins only because a cheaper one misses the deadline) and
:func:`uncertain_lines` (spread warnings, few passes, a period that measured a
whole comparison, a reference variant whose metric differs between campaigns).

Example: ``why_chosen(None, [], [])`` is ``["no configuration: the campaigns hold no variant"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protocol.costing.calendar import Window, format_hours
from protocol.costing.plans import format_usd
from protocol.decision.evidence import CampaignEvidence, names_variant
from protocol.decision.order import break_cost_ties, rank_key
from protocol.decision.records import CampaignResult, Configuration


def why_chosen(chosen: Configuration | None, ranked: list[Configuration], configs: list[Configuration]) -> list[str]:
    """Why ``chosen`` (the first of ``ranked``) won, or why no configuration is acceptable."""
    if chosen is None:
        if not configs:
            return ["no configuration: the campaigns hold no variant"]
        excluded = [f"{config.configuration_id}: {'; '.join(config.exclusions)}" for config in configs]
        return ["no configuration is acceptable, so none is chosen:", *excluded, *_unpriced_ranking(configs)]
    cost = chosen.cost
    assert cost.contracted is not None and cost.total_usd is not None
    plan = cost.contracted.plan
    lines = [
        f"quality: equivalent to the reference ({chosen.quality_reason})",
        f"artifacts: {chosen.artifact_note}; {chosen.accepted_passes} of {chosen.attempts} passes accepted",
        f"contracted plan: {plan.gpu} {plan.plan_days}-day plan, {cost.contracted.lots} lot(s) × "
        f"{format_usd(plan.price_usd_per_lot)} USD = {format_usd(cost.total_usd)} USD (whole plan price, catalog "
        f"{plan.catalog_date})",
        f"deadline: {chosen.deadline_note}",
    ]
    if len(ranked) == 1:
        lines.append("it is the only acceptable configuration")
        return lines
    runner_up = ranked[1]
    assert runner_up.cost.total_usd is not None
    if rank_key(chosen)[0] != rank_key(runner_up)[0]:
        lines.append(f"cheapest acceptable: {format_usd(cost.total_usd)} USD against "
                     f"{format_usd(runner_up.cost.total_usd)} USD for the next, {runner_up.configuration_id}")
    else:
        ties = [c.configuration_id for c in ranked[1:] if c.cost.total_usd == cost.total_usd]
        lines.append(f"ties on contracted cost ({format_usd(cost.total_usd)} USD) with {len(ties)} other "
                     f"configuration(s); ranked first by " + _tie_breaker(chosen, runner_up))
    return lines


def _tie_breaker(chosen: Configuration, runner_up: Configuration) -> str:
    """What set ``chosen`` ahead of ``runner_up`` at the same contracted cost (the first criterion that differs)."""
    a, b = rank_key(chosen), rank_key(runner_up)
    other = runner_up.configuration_id
    if a > b:  # moved ahead by break_cost_ties
        return (f"a faster median pass ({_sec(chosen.median_pass_s)} against {_sec(runner_up.median_pass_s)} for "
                f"{other}): every accepted pass took {_sec(chosen.min_pass_s)}–{_sec(chosen.max_pass_s)} against "
                f"{_sec(runner_up.min_pass_s)}–{_sec(runner_up.max_pass_s)}, so the difference is real; the plan "
                "price is the same, and a shorter job is what you pay for next")
    if a[1] != b[1]:
        return f"fewer failed attempts ({chosen.failures} against {runner_up.failures} for {other})"
    if a[2] != b[2]:
        return f"fewer spread warnings ({len(chosen.uncertainty)} against {len(runner_up.uncertainty)} for {other})"
    if a[3] != b[3]:
        return (f"a smaller relative spread of pass times ({_pct(chosen.relative_spread)} against "
                f"{_pct(runner_up.relative_spread)} for {other})")
    if a[4] != b[4]:
        return (f"a shorter median pass ({_sec(chosen.median_pass_s)} against {_sec(runner_up.median_pass_s)} for "
                f"{other}); the pass time does not change the contracted cost")
    return "name only: every ranking criterion ties"


def _unpriced_ranking(configs: list[Configuration]) -> list[str]:
    """When only the cost is missing (no rental recorded): rank by measured quality and time, and say what
    is missing for a cost."""
    unpriced = [c for c in configs if c.exclusions
                and all(e.startswith("contracted cost unknown:") for e in c.exclusions)]
    if not unpriced:
        return []
    order = break_cost_ties(sorted(unpriced, key=rank_key))  # the priced ranking, every cost unknown alike
    lines = ["missing for a cost: the rental these campaigns ran under; record it with "
             "`isocost rental DIR --gpu GPU --lots N` (then run decide again)",
             "by measured time and quality alone (no cost), the order would be:"]
    lines += [f"{i}. {c.configuration_id}: median pass {_sec(c.median_pass_s)}, {c.failures} failure(s), "
              f"quality {c.quality_reason}" for i, c in enumerate(order, start=1)]
    return lines


def deadline_note(chosen: Configuration | None, configs: list[Configuration], window: Window | None) -> str:
    """Say when a faster option wins only because a cheaper one misses the deadline (``""`` otherwise)."""
    blocked = [c for c in configs
               if not c.acceptable and c.cost.total_usd is not None
               and all(e.startswith("deadline:") for e in c.exclusions)]
    if not blocked:
        return ""
    cheapest = min(blocked, key=rank_key)
    assert cheapest.cost.total_usd is not None and window is not None and cheapest.campaign_needed_h is not None
    needs = (f"needs {format_hours(cheapest.campaign_needed_h)} h, more than the deadline window's "
             f"{format_hours(window.elapsed_h)} h")
    if chosen is None:
        return (f"no configuration fits the deadline: {cheapest.configuration_id} would be acceptable at "
                f"{format_usd(cheapest.cost.total_usd)} USD, but it {needs}; reschedule, or negotiate the deadline")
    assert chosen.cost.total_usd is not None
    if cheapest.cost.total_usd < chosen.cost.total_usd:
        return (f"{chosen.configuration_id} wins only because of the deadline: {cheapest.configuration_id} would "
                f"cost {format_usd(cheapest.cost.total_usd)} USD instead of {format_usd(chosen.cost.total_usd)} USD, "
                f"but it {needs}; the faster {chosen.configuration_id} fits")
    return ""


def uncertain_lines(
    chosen: Configuration | None, configs: list[Configuration], results: list[CampaignResult],
    campaigns: Sequence[CampaignEvidence], study: Any,
) -> list[str]:
    """What the decision cannot settle: the chosen one's warnings, each campaign's notes, unpriced
    configurations, and a reference variant whose metric differs between campaigns."""
    lines = [] if chosen is None else _chosen_uncertainty(chosen)
    for evidence in campaigns:
        ids = [v.variant_id for v in evidence.summary.variants]
        lines += [f"{evidence.label}: {w}" for w in evidence.summary.warnings
                  if not any(names_variant(w, i) for i in ids)]
        lines += [f"{evidence.label}: {note}" for note in evidence.notes]
    by_campaign = {r.campaign_id: r for r in results}
    for result in by_campaign.values():
        variants = len({c.variant_id for c in configs if c.campaign_id == result.campaign_id})
        if variants > 1 and result.period.needed_h is not None:
            lines.append(
                f"{result.label}: its period ({format_hours(result.period.needed_h)} h needed) measured the whole "
                f"comparison ({result.attempts} passes of {variants} variants): an upper bound for one configuration "
                "run alone, never a forecast of it"
            )
        lines += [f"{result.label}: {note}" for note in result.period.notes]
    unknown = [c.configuration_id for c in configs if c.cost.total_usd is None]
    if unknown:
        lines.append(f"{len(unknown)} configuration(s) have no contracted cost and could not be ranked: "
                     + ", ".join(unknown))
    return lines + _reference_drift(campaigns, study)


def _chosen_uncertainty(chosen: Configuration) -> list[str]:
    lines = [f"{chosen.configuration_id}: {w}" for w in chosen.uncertainty]
    if chosen.accepted_passes < 3:
        lines.append(f"{chosen.configuration_id}: only {chosen.accepted_passes} accepted pass(es); a median of "
                     "fewer than 3 passes says little")
    if chosen.accepted_artifacts < chosen.expected_artifacts:
        lines.append(f"the job needs {chosen.expected_artifacts} corpora; {chosen.artifact_note}")
    return lines


def _reference_drift(campaigns: Sequence[CampaignEvidence], study: Any) -> list[str]:
    """The reference variant's median metric per campaign, when several campaigns ran it, and a warning when
    it differs by more than the study's tolerance."""
    reference = study.quality.reference_variant
    metrics = {}
    for evidence in campaigns:
        for variant in evidence.summary.variants:
            if variant.variant_id == reference and variant.median_metric is not None:
                metrics[evidence.label] = variant.median_metric
    if len(metrics) <= 1:
        return []
    lines = [
        "equivalence is judged within each campaign against that campaign's own run of the reference variant "
        f"{reference}; its median {study.quality.metric} per campaign: "
        + ", ".join(f"{label} {value:.4f}" for label, value in metrics.items())
    ]
    if max(metrics.values()) - min(metrics.values()) > study.quality.max_metric_drop:
        lines.append(f"the reference variant's {study.quality.metric} differs between campaigns by more than "
                     f"the tolerance {study.quality.max_metric_drop}: check the hosts' software stacks")
    return lines


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _sec(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


