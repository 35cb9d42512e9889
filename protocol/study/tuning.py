"""The quality rule proposed from a measurement on the tuning split (``isocost tune``).

The rule, stated once and printed with every proposal: with ``m`` the metric of
the reference variant on the ``n`` tuning inputs and ``se`` its standard error
(at least ``1/n``, so a perfect score still has a margin): binomial,
``sqrt(m(1-m)/n)``, for a metric that is a share of inputs (accuracy); for any
other metric (macro-F1, retrieval scores), the standard deviation of the metric
over a seeded bootstrap of the tuning inputs (:func:`bootstrap_standard_error`,
1000 resamples, ``random.Random(0)``, recorded with the proposal):

- ``minimum`` = m − 2·se, rounded down to 0.01 (kept in [0, 1]);
- ``max_metric_drop`` = se, rounded up to 0.01;
- ``min_agreement`` = 1 − 2·se, rounded down to 0.01 (kept in [0, 1]).

Subgroups (label, length bucket) are measured too and shown; a subgroup whose
own metric is already below the proposed minimum is flagged, never hidden.

A tuning split too small for the rule is refused, never turned into a rule that
accepts anything (one input gives se = 1: minimum 0, max_metric_drop 1,
min_agreement 0). The rule needs ``se ≤ MAX_SE`` (0.1: min_agreement at least
0.8, max_metric_drop at most 0.1). Since ``se ≥ 1/n``, that takes
``n ≥ 1/MAX_SE`` = 10 inputs whatever the metric (:data:`MIN_TUNING_INPUTS`,
checked before anything runs), and ``n ≥ m(1−m)/MAX_SE²`` for the metric
measured (:func:`inputs_needed`; 25 at worst, for m = 0.5).

Example::

    propose(0.9, 100).minimum  # 0.84
    inputs_needed(0.5)         # 25
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.errors import UserError

RULE = ("minimum = m − 2·se (rounded down to 0.01), max_metric_drop = se (rounded up to 0.01), "
        "min_agreement = 1 − 2·se (rounded down to 0.01); m = the reference variant's metric on the tuning "
        "split, se = sqrt(m(1−m)/n) for a share of inputs (accuracy), a seeded bootstrap for other metrics, "
        "at least 1/n")

#: The largest standard error a proposed rule may rest on: min_agreement ≥ 1 − 2·MAX_SE, max_metric_drop ≤ MAX_SE.
MAX_SE = 0.1
#: se ≥ 1/n, so fewer inputs than this can never meet MAX_SE, whatever the metric.
MIN_TUNING_INPUTS = math.ceil(1 / MAX_SE - 1e-9)
#: The inputs needed in the worst case (m = 0.5).
WORST_CASE_INPUTS = math.ceil(0.25 / MAX_SE**2 - 1e-9)
SIZE_RULE = (f"Why: the rule needs se = sqrt(m(1−m)/n), at least 1/n, to be at most {MAX_SE} (so min_agreement "
             f"≥ {1 - 2 * MAX_SE:.1f} and max_metric_drop ≤ {MAX_SE}): n ≥ 1/{MAX_SE} = {MIN_TUNING_INPUTS} whatever "
             f"the metric, and n ≥ m(1−m)/{MAX_SE}² for the metric m measured ({WORST_CASE_INPUTS} at worst, m = 0.5).")


#: A metric that is not a share of inputs (macro-F1, retrieval scores) gets its standard error from a seeded
#: bootstrap over the tuning inputs: this many resamples, this seed (recorded with the proposal).
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Proposal:
    metric_value: float
    n: int
    se: float
    minimum: float
    max_metric_drop: float
    min_agreement: float
    se_method: str = "binomial: sqrt(m(1−m)/n), at least 1/n"


def _down(value: float) -> float:
    return max(0.0, min(1.0, math.floor(value * 100 + 1e-9) / 100))


def _up(value: float) -> float:
    return max(0.01, math.ceil(value * 100 - 1e-9) / 100)


def standard_error(metric_value: float, n: int) -> float:
    """``sqrt(m(1−m)/n)``, at least ``1/n``. Example: ``standard_error(0.9, 100) == 0.03`` (about)."""
    return max(math.sqrt(max(metric_value * (1 - metric_value), 0.0) / n), 1 / n)


def inputs_needed(metric_value: float) -> int:
    """The fewest tuning inputs whose ``se`` is at most :data:`MAX_SE` for this metric value.

    Example: ``inputs_needed(1.0) == 10`` (the 1/n floor), ``inputs_needed(0.5) == 25``.
    """
    variance = max(metric_value * (1 - metric_value), 0.0)
    return max(MIN_TUNING_INPUTS, math.ceil(variance / MAX_SE**2 - 1e-9))


def check_tuning_size(n: int, where: str, metric: str = "", metric_value: float | None = None,
                      se: float | None = None) -> None:
    """Refuse a tuning split too small for the rule, naming the size it needs (before and after the run)."""
    fix = ("Add inputs to the tuning split (never from the final corpus), update [tuning] fingerprint "
           f"(`isocost fingerprint PATH`) and tune again. {SIZE_RULE}")
    if metric_value is None:
        if n < MIN_TUNING_INPUTS:
            raise UserError(f"the tuning split has {n} input(s), too few for the quality rule: it needs at least "
                            f"{MIN_TUNING_INPUTS} whatever the metric, up to {WORST_CASE_INPUTS} for a metric of 0.5",
                            where, fix)
        return
    binomial = se is None
    se = standard_error(metric_value, n) if se is None else se
    if se > MAX_SE + 1e-12:
        needed = inputs_needed(metric_value) if binomial else math.ceil(n * (se / MAX_SE) ** 2)
        raise UserError(f"{metric or 'the metric'} {metric_value:.4f} on {n} tuning input(s) has se {se:.4f} > "
                        f"{MAX_SE}: the rule would rest on too little; this metric needs at least {needed} inputs",
                        where, fix)


def bootstrap_standard_error(score: Callable[[Sequence[int]], float], n: int, *, seed: int = BOOTSTRAP_SEED,
                             resamples: int = BOOTSTRAP_RESAMPLES) -> float:
    """The standard deviation of ``score`` over ``resamples`` resamples (with replacement) of the ``n`` inputs'
    indices, drawn with ``random.Random(seed)``; at least ``1/n`` like the binomial one.

    Example: ``bootstrap_standard_error(lambda idx: mean(values[i] for i in idx), len(values))``.
    """
    if n < 1:
        raise ValueError("n must be positive")
    rng = random.Random(seed)
    scores = [score([rng.randrange(n) for _ in range(n)]) for _ in range(resamples)]
    return max(statistics.pstdev(scores), 1 / n)


def bootstrap_method(seed: int = BOOTSTRAP_SEED, resamples: int = BOOTSTRAP_RESAMPLES) -> str:
    return f"seeded bootstrap over the tuning inputs: {resamples} resamples, random.Random({seed}), at least 1/n"


def propose(metric_value: float, n: int, se: float | None = None, se_method: str = "") -> Proposal:
    """The rule from a metric and its standard error (default: binomial, for a metric that is a share)."""
    if n < 1:
        raise ValueError("n must be positive")
    if se is None:
        se = standard_error(metric_value, n)
    return Proposal(metric_value=metric_value, n=n, se=se, minimum=_down(metric_value - 2 * se),
                    max_metric_drop=_up(se), min_agreement=_down(1 - 2 * se),
                    **({"se_method": se_method} if se_method else {}))
