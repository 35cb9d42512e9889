"""The GPU map (driver name → catalog names, memory checked, user-extensible, ambiguous/unknown refused) and one
card priced across providers: whole instances, spot marked, filters, named exclusions, dates flagged.

The catalogs here are written by the test (MADE-UP prices, not real offers), except where the real snapshot is used.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest
from skypilot_snapshot import COMMITS, check_snapshot, requires_snapshot

from protocol.costing.catalog_file import load_catalog
from protocol.costing.gpu_map import MAP_COLUMNS, load_gpu_map
from protocol.costing.market import MarketFilter, price_card
from protocol.costing.market_import import import_catalogs
from protocol.costing.plans import SPOT_RISK, Catalog, default_catalog_path
from protocol.decision.market_rank import CardChoice, catalog_use, market_decision
from protocol.errors import UserError

COLUMNS = ("gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source,billing,minimum_s,increment_s,"
           "provider,region,instance_type,accelerator,card_memory_gib,spot_usd_per_lot\n")
MADE_UP = "MADE-UP market row for the isocost test"


def _row(provider: str, instance: str, cards: int, price: str, *, gpu: str = "h100-sxm", region: str = "r1",
         spot: str = "", memory: str = "80", day: str = "2026-12-03", billing: str = "hourly,3600,3600") -> str:
    return (f"{gpu},{cards},,{price},USD,{day},{MADE_UP},{billing},{provider},{region},{instance},"
            f"{gpu.upper()},{memory},{spot}\n")


def _catalog(tmp_path: Path, *rows: str, name: str = "market.csv") -> Catalog:
    path = tmp_path / name
    path.write_text(COLUMNS + "".join(rows), encoding="utf-8")
    return load_catalog(path)


def test_driver_names_map_to_cards_by_exact_name_and_memory() -> None:
    gpu_map = load_gpu_map()
    assert gpu_map.version == 1
    assert gpu_map.card_for_driver("NVIDIA H100 80GB HBM3", 85_520_809_984).card == "h100-sxm"  # 79.6 GiB
    assert gpu_map.card_for_driver("nvidia  h100 80gb hbm3", None).card == "h100-sxm"  # case and spaces only
    assert gpu_map.card_for_driver("NVIDIA L4", 23_034 * 2**20).card == "l4"  # 22.5 GiB of a "24 GB" card
    with pytest.raises(UserError, match="reports 40.0 GiB, the GPU map's a100-80gb-sxm has 80 GiB"):
        gpu_map.card_for_driver("NVIDIA A100-SXM4-80GB", 40 * 2**30)
    with pytest.raises(UserError, match="'NVIDIA H100' is not in the GPU map") as info:
        gpu_map.card_for_driver("NVIDIA H100", None)  # close to a known name is not a match
    assert "--gpu-map FILE" in info.value.fix


def test_the_user_map_extends_replaces_and_ambiguity_is_refused(tmp_path: Path) -> None:
    mine = tmp_path / "my-map.csv"
    mine.write_text(",".join(MAP_COLUMNS) + "\n"
                    "rtx-5090,32,NVIDIA GeForce RTX 5090,RTX5090 acme:RTX5090,my own row\n"
                    "rtx-4090,24,NVIDIA GeForce RTX 4090,RTX4090,replaces the shipped row\n"
                    "h100-clone,80,NVIDIA H100 80GB HBM3,H100-CLONE,\n", encoding="utf-8")
    gpu_map = load_gpu_map([mine])
    assert gpu_map.card_for_driver("NVIDIA GeForce RTX 5090", 32 * 2**30).card == "rtx-5090"
    assert [n.text for n in gpu_map.card_named("rtx-4090").catalog_names] == ["rtx4090"]  # type: ignore[union-attr]
    with pytest.raises(UserError, match="is ambiguous in the GPU map: it is h100-sxm .* and h100-clone"):
        gpu_map.card_for_driver("NVIDIA H100 80GB HBM3", None)
    assert gpu_map.sources == ("gpu-map-v1.csv", str(mine))


@pytest.mark.parametrize(("text", "message"), [
    ("card,memory\n", "not a GPU map: the header is wrong"),
    (",".join(MAP_COLUMNS) + "\n=cmd,24,X,Y,\n", "is not a plain name"),
    (",".join(MAP_COLUMNS) + "\nx,lots,X,Y,\n", "memory_gib 'lots' is not a whole number"),
    (",".join(MAP_COLUMNS) + "\nx,24,X,<b>,\n", "is not NAME, provider:NAME or provider:NAME:TEXT"),
    (",".join(MAP_COLUMNS) + "\nx,24,X,Y,\nx,24,Z,W,\n", "the card x is named twice"),
])
def test_a_malformed_user_map_is_refused_by_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "map.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        load_gpu_map([path])


def test_whole_instances_are_paid_and_a_smaller_instance_wins(tmp_path: Path) -> None:
    card = load_gpu_map().card_named("h100-sxm")
    assert card is not None
    only_big = _catalog(tmp_path, _row("acme", "8x", 8, "20.00"))
    [offer] = price_card([only_big], card, cards=1, needed_h=1.5, accepted=2).offers
    # 1 card needed, the only instance holds 8: 1 instance × 2 started hours × 20.00 = 40.00, 8 cards paid.
    assert (offer.instances, offer.cards_paid, offer.total_usd, offer.per_result_usd) == (
        1, 8, Decimal("40.00"), Decimal("20.00"))
    both = _catalog(tmp_path, _row("acme", "8x", 8, "20.00"), _row("acme", "1x", 1, "3.00"), name="both.csv")
    pricing = price_card([both], card, cards=1, needed_h=1.5, accepted=2)
    assert [(o.instance, o.total_usd) for o in pricing.offers] == [("1x", Decimal("6.00"))]
    assert pricing.excluded == ("acme 8x: more cards than the job needs, a smaller instance costs less (1 row)",)
    three = price_card([both], card, cards=3, needed_h=1.5, accepted=1)
    assert [(o.instance, o.instances, o.total_usd) for o in three.offers] == [("1x", 3, Decimal("18.00"))]
    cheap_big = _catalog(tmp_path, _row("acme", "8x", 8, "5.00"), _row("acme", "1x", 1, "3.00"), name="cheap.csv")
    three = price_card([cheap_big], card, cards=3, needed_h=1.5, accepted=1)  # a larger instance that costs less stays
    assert [(o.instance, o.instances, o.total_usd) for o in three.offers] == [("8x", 1, Decimal("10.00")),
                                                                               ("1x", 3, Decimal("18.00"))]


def test_spot_is_marked_filters_apply_and_unusable_rows_are_named(tmp_path: Path) -> None:
    card = load_gpu_map().card_named("h100-sxm")
    assert card is not None
    market = _catalog(tmp_path, _row("acme", "1x", 1, "3.00", spot="1.00", region="us-east-1"),
                      _row("acme", "1x", 1, "3.00", region="eu-west-1"),
                      _row("bravo", "1x", 1, "2.50", region="us-east-1", memory="40"),
                      _row("delta", "1x", 1, "4.00", region="us-east-1"))
    pricing = price_card([market], card, cards=1, needed_h=0.5, accepted=1)
    assert [(o.provider, o.capacity, o.total_usd, o.regions) for o in pricing.offers] == [
        ("acme", "spot", Decimal("1.00"), ("us-east-1",)),
        ("acme", "on-demand", Decimal("3.00"), ("us-east-1", "eu-west-1")),  # one entry, both regions
        ("delta", "on-demand", Decimal("4.00"), ("us-east-1",))]
    assert pricing.offers[0].risk == SPOT_RISK and pricing.offers[1].risk == ""
    assert pricing.excluded == ("bravo H100-SXM: the catalog lists 40 GiB per card, the GPU map's h100-sxm has 80 GiB "
                                "(1 row)",)
    assert pricing.median_provider_usd == Decimal("2.50")  # acme 1.00, delta 4.00
    on_demand = price_card([market], card, cards=1, needed_h=0.5, accepted=1,
                           market_filter=MarketFilter(providers=("acme",), regions=("eu-west-1",),
                                                      capacity="on-demand"))
    assert [(o.provider, o.regions) for o in on_demand.offers] == [("acme", ("eu-west-1",))]
    assert any("outside the filter (providers acme; regions eu-west-1; on-demand only)" in r
               for r in on_demand.excluded)


def test_flat_plans_and_per_second_rows_are_priced_beside_the_market(tmp_path: Path) -> None:
    card = load_gpu_map().card_named("rtx-4090")
    assert card is not None
    flat = load_catalog(default_catalog_path())  # the shipped 2026-09-24 snapshot: rtx-4090, 7 days, 110.00
    market = _catalog(tmp_path, _row("acme", "1x", 1, "0.72", gpu="rtx4090", memory="24",
                                     billing="per-second,60,1"))
    pricing = price_card([flat, market], card, cards=1, needed_h=2.0, accepted=1)
    assert [(o.provider, o.billing, o.total_usd) for o in pricing.offers] == [
        ("acme", "per-second", Decimal("1.44")),
        ("IteraGPU catalog snapshot", "flat 7-day", Decimal("110.00"))]
    too_long = price_card([flat], card, cards=1, needed_h=200.0, accepted=1)
    assert not too_long.offers and "shorter than the job's 200.00 h" in too_long.excluded[0]


def _decision(configs: list[SimpleNamespace], chosen: str | None) -> SimpleNamespace:
    return SimpleNamespace(configurations=configs, chosen=chosen)


def test_the_market_decision_names_cheapest_runner_up_and_both_effects(tmp_path: Path) -> None:
    gpu_map = load_gpu_map()
    market = _catalog(tmp_path, _row("acme", "1x", 1, "3.00"), _row("bravo", "1x", 1, "4.00"),
                      _row("acme", "1x", 1, "0.80", gpu="rtx4090", memory="24"))
    fast = SimpleNamespace(configuration_id="fast on h100", acceptable=True, campaign_needed_h=1.0,
                           accepted_artifacts=1)
    slow = SimpleNamespace(configuration_id="slow on 4090", acceptable=True, campaign_needed_h=4.0,
                           accepted_artifacts=1)
    cards = {"fast on h100": CardChoice(gpu_map.card_named("h100-sxm"), "measured", 1),
             "slow on 4090": CardChoice(gpu_map.card_named("rtx-4090"), "declared", 1)}
    use = catalog_use(market, "sha256:x", date(2026, 12, 3), date(2026, 12, 1))
    result = market_decision(_decision([fast, slow], "fast on h100"), cards, [market], [use], gpu_map,
                             MarketFilter())
    assert result.cheapest is not None and result.runner_up is not None
    assert (result.cheapest.provider, result.cheapest.total_usd) == ("acme", Decimal("3.00"))
    assert (result.runner_up.provider, result.runner_up.total_usd) == ("bravo", Decimal("4.00"))
    assert "the provider changes the cost from 3.00 USD (acme 1x (r1, on-demand)) to 4.00 USD" in result.provider_effect
    assert "×1.33" in result.provider_effect
    assert result.configuration_effect == ("the configuration changes the cost from 3.00 USD (fast on h100) to 3.20 "
                                           "USD (slow on 4090), each at its cheapest offer, ×1.07")
    assert result.cheapest_configuration == "fast on h100" and use.flags == ()


def test_a_future_or_far_older_catalog_is_flagged(tmp_path: Path) -> None:
    future = _catalog(tmp_path, _row("acme", "1x", 1, "3.00", day="2027-06-01"))
    assert "after the decision (2026-12-03)" in catalog_use(future, "", date(2026, 12, 3), None).flags[0]
    old = _catalog(tmp_path, _row("acme", "1x", 1, "3.00", day="2025-01-01"), name="old.csv")
    [flag] = catalog_use(old, "", date(2026, 12, 3), date(2026, 11, 30)).flags
    assert "698 days before the first campaign started (2026-11-30)" in flag


def test_no_card_and_no_offer_are_named(tmp_path: Path) -> None:
    gpu_map = load_gpu_map()
    market = _catalog(tmp_path, _row("acme", "1x", 1, "3.00"))
    config = SimpleNamespace(configuration_id="c", acceptable=True, campaign_needed_h=1.0, accepted_artifacts=1)
    none = market_decision(_decision([config], "c"), {"c": CardChoice(None, "", 1, "no GPU recorded")}, [market], [],
                           gpu_map, MarketFilter())
    assert none.configurations[0].empty_reason == "no GPU recorded" and none.cheapest is None
    l4 = market_decision(_decision([config], "c"), {"c": CardChoice(gpu_map.card_named("l4"), "m", 1)}, [market], [],
                         gpu_map, MarketFilter())
    assert l4.configurations[0].empty_reason == "no catalog offers l4 (catalog names l4)"


@requires_snapshot
def test_hand_checked_prices_from_the_real_snapshot(tmp_path: Path) -> None:
    folder = check_snapshot()
    import_catalogs(folder, date(2026, 12, 3), tmp_path / "market.csv", commits=COMMITS)
    market = load_catalog(tmp_path / "market.csv")
    gpu_map = load_gpu_map()
    sxm = price_card([market], gpu_map.card_for_driver("NVIDIA H100 80GB HBM3", None), cards=1, needed_h=2.5,
                     accepted=1)
    # 3 started hours: RunPod 1x H100-SXM spot 2.69, on-demand 2.99; Lambda gpu_1x_h100_sxm5 3.29 (17 regions).
    assert [(o.provider, o.instance, o.capacity, o.total_usd, len(o.regions)) for o in sxm.offers] == [
        ("runpod", "1x_H100-SXM_SECURE", "spot", Decimal("8.07"), 8),
        ("runpod", "1x_H100-SXM_SECURE", "on-demand", Decimal("8.97"), 8),
        ("lambda", "gpu_1x_h100_sxm5", "on-demand", Decimal("9.87"), 17)]
    pcie = price_card([market], gpu_map.card_for_driver("NVIDIA H100 PCIe", None), cards=1, needed_h=1.0, accepted=1)
    assert {o.instance for o in pcie.offers} == {"1x_H100_SECURE", "gpu_1x_h100_pcie"}  # never the SXM5 instance
    b200 = price_card([market], gpu_map.card_named("b200"), cards=1, needed_h=1.0, accepted=1)  # type: ignore[arg-type]
    assert not b200.offers  # metadata.csv lists the B200 with 80 GB: refused, never priced as a 180 GB card
    assert b200.excluded == ("runpod B200: the catalog lists 80 GiB per card, the GPU map's b200 has 180 GiB "
                             "(32 rows)",)


def test_a_hostile_catalog_source_reaches_the_memo_and_report_as_text(tmp_path: Path) -> None:
    """A plain catalog's source names its provider: markup and table breaks in it stay text everywhere."""
    from runner.decision.market.memo import market_lines
    from runner.decision.market.report import market_html

    hostile = tmp_path / "flat.csv"
    hostile.write_text("gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source\n"
                       "h100-sxm,1,7,100.00,USD,2026-12-01,<img src=x onerror=alert(1)>|=HYPERLINK(1)\n",
                       encoding="utf-8")
    gpu_map = load_gpu_map()
    catalogs = [load_catalog(hostile), _catalog(tmp_path, _row("acme", "1x", 1, "3.00"))]
    config = SimpleNamespace(configuration_id="c", acceptable=True, campaign_needed_h=1.0, accepted_artifacts=1)
    uses = [catalog_use(c, "", date(2026, 12, 3), None) for c in catalogs]
    result = market_decision(_decision([config], "c"), {"c": CardChoice(gpu_map.card_named("h100-sxm"), "m", 1)},
                             catalogs, uses, gpu_map, MarketFilter())
    memo = "\n".join(market_lines(result))
    assert not re.search(r"(?<!\\)<img", memo) and "\\<img src=x onerror=alert(1)\\>\\|=HYPERLINK(1)" in memo
    page = "".join(market_html(result))
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;|=HYPERLINK(1)" in page
