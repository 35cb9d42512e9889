"""decision.md of a server study: which configuration, how many cards, why, what is uncertain, then the evidence.

Rendered from a :class:`protocol.decision.serving.ServingDecision` only (pure text; the stage prints and writes it).

Example::

    render_serving_memo(decision)
    # "# Decision: serve (serving)\\n\\nQuestion: …\\n\\n## Answer\\n\\n**Chosen: batch_size=4 on rtx-4090 ×1 lot**: …"
"""

from __future__ import annotations

from decimal import Decimal

from protocol.costing.plans import format_usd
from protocol.decision.serving import ServingConfiguration, ServingDecision
from runner.decision.market.memo import market_lines
from runner.decision.offline.memo import ledger_lines

RULE = ("A configuration is the variant minus its rate, on one campaign's hardware. Its capacity is the highest "
        "declared rate at which every kept run had its answers accepted (the task's gate, and the same result as "
        "the reference), a VALID LoadGen result and the bound met, every declared rate below it too. A configuration "
        "whose answers were refused has no capacity, never a zero. Replicas = ceil(peak rate ÷ capacity), one card "
        "each; the cost is the cheapest billing option of the catalog for those cards over the whole period.")


def render_serving_memo(decision: ServingDecision) -> str:
    """The memo's text."""
    lines = [f"# Decision: {decision.study_name} (serving)", ""]
    if decision.question:
        lines += [f"Question: {decision.question}", ""]
    lines += ["## Answer", "", _answer(decision), "", _traffic(decision), "", *_reference(decision)]
    if decision.why:
        lines += ["Why:", "", *(f"- {line}" for line in decision.why), ""]
    not_ranked = [c for c in decision.configurations if c.rank is None]
    if not_ranked:
        lines += ["Why not:", "", *(f"- {c.configuration_id}: {c.not_ranked}" for c in not_ranked), ""]
    lines += ["## What is uncertain", "", *(f"- {line}" for line in decision.uncertain), ""]
    lines += ["## Configurations", "", RULE, "", *_table(decision), ""]
    lines += ["## Runs per declared rate", "", "| configuration | rate (qps) | kept runs | held | why not |",
              "|---|---|---|---|---|"]
    for config in decision.configurations:
        for rate in config.capacity.rates:
            lines.append(f"| {config.configuration_id} | {rate.rate_qps:g} | {', '.join(rate.trials) or '—'} | "
                         f"{'yes' if rate.held else 'no'} | {'; '.join(rate.reasons) or '—'} |")
    lines += ["", *_options(decision), *ledger_lines(decision.ledger)]
    if decision.market is not None:
        lines += market_lines(decision.market, decision.demand.requests)
    lines += ["## Inputs", "",
              f"- study `{decision.study_name}`, task `{decision.task}`; declared rates "
              f"{', '.join(f'{r:g}' for r in decision.declared_rates_qps)} qps; bound {decision.bound}",
              *(f"- campaign {c.campaign_id} ({c.label}): {c.hardware}" for c in decision.campaigns),
              f"- catalog {decision.catalog_path} dated {decision.catalog_dates}"
              + (f" ({decision.catalog_source})" if decision.catalog_source else "")]
    return "\n".join(lines) + "\n"


def _answer(decision: ServingDecision) -> str:
    chosen = next((c for c in decision.configurations if c.configuration_id == decision.chosen), None)
    if chosen is None:
        return ("**Nothing chosen**: no configuration has accepted answers, a bound held at a declared rate and a "
                "known cost (the \"Why not\" lines say which failed).")
    tokens = (f"; {format_usd(chosen.per_million_tokens_usd)} USD per million output tokens"
              if chosen.per_million_tokens_usd is not None else "")
    return (f"**Chosen: {chosen.configuration_id}**: {chosen.replicas} card(s) ({chosen.lots} lot(s) of "
            f"{chosen.cards_per_lot}), {format_usd(chosen.cost_usd or Decimal(0))} USD over "
            f"{decision.demand.days} day(s) ({chosen.cost_option}); "
            f"{format_usd(chosen.per_million_requests_usd or Decimal(0))} USD per million requests at the "
            f"bound{tokens}.")


def _traffic(decision: ServingDecision) -> str:
    demand = decision.demand
    return (f"Declared traffic: {demand.peak_qps:g} queries per second at the peak, {demand.hours_per_day:g} h a "
            f"day, over {demand.days} day(s): {int(demand.requests):,} requests at the peak; bound "
            f"{decision.bound}.")


def _reference(decision: ServingDecision) -> list[str]:
    """With several campaigns: the one whose reference variant every configuration is compared with by id."""
    if len(decision.campaigns) < 2:
        return []
    first = decision.campaigns[0]
    return [f"Reference: the study's reference variant on campaign {first.campaign_id} ({first.label}, "
            f"{first.hardware}); every configuration of every campaign is compared with it by id "
            "(`decide --reference DIR` names another campaign).", ""]


def _money(value: Decimal | None, reason: str = "") -> str:
    if value is not None:
        return format_usd(value)
    return f"— ({reason})" if reason else "—"


def _table(decision: ServingDecision) -> list[str]:
    ranked = sorted(decision.configurations, key=lambda c: (c.rank is None, c.rank or 0))
    return ["| rank | configuration | capacity (qps) | bracket | replicas (cards) | lots | cost (USD) | "
            "per million requests (USD) | per million output tokens (USD) |",
            "|---|---|---|---|---|---|---|---|---|", *map(_row, ranked)]


def _row(config: ServingConfiguration) -> str:
    capacity = config.capacity
    shown = f"{capacity.capacity_qps:g}" if capacity.capacity_qps is not None else "— (none: see Why not)"
    if capacity.capacity_qps is None:
        bracket = "—"
    elif capacity.fails_at_qps is not None:
        bracket = f"≥ {capacity.capacity_qps:g}, < {capacity.fails_at_qps:g}"
    else:
        bracket = f"≥ {capacity.capacity_qps:g} (not bracketed above)"
    return (f"| {config.rank or '—'} | {config.configuration_id} | {shown} | {bracket} | "
            f"{config.replicas if config.replicas is not None else '—'} | "
            f"{config.lots if config.lots is not None else '—'} | "
            f"{_money(config.cost_usd, config.cost_reason if config.replicas is not None else '')} | "
            f"{_money(config.per_million_requests_usd)} | "
            f"{_money(config.per_million_tokens_usd, config.tokens_reason)} |")


def _options(decision: ServingDecision) -> list[str]:
    lines = ["## Billing options over the period", ""]
    priced = [c for c in decision.configurations if c.options]
    if not priced:
        return [*lines, "No configuration was priced (none has a capacity and a rental the catalog sells).", ""]
    for config in priced:
        lines += [f"### {config.configuration_id}", "", "| billing | length | price per lot (USD) | lots | "
                  "total (USD) | note |", "|---|---|---|---|---|---|"]
        lines += [f"| {o.billing} | {o.length} | {format_usd(o.price_usd_per_lot)} | {o.lots} | "
                  f"{_money(o.total_usd)} | {o.note} |" for o in config.options]
        lines.append("")
    return lines
