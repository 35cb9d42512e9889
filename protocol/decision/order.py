"""The ranking order of acceptable configurations: contracted cost, failures, uncertainty, pass time.

:func:`rank_key` sorts; :func:`break_cost_ties` then moves a really faster
configuration (pass-time ranges that do not overlap, :func:`really_faster`)
ahead among those at the same whole-plan price and failure count.

Example: ``break_cost_ties(sorted(configs, key=rank_key))[0]`` is the chosen configuration.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from protocol.decision.records import Configuration


def rank_key(config: Configuration) -> tuple[Any, ...]:
    """Contracted cost, then failures, then remaining uncertainty, then median pass time, then name.

    Example: two configurations at 220.00 USD: the one with 0 failures ranks before the one with 1.
    """
    total = config.cost.total_usd
    return (
        total if total is not None else Decimal("Infinity"),
        config.failures,
        len(config.uncertainty),
        config.relative_spread if config.relative_spread is not None else float("inf"),
        config.median_pass_s if config.median_pass_s is not None else float("inf"),
        config.configuration_id,
    )


def really_faster(a: Configuration, b: Configuration) -> bool:
    """True when every accepted pass of ``a`` was faster than every accepted pass of ``b``.

    The spreads say the difference is real only when the pass-time ranges do not overlap.
    """
    return a.max_pass_s is not None and b.min_pass_s is not None and a.max_pass_s < b.min_pass_s


def break_cost_ties(ranked: list[Configuration]) -> list[Configuration]:
    """Among configurations that cost the same whole plan (and fail as often), a really faster one ranks
    first: a shorter job is what the user pays for next, not a smaller spread. Where the spreads overlap,
    the ``rank_key`` order stands.

    Example: at 220.00 USD each, pass times 5–7 s rank before 10.0–10.2 s despite the larger spread.
    """
    ordered = list(ranked)
    for i in range(len(ordered)):
        best = i
        for j in range(i + 1, len(ordered)):
            a, b = ordered[j], ordered[best]
            if a.cost.total_usd == b.cost.total_usd and a.failures == b.failures and really_faster(a, b):
                best = j
        ordered.insert(i, ordered.pop(best))
    return ordered


