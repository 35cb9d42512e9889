"""``decide --market``: each configuration's card read from its campaign, priced across providers, never re-priced
in place.

:func:`price_market` finds each campaign's card (the driver's name and memory in its trial manifests, mapped by
the GPU map; else the rental's name, declared and said so), reads the market catalogs, and returns the decision
with its :class:`protocol.decision.market_rank.MarketDecision`. :func:`output_paths` keeps earlier pricing: when
the target already holds a decision priced with catalogs of other dates, the new decision is written beside it
(``decision-priced-<dates>.json``, ``.md`` and ``report-priced-<dates>.html``), and names the earlier one and its
dates; the old files are never rewritten.

Example: ``decision = price_market(decision, roots, evidence, MarketOptions((Path("market.csv"),)), catalog)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TypeVar

from protocol.costing.catalog_file import load_catalog
from protocol.costing.gpu_map import GpuMap, load_gpu_map
from protocol.costing.market import CardPricing, MarketFilter, price_card
from protocol.costing.plans import Catalog
from protocol.decision.configuration import configuration_labels
from protocol.decision.evidence import CampaignEvidence
from protocol.decision.market_rank import CardChoice, CatalogUse, MarketDecision, catalog_use, market_decision
from protocol.decision.records import Decision
from protocol.decision.serving import ServingDecision
from protocol.errors import UserError
from protocol.io.fingerprint import sha256_file
from protocol.io.jsonio import loads_unique
from protocol.io.names import check_gpu_name
from protocol.records.manifest import read_manifest
from runner.campaign_dir.layout import CampaignPaths

#: An offline decision or a server study's: both carry ``catalog_dates`` and ``market``.
AnyDecision = TypeVar("AnyDecision", Decision, ServingDecision)


@dataclass(frozen=True)
class MarketOptions:
    """``decide --market FILE … [--gpu-map FILE] [--provider P] [--region R] [--capacity C]``."""

    catalogs: tuple[Path, ...]
    gpu_maps: tuple[Path, ...] = ()
    market_filter: MarketFilter = MarketFilter()
    today: date | None = None


def price_market(decision: Decision, roots: Sequence[Path], evidence: Sequence[CampaignEvidence],
                 options: MarketOptions, catalog: Catalog) -> Decision:
    """The decision with every configuration priced on ``catalog`` and the market catalogs."""
    gpu_map = load_gpu_map(list(options.gpu_maps))
    markets = [load_catalog(path) for path in options.catalogs]
    starts = [c.period.start.date() for c in decision.campaigns if c.period.start is not None]
    uses = catalog_uses(catalog, markets, options, min(starts) if starts else None)
    labels = configuration_labels(evidence)
    cards = {}
    for root, item in zip(roots, evidence, strict=True):
        choice = campaign_card(root, item, gpu_map)
        cards.update({labels[(item.campaign_id, v.variant_id)]: choice for v in item.summary.variants})
    market = market_decision(decision, cards, [catalog, *markets], uses, gpu_map, options.market_filter)
    return replace(decision, market=market)


def catalog_uses(catalog: Catalog, markets: Sequence[Catalog], options: MarketOptions,
                 first_start: date | None) -> list[CatalogUse]:
    """Every catalog weighed (the plan catalog, then ``markets``, read from ``options.catalogs``) with its sha256 and
    date flags against today and the first campaign's start."""
    today = options.today or datetime.now(UTC).date()
    uses = [catalog_use(catalog, _sha256(Path(catalog.path)), today, first_start)]
    return uses + [catalog_use(market, sha256_file(path), today, first_start)
                   for market, path in zip(markets, options.catalogs, strict=True)]


