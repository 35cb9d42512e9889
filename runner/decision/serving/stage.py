"""``decide`` for a server study: campaigns → capacity per configuration → replicas and money → the memo.

Reads each opened campaign's kept runs (:func:`runner.decision.serving.runs.serving_runs`), computes each
configuration's capacity (:func:`protocol.decision.capacity.capacities`), prices the replicas the declared traffic
needs over the declared period (:func:`protocol.decision.serving.price_configuration`) and ranks them
(:func:`protocol.decision.serving.rank_serving`). Writes nothing: :mod:`runner.decision.stage` writes the texts
under ``--out`` only.

Example::

    decision = serving_decision(campaigns, evidence, ServingDemand(40.0, 8.0, 30), catalog)
    decision.chosen          # "batch_size=4 on rtx-4090 ×1 lot"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from html import escape
from typing import Any

from protocol.costing.plans import Catalog
from protocol.decision.agreement import AgreementMatrix, cross_equivalence
from protocol.decision.capacity import Capacity, RunFacts, capacities
from protocol.decision.evidence import CampaignEvidence
from protocol.decision.records import Ledger
from protocol.decision.serving import (
    ServingCampaign,
    ServingConfigInput,
    ServingDecision,
    ServingDemand,
    price_configuration,
    rank_serving,
    why_lines,
)
from protocol.io.jsonio import dumps
from protocol.records.codec import to_dict
from runner.campaign_dir.campaign import Campaign
from runner.campaign_dir.fault_hooks import FAULT_HOOK_BANNER
from runner.decision.serving.memo import render_serving_memo
from runner.decision.serving.runs import serving_runs

GENERATION_TASK = "text-generation"
#: (campaign id, variant id) → (the same result as the decision's one reference? None: unknown, why).
Across = Callable[[str, str], tuple[bool | None, str]]


def serving_decision(campaigns: Sequence[Campaign], evidence: Sequence[CampaignEvidence], demand: ServingDemand,
                     catalog: Catalog, catalog_source: str = "", across: Across | None = None,
                     ledger: Ledger | None = None) -> ServingDecision:
    """The serving decision over ``campaigns`` (of one server study; ``evidence`` read from each). ``across``:
    (campaign id, variant id) → whether that variant is the same result as the decision's one reference across
    campaigns (several campaigns: :func:`runner.decision.stage` builds it from the agreement matrix); ``ledger``:
    other project expenses, shown apart and never added to a configuration's cost, as in the offline decision."""
    study = campaigns[0].study
    traffic = study.traffic
    assert traffic is not None, "a serving decision needs a server study"
    rates = tuple(sorted(traffic.rates_qps))
    task = str(getattr(study, "task", ""))
    inputs: list[ServingConfigInput] = []
    many = len(campaigns) > 1
    for campaign, item in zip(campaigns, evidence, strict=True):
        runs = judged_across(serving_runs(campaign, item), item.campaign_id, across)
        for capacity in capacities(runs, rates):
            name = f"{capacity.configuration} on {item.hardware}"
            if many and any(name == known.configuration_id.split(" [")[0] for known in inputs):
                name += f" [campaign {item.campaign_id[:8]}]"
            tokens, tokens_reason = _tokens(runs, capacity, task)
            inputs.append(ServingConfigInput(name, capacity, item.rental_gpu, item.rental_empty_reason, tokens,
                                             tokens_reason, item.campaign_id))
    priced = [price_configuration(one, demand, catalog) for one in inputs]
    configs, ranking = rank_serving(priced)
    chosen = next((c for c in configs if c.rank == 1), None)
    bound = bound_text(traffic)
    uncertain = [f"{chosen.configuration_id}: {line}" for line in chosen.capacity.uncertain] if chosen else []
    if many:
        uncertain.append("answers are compared by id with the decision's one reference (the study's reference "
                         "variant on the first campaign), at every rate; `isocost compare` shows the whole matrix")
    uncertain.append(f"the replicas are held for the whole period ({demand.period_h} h); requests are counted at the "
                     f"declared peak only ({demand.hours_per_day:g} h a day): traffic outside the peak lowers the "
                     "cost per million requests")
    return ServingDecision(
        study_name=study.name, question=str(getattr(study, "question", "")), task=task, bound=bound,
        declared_rates_qps=rates, demand=demand, catalog_path=catalog.path, catalog_dates=catalog.dates_text,
        configurations=configs, ranking=ranking, chosen=chosen.configuration_id if chosen else None,
        why=why_lines(chosen, demand, configs, bound) if chosen else (), uncertain=tuple(uncertain),
        catalog_source=catalog_source,
        test_hooks=tuple(note for e in evidence for note in _hooks(e)),
        campaigns=tuple(ServingCampaign(e.label, e.campaign_id, e.hardware, _hooks(e)) for e in evidence),
        ledger=ledger,
    )


