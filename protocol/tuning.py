"""The quality rule proposed from a measurement on the tuning split (``isocost tune``).

The rule, stated once and printed with every proposal: with ``m`` the metric of
the reference variant on the ``n`` tuning inputs and ``se`` its binomial
standard error ``sqrt(m(1-m)/n)`` (at least ``1/n``, so a perfect score still
has a margin):

- ``minimum`` = m − 2·se, rounded down to 0.01 (kept in [0, 1]);
- ``max_metric_drop`` = se, rounded up to 0.01;
- ``min_agreement`` = 1 − 2·se, rounded down to 0.01 (kept in [0, 1]).

Subgroups (label, length bucket) are measured too and shown; a subgroup whose
own metric is already below the proposed minimum is flagged, never hidden.

Example::

    propose(0.9, 100).minimum  # 0.84
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RULE = ("minimum = m − 2·se (rounded down to 0.01), max_metric_drop = se (rounded up to 0.01), "
        "min_agreement = 1 − 2·se (rounded down to 0.01); m = the reference variant's metric on the tuning "
        "split, se = sqrt(m(1−m)/n), at least 1/n")


@dataclass(frozen=True)
class Proposal:
    metric_value: float
    n: int
    se: float
    minimum: float
    max_metric_drop: float
    min_agreement: float


def _down(value: float) -> float:
    return max(0.0, min(1.0, math.floor(value * 100 + 1e-9) / 100))


def _up(value: float) -> float:
    return max(0.01, math.ceil(value * 100 - 1e-9) / 100)


def propose(metric_value: float, n: int) -> Proposal:
    if n < 1:
        raise ValueError("n must be positive")
    se = max(math.sqrt(metric_value * (1 - metric_value) / n), 1 / n)
    return Proposal(metric_value=metric_value, n=n, se=se, minimum=_down(metric_value - 2 * se),
                    max_metric_drop=_up(se), min_agreement=_down(1 - 2 * se))