def campaign_card(root: Path, evidence: CampaignEvidence, gpu_map: GpuMap) -> CardChoice:
    """The card a campaign ran on: measured (manifests), else declared (rental), else why there is none."""
    paths = CampaignPaths(root)
    names: dict[str, list[int | None]] = {}
    uuids = set()
    for row in evidence.rows:
        manifest = read_manifest(paths.trial_dir(row.trial_id))
        device = (manifest.device if manifest else None) or {}
        if isinstance(device.get("gpu_name"), str) and device["gpu_name"]:
            memory = device.get("gpu_memory_bytes")
            names.setdefault(device["gpu_name"], []).append(memory if isinstance(memory, int) else None)
            uuids.add(device.get("gpu_uuid"))
    if len(names) > 1:
        return CardChoice(None, "measured", 1, f"the trials ran on {len(names)} different cards "
                          f"({', '.join(sorted(names))}): price each card's campaign apart")
    if names:
        name, memories = next(iter(names.items()))
        memory = max((m for m in memories if m), default=None)
        where = f"{root}/trials/*/manifest.json"
        shown = f", {memory / 2**30:.1f} GiB" if memory else ""
        try:
            card = gpu_map.card_for_driver(name, memory, where)
        except UserError as exc:
            return CardChoice(None, f"measured: {name}{shown}", 1, exc.message)
        return CardChoice(card, f"measured: {name}{shown} (trial manifests)", max(1, len(uuids)))
    if evidence.rental_gpu is None:
        return CardChoice(None, "", 1, "the trials recorded no GPU and no rental is recorded: no card to price")
    try:
        card = gpu_map.card_for_rental(evidence.rental_gpu)
    except UserError as exc:
        return CardChoice(None, f"declared: rental {evidence.rental_gpu}", 1, exc.message)
    return CardChoice(card, f"declared: the rental names {evidence.rental_gpu} (the trials recorded no GPU: "
                      "their pass times were measured on the host's own device)", 1)


def _sha256(path: Path) -> str:
    try:
        return sha256_file(path)
    except OSError:
        return ""


def _pricing_dates(data: object) -> str:
    """The dates a written decision was priced with: its catalog's and every market catalog's."""
    if not isinstance(data, dict):
        return ""
    dates = [str(data.get("catalog_dates", ""))]
    market = data.get("market")
    if isinstance(market, dict):
        dates += [", ".join(map(str, use.get("dates", []))) for use in market.get("catalogs", [])
                  if isinstance(use, dict)]
    return "; ".join(dates)


def output_paths(decision: AnyDecision, paths: tuple[Path, Path, Path]) -> tuple[AnyDecision, tuple[Path, Path, Path]]:
    """Where to write: in place when no earlier decision is there or it was priced with the same dates; else beside it,
    the new decision naming the earlier one (its file and dates). An offline or a server study's decision alike."""
    json_path = paths[0]
    if decision.market is None or not json_path.exists():
        return decision, paths
    priced: MarketDecision = decision.market
    try:
        earlier = loads_unique(json_path.read_bytes())
    except (OSError, ValueError):
        earlier = None
    new_dates = _pricing_dates({"catalog_dates": decision.catalog_dates,
                                "market": {"catalogs": [{"dates": [d.isoformat() for d in use.dates]}
                                                        for use in priced.catalogs]}})
    old_dates = _pricing_dates(earlier)
    if old_dates == new_dates:
        return decision, paths
    stamp = "_".join(sorted({d.isoformat() for use in priced.catalogs for d in use.dates}))
    beside = tuple(path.with_name(f"{path.stem}-priced-{stamp}{path.suffix}") for path in paths)
    note = (f"{json_path.name} beside this one was priced with catalogs dated {old_dates or 'unknown (unreadable)'}; "
            f"this decision is priced with catalogs dated {new_dates} and written as {beside[0].name}: the earlier "
            "one is kept as it is, never re-priced in place")
    market = replace(priced, earlier=(*priced.earlier, note))
    return replace(decision, market=market), (beside[0], beside[1], beside[2])


#: The longest job ``cost --market --hours`` prices (about 11 years): more is a typo.
MAX_JOB_HOURS = 100_000.0


def price_market_job(catalogs: Sequence[Catalog], gpu: str, hours: float | None, cards: int,
                     accepted: int | None, gpu_maps: Sequence[Path], chosen: MarketFilter) -> CardPricing:
    """``isocost cost --market``: ``hours`` on ``cards`` cards of the card ``gpu`` names, on every offer."""
    if hours is None or not math.isfinite(hours) or not 0 < hours <= MAX_JOB_HOURS:
        raise UserError(f"--hours must be above 0 and at most {MAX_JOB_HOURS:,.0f}, got {hours}", "--hours",
                        "Give the hours the job needs, e.g. --hours 3 (a campaign's needed period: isocost period).")
    if accepted is not None and accepted < 0:
        raise UserError(f"--accepted-results must be 0 or more, got {accepted}", "--accepted-results",
                        "Count the corpora actually completed and validated, or leave the option out.")
    card = load_gpu_map(list(gpu_maps)).card_for_rental(check_gpu_name(gpu, "--gpu"))
    return price_card(catalogs, card, cards=cards, needed_h=hours, accepted=accepted or 0, market_filter=chosen)