def _hooks(evidence: CampaignEvidence) -> tuple[str, ...]:
    """The test-only fault hook's flag of one campaign, when its trials ran with it."""
    return tuple(note for note in evidence.notes if note.startswith(FAULT_HOOK_BANNER))


def across_campaigns(matrix: AgreementMatrix, labels: Mapping[tuple[str, str], str],
                     evidence: Sequence[CampaignEvidence], quality: Any) -> Across:
    """(campaign id, variant id) → that variant's verdict against the decision's one reference in ``matrix`` (its
    configuration named by ``labels``), under the study's ``quality`` rule as the offline decision applies it
    (:func:`protocol.decision.agreement.judge_across`): with the variant's median metric in its campaign's summary,
    so a generation study's ``min_score_share`` holds across campaigns too."""
    metrics = {(item.campaign_id, variant.variant_id): variant.median_metric
               for item in evidence for variant in item.summary.variants}

    def across(campaign_id: str, variant_id: str) -> tuple[bool | None, str]:
        return cross_equivalence(matrix, labels[(campaign_id, variant_id)], quality,
                                 metrics.get((campaign_id, variant_id)))
    return across


def judged_across(runs: Sequence[RunFacts], campaign_id: str, across: Across | None) -> tuple[RunFacts, ...]:
    """Each accepted run whose variant is not shown the same result as the decision's one reference (another
    campaign's hardware) made a refused one, with the reason; unchanged without ``across``."""
    if across is None:
        return tuple(runs)
    judged = []
    for run in runs:
        if run.accepted is True:
            same, why = across(campaign_id, run.variant_id)
            if same is not True:
                word = "not equivalent to" if same is False else "equivalence unknown against"
                run = replace(run, accepted=False,
                              accepted_reason=f"quality across campaigns: {word} the decision's reference ({why})")
        judged.append(run)
    return tuple(judged)


def bound_text(traffic: object) -> str:
    """The declared bound in words. Example: ``"p90 latency ≤ 500 ms"``."""
    parts = [f"p{b.percentile * 100:g} {b.measure} ≤ {b.bound_ms:g} ms" for b in getattr(traffic, "bounds", ())]
    return " and ".join(parts) or "the declared bound"


def _tokens(runs: Sequence[RunFacts], capacity: Capacity, task: str) -> tuple[float | None, str]:
    """Mean output tokens per request at the capacity rate (generation), or why there is no figure."""
    if task != GENERATION_TASK:
        return None, f"not a generation task ({task}): no output tokens"
    if capacity.capacity_qps is None:
        return None, "no capacity"
    held = [r for r in runs if r.configuration == capacity.configuration and r.rate_qps == capacity.capacity_qps]
    if not held or any(r.output_tokens is None or not r.queries for r in held):
        return None, "the manifests record no output token count for these runs"
    queries = sum(r.queries or 0 for r in held)
    return sum(r.output_tokens or 0 for r in held) / queries, ""


def serving_texts(decision: ServingDecision, banners: Sequence[str]) -> tuple[str, str, str]:
    """decision.json, decision.md and report.html of a serving decision, as text (what ``decide --out`` writes;
    ``verify`` decides again from a bundle's evidence and compares): ``banners`` (the fault hook's flag, an
    inconsistent directory's) first in the memo."""
    memo = "".join(f"{b}\n" for b in banners) + ("\n" if banners else "") + render_serving_memo(decision)
    return dumps(to_dict(decision)), memo, serving_report_html(memo)


def serving_report_html(memo: str) -> str:
    """report.html of a serving decision: the memo, self-contained (no script, no external request)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>isocost serving decision"
            "</title></head>\n<body><pre>" + escape(memo) + "</pre></body></html>\n")
