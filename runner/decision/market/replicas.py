"""``decide --market`` for a server study: each configuration's replicas priced across providers over the period.

For each configuration with a capacity, the card its campaign ran on
(:func:`runner.decision.market.pricing.campaign_card`: measured from the trial manifests, else the campaign's rental,
declared and said so), as many as the replicas the declared peak needs, held for the whole period (``--days`` × 24 h,
as the decision prices them), charged on every catalog row that sells that card
(:func:`protocol.costing.market.price_card`: whole instances, each row's billing, spot marked; a flat plan shorter
than the period is left out with the reason, while the catalog's own pricing renews it). Then
:func:`protocol.decision.market_rank.market_decision`, as for an offline decision: the chosen configuration's cheapest
offer and runner-up, how much the provider changes the cost against the configuration, and the cheapest configuration
with a capacity across providers. Every catalog is recorded by path, sha256 and date in decision.json's ``market``;
nothing is re-priced in place. A configuration without a capacity has no offer, with the reason (never a zero). The
offers' ``accepted_results`` is 0: a serving decision counts requests, and the memo and the CSV give the cost per
million requests at the peak beside each total.

Example::

    decision = price_serving_market(decision, campaigns, evidence, MarketOptions((Path("market.csv"),)), catalog)
    decision.market.cheapest.provider      # "acme"
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

from protocol.costing.catalog_file import load_catalog
from protocol.costing.gpu_map import load_gpu_map
from protocol.costing.plans import Catalog
from protocol.decision.evidence import CampaignEvidence
from protocol.decision.market_rank import CardChoice, market_decision
from protocol.decision.serving import ServingConfiguration, ServingDecision
from runner.campaign_dir.campaign import Campaign
from runner.decision.market.pricing import MarketOptions, campaign_card, catalog_uses

#: What a spot offer risks for a service (the offline decision's risk speaks of a lost pass).
SERVING_SPOT_RISK = ("spot: interruptible, the provider may stop the instance at any time; a stopped replica "
                     "serves nothing until it is replaced, so the bound holds and the cost shown stands only if no "
                     "interruption happens")


@dataclass(frozen=True)
class _Weighed:
    """What :func:`market_decision` reads of one configuration: may it be chosen, and the hours it holds cards."""

    configuration_id: str
    acceptable: bool
    campaign_needed_h: float
    accepted_artifacts: int = 0


@dataclass(frozen=True)
class _Weighing:
    configurations: tuple[_Weighed, ...]
    chosen: str | None


def price_serving_market(decision: ServingDecision, campaigns: Sequence[Campaign],
                         evidence: Sequence[CampaignEvidence], options: MarketOptions,
                         catalog: Catalog) -> ServingDecision:
    """``decision`` with ``market``: every configuration's replicas priced on ``catalog`` and the market catalogs."""
    gpu_map = load_gpu_map(list(options.gpu_maps))
    markets = [load_catalog(path) for path in options.catalogs]
    starts = [day for day in (_day(c.record.created_at) for c in campaigns) if day is not None]
    uses = catalog_uses(catalog, markets, options, min(starts) if starts else None)
    found = {item.campaign_id: campaign_card(campaign.root, item, gpu_map)
             for campaign, item in zip(campaigns, evidence, strict=True)}
    period_h = float(decision.demand.period_h)
    cards = {config.configuration_id: choice for config in decision.configurations
             if (choice := _choice(config, found.get(config.campaign_id))) is not None}
    weighing = _Weighing(tuple(_Weighed(c.configuration_id, c.capacity.capacity_qps is not None, period_h)
                               for c in decision.configurations), decision.chosen)
    market = market_decision(weighing, cards, [catalog, *markets], uses, gpu_map, options.market_filter,
                             SERVING_SPOT_RISK)
    return replace(decision, market=market)


def _choice(config: ServingConfiguration, found: CardChoice | None) -> CardChoice | None:
    """The campaign's card, as many as the configuration's replicas; none (with the reason) without a capacity."""
    if found is None or found.card is None:
        return found
    if config.replicas is None:
        why = config.not_ranked or config.cost_reason
        return replace(found, card=None, empty_reason=f"no replicas to price: {why}")
    return replace(found, cards_needed=config.replicas)


def _day(stamp: str) -> date | None:
    """The UTC date of campaign.json's ``created_at`` (None when absent or not ISO 8601)."""
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment.astimezone(UTC) if moment.tzinfo else moment).date()
