"""decide --market for a server study, its pure parts: the card a configuration is priced on (as many as its
replicas; none without a capacity, with the reason), the campaign's start date, and the cost per million requests
the memo and the CSV show beside each offer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from protocol.costing.gpu_map import load_gpu_map
from protocol.decision.market_rank import CardChoice
from protocol.decision.serving import per_million
from runner.decision.market.memo import SERVING_MARKET_COLUMNS
from runner.decision.market.replicas import _choice, _day


@dataclass(frozen=True)
class _Config:
    replicas: int | None
    not_ranked: str = ""
    cost_reason: str = ""


def _found() -> CardChoice:
    card = load_gpu_map().card_for_rental("rtx-4090")
    return CardChoice(card, "declared: the rental names rtx-4090", 1)


def test_a_configuration_is_priced_on_as_many_cards_as_its_replicas() -> None:
    choice = _choice(_Config(replicas=3), _found())  # type: ignore[arg-type]
    assert choice is not None and choice.card is not None and choice.cards_needed == 3


def test_a_configuration_without_a_capacity_has_no_card_to_price_and_says_why() -> None:
    config: Any = _Config(replicas=None, not_ranked="no capacity: outputs not accepted")
    choice = _choice(config, _found())
    assert choice is not None and choice.card is None
    assert choice.empty_reason == "no replicas to price: no capacity: outputs not accepted"
    missing = CardChoice(None, "", 1, "the trials recorded no GPU and no rental is recorded: no card to price")
    assert _choice(_Config(replicas=2), missing) is missing  # type: ignore[arg-type]
    assert _choice(_Config(replicas=2), None) is None  # type: ignore[arg-type]


def test_the_campaign_start_is_read_as_a_utc_date() -> None:
    assert _day("2026-12-03T23:30:00-02:00") == date(2026, 12, 4)
    assert _day("2026-12-03T10:00:00Z") == date(2026, 12, 3)
    assert _day("") is None and _day("yesterday") is None


def test_cost_per_million_requests() -> None:
    # 50 qps × 3,600 s × 8 h × 7 days = 10,080,000 requests
    assert per_million(Decimal("252.00"), Decimal(10_080_000)) == Decimal("25.00")
    assert per_million(Decimal("330.00"), Decimal(10_080_000)) == Decimal("32.74")  # rounded half up to the cent
    assert "market_cheapest_per_million_requests_usd" in SERVING_MARKET_COLUMNS
    assert not any("per_accepted_result" in column for column in SERVING_MARKET_COLUMNS)
