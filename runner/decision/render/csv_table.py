"""``isocost decide --format csv``: one CSV row per configuration, for spreadsheets.

Campaign figures (quality, passes, contracted cost) and, with a declared ``[job]``, the job's projection, billing,
probabilities, Pareto flag and energy; the job columns stay empty without a ``[job]``. With ``--market``, the
cheapest offer across providers is appended (:data:`runner.decision.market.memo.MARKET_COLUMNS`). A text cell that a
spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``…) is written with a leading ``'``
(:func:`protocol.io.csvio.safe_cell`); numbers stay numbers.

A server study's decision (:func:`render_serving_csv`) has its own columns: one row per configuration with its
capacity, replicas, lots, the cheapest billing option over the period, the cost per million requests and, for
generation, per million output tokens; an empty cell has its reason in the column beside it, never a zero. With
``--market``, the cheapest offer across providers for the replicas over the period is appended
(:data:`runner.decision.market.memo.SERVING_MARKET_COLUMNS`, per million requests instead of per accepted result).

Example: ``render_csv(decision).splitlines()[0]`` starts with ``configuration_id,variant_id,hardware``;
``render_serving_csv(serving).splitlines()[0]`` starts with ``rank,configuration_id,campaign_id,capacity_qps``.
"""

from __future__ import annotations

import io
from typing import Any

from protocol.costing.job_cost import JobConfiguration
from protocol.decision.rank import Configuration, Decision
from protocol.decision.serving import ServingConfiguration, ServingDecision
from protocol.io.csvio import csv_writer
from runner.campaign_dir.fault_hooks import FAULT_HOOK_BANNER
from runner.decision.market.memo import MARKET_COLUMNS, SERVING_MARKET_COLUMNS, market_cells
from runner.decision.render.text_format import usd

COLUMNS = ("configuration_id", "variant_id", "hardware", "equivalent", "metric", "median_metric",
           "accepted_passes", "attempts", "median_pass_s", "campaign_rank", "campaign_cost_usd",
           "campaign_cost_per_validated_corpus_usd", "job_rank", "job_h", "job_h_low", "job_h_high",
           "job_billing", "job_expected_usd", "job_per_validated_corpus_usd", "p_fits_plan", "p_fits_deadline",
           "pareto", "gpu_j_per_input", "cpu_j_per_input", "not_ranked_because", "not_a_measurement")


def render_csv(decision: Decision) -> str:
    """The header and one row per configuration, in the decision's order; empty cells for missing figures."""
    job = decision.job
    by_id = {} if job is None else {c.configuration_id: c for c in job.configurations}
    out = io.StringIO()
    writer = csv_writer(out)
    market = decision.market
    writer.writerow(COLUMNS + (MARKET_COLUMNS if market is not None else ()))
    hooks = {r.campaign_id: " ".join(note for note in r.notes if note.startswith(FAULT_HOOK_BANNER))
             for r in decision.campaigns}  # a campaign run with the test-only fault hook: not a measurement
    for c in decision.configurations:
        row = [*_row(c, by_id.get(c.configuration_id), with_job=job is not None), hooks.get(c.campaign_id, "")]
        row += market_cells(market, c.configuration_id) if market is not None else []
        writer.writerow(row)  # None: an empty cell; a formula-like text shown as text
    return out.getvalue()


def _row(c: Configuration, j: JobConfiguration | None, *, with_job: bool) -> list[Any]:
    reasons = (list(j.exclusions) if j is not None else []) if with_job else list(c.exclusions)
    campaign = [c.configuration_id, c.variant_id, c.hardware, c.equivalent, c.metric, c.median_metric,
                c.accepted_passes, c.attempts, c.median_pass_s, c.rank, usd(c.cost.total_usd),
                usd(c.cost.cost_per_validated_corpus_usd)]
    if j is None:  # the nine job columns, pareto and the two energy columns
        return [*campaign, *[None] * 12, "; ".join(reasons)]
    p, energy = j.projection, j.energy
    projected = [None, None, None] if p is None else [p.job_h, p.low_h, p.high_h]
    return [*campaign, j.rank, *projected, j.chosen_option, usd(j.expected_usd), usd(j.per_corpus_usd),
            j.p_fits_plan, j.p_fits_deadline, j.pareto, energy.get("gpu_j_per_input"),
            energy.get("cpu_j_per_input"), "; ".join(reasons)]


#: ``decide --format csv`` for a server study: each ``*_reason`` column says why the figure before it is empty (or,
#: when it is not, how it was reached; ``cost_reason`` for the cost per million requests too); the declared traffic
#: is repeated on every row, for spreadsheets.
SERVING_COLUMNS = ("rank", "configuration_id", "campaign_id", "capacity_qps", "capacity_fails_at_qps",
                   "capacity_reason", "answers_accepted", "replicas_cards", "cards_per_lot", "lots", "cost_usd",
                   "cost_billing", "cost_reason", "per_million_requests_usd", "per_million_output_tokens_usd",
                   "per_million_output_tokens_reason", "peak_qps", "hours_per_day", "period_days",
                   "not_ranked_because", "not_a_measurement")


def render_serving_csv(decision: ServingDecision) -> str:
    """The header and one row per configuration of a server study's decision, in the decision's order."""
    hooks = {c.campaign_id: " ".join(c.test_hooks) for c in decision.campaigns}
    out = io.StringIO()
    writer = csv_writer(out)
    market = decision.market
    writer.writerow(SERVING_COLUMNS + (SERVING_MARKET_COLUMNS if market is not None else ()))
    for c in decision.configurations:
        row = [*_serving_row(c, decision), hooks.get(c.campaign_id, "")]
        row += market_cells(market, c.configuration_id, decision.demand.requests) if market is not None else []
        writer.writerow(row)
    return out.getvalue()


def _serving_row(c: ServingConfiguration, decision: ServingDecision) -> list[Any]:
    capacity, demand = c.capacity, decision.demand
    per_request = usd(c.per_million_requests_usd)
    return [c.rank, c.configuration_id, c.campaign_id, capacity.capacity_qps, capacity.fails_at_qps, capacity.reason,
            capacity.accepted, c.replicas, c.cards_per_lot, c.lots, usd(c.cost_usd), c.cost_option or None,
            c.cost_reason or None,
            per_request, usd(c.per_million_tokens_usd), _tokens_reason(c), demand.peak_qps,
            demand.hours_per_day, demand.days, c.not_ranked or None]


def _tokens_reason(c: ServingConfiguration) -> str | None:
    """Why the cost per million output tokens is empty (None when there is a figure)."""
    if c.per_million_tokens_usd is not None:
        return None
    return c.tokens_reason or "no cost: see cost_reason"
