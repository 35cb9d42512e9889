"""The fit behind a job projection: batch time against a per-batch constant and the tokens per length bucket.

Least squares over every batch of the accepted measured passes
(``batch_s ≈ s_per_batch + Σ_b s_per_token[b] × tokens[b]``, plus, for a text-generation pass, a rate per
generated token: the column :data:`GENERATED`), solved from
per-pass sufficient statistics (:class:`PassStats`) so a bootstrap resample
only sums them again. When the system is singular or gives a negative
coefficient the constant is dropped; failing that, one pooled rate is used;
the method says which and why (:func:`fit_rates`). The projection itself is
:mod:`protocol.costing.projection`.

Example: batches of 10 short tokens in 1 s and 20 long tokens in 4 s:
``fit_batches(batches, ("short", "long")).s_per_token == (0.1, 0.2)``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from protocol.records.codec import Schema, options

# Version history: 1 = first format (Batch, PassEvidence, Fit, PassCheck, Projection).
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Batch:
    """One line of ``batches.jsonl`` (the per-batch record a trial writes for its measured pass)."""

    index: int
    n_inputs: int
    n_tokens: int
    inputs_by_bucket: dict[str, int]
    tokens_by_bucket: dict[str, int]
    batch_s: float
    device_s: float | None = None
    #: Tokens the batch generated (a text-generation pass; None for a task that generates none).
    generated_tokens: int | None = None


#: The fit's column of generated tokens (a text-generation pass): a name no length bucket can take.
GENERATED = "generated tokens"


def batch_tokens(batch: Batch, bucket: str) -> int:
    """The batch's tokens of one column: a length bucket's input tokens, or the generated tokens."""
    if bucket == GENERATED:
        return batch.generated_tokens or 0
    return batch.tokens_by_bucket.get(bucket, 0)


@dataclass(frozen=True)
class PassEvidence:
    """One accepted measured pass: its whole time, its set-up phases and its batches."""

    trial_id: str
    pass_s: float
    setup_s: float | None
    batches: tuple[Batch, ...]


@dataclass(frozen=True)
class Fit:
    """Seconds per token per length bucket, how they were found, and the residual."""

    buckets: tuple[str, ...]
    s_per_token: tuple[float, ...] = field(metadata=options(written=False))  # written by bucket name
    method: str
    residual_rms_s: float
    mean_batch_s: float
    batches: int
    s_per_batch: float = 0.0  # the per-batch constant (0 when the model has none)
    CODEC: ClassVar[Schema] = Schema("fit", SCHEMA_VERSION, extra=lambda fit: {
        "s_per_token": dict(zip(fit.buckets, fit.s_per_token, strict=True))})



@dataclass(frozen=True)
class PassStats:
    """Sufficient statistics of one pass: normal equations (column 0 = the per-batch constant, then one
    column of tokens per bucket), bucket sums, batch count, times."""

    xtx: tuple[tuple[float, ...], ...]
    xty: tuple[float, ...]
    tokens: tuple[float, ...]
    inputs: tuple[float, ...]
    batches: float
    batch_s: float
    pass_s: float


def pass_stats(p: PassEvidence, buckets: tuple[str, ...]) -> PassStats:
    """The sufficient statistics of one pass over ``buckets`` (a bootstrap sums them per resample)."""
    n = len(buckets) + 1
    xtx = [[0.0] * n for _ in range(n)]
    xty = [0.0] * n
    for batch in p.batches:
        x = [1.0] + [float(batch_tokens(batch, b)) for b in buckets]
        for i in range(n):
            xty[i] += x[i] * batch.batch_s
            for j in range(n):
                xtx[i][j] += x[i] * x[j]
    tokens = tuple(float(sum(batch_tokens(b, k) for b in p.batches)) for k in buckets)
    inputs = tuple(float(sum(b.inputs_by_bucket.get(k, 0) for b in p.batches)) for k in buckets)  # GENERATED: 0
    return PassStats(tuple(tuple(r) for r in xtx), tuple(xty), tokens, inputs, float(len(p.batches)),
                  sum(b.batch_s for b in p.batches), p.pass_s)


def sum_stats(items: Sequence[PassStats]) -> PassStats:
    """The statistics of several passes together (element-wise sums)."""
    n = len(items[0].xty)
    m = len(items[0].tokens)
    return PassStats(
        tuple(tuple(sum(s.xtx[i][j] for s in items) for j in range(n)) for i in range(n)),
        tuple(sum(s.xty[i] for s in items) for i in range(n)),
        tuple(sum(s.tokens[i] for s in items) for i in range(m)),
        tuple(sum(s.inputs[i] for s in items) for i in range(m)),
        sum(s.batches for s in items),
        sum(s.batch_s for s in items),
        sum(s.pass_s for s in items),
    )


def solve(matrix: Sequence[Sequence[float]], rhs: Sequence[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; ``None`` when the system is singular.

    Example: ``solve([[2, 0], [0, 4]], [2, 8]) == [1.0, 2.0]``.
    """
    n = len(rhs)
    a = [[float(v) for v in row] + [float(rhs[i])] for i, row in enumerate(matrix)]
    scale = max((abs(v) for row in matrix for v in row), default=0.0)
    if scale == 0.0:
        return None
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) <= 1e-9 * scale:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, n):
            f = a[r][col] / a[col][col]
            for c in range(col, n + 1):
                a[r][c] -= f * a[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (a[r][n] - sum(a[r][c] * x[c] for c in range(r + 1, n))) / a[r][r]
    return x


_WITH_CONSTANT = "least squares of batch time on a per-batch constant and the tokens per length bucket"


_NO_CONSTANT = "least squares of batch time on the tokens per length bucket (no per-batch constant"


def fit_rates(stats: PassStats, buckets: tuple[str, ...]) -> tuple[float, list[float], str]:
    """(seconds per batch, seconds per token per bucket, method): the richest model that is solvable with no
    negative coefficient; else one pooled rate, with the reason."""
    measured = [i for i in range(len(buckets)) if stats.tokens[i] > 0]
    total_tokens = sum(stats.tokens)
    pooled = stats.batch_s / total_tokens if total_tokens else 0.0
    tolerance = 1e-9 * max(stats.batch_s, 1e-12)

    def fit(columns: list[int]) -> tuple[list[float] | None, str]:
        sub = solve([[stats.xtx[i][j] for j in columns] for i in columns], [stats.xty[i] for i in columns])
        if sub is None:
            return None, "singular"
        if any(v < -tolerance for v in sub):
            return None, "a negative coefficient"
        return [max(v, 0.0) for v in sub], ""

    reasons: list[str] = []
    for columns, method in (([0] + [i + 1 for i in measured], _WITH_CONSTANT),
                            ([i + 1 for i in measured], _NO_CONSTANT)):
        if len(columns) < 2 and method == _NO_CONSTANT:
            break
        solved, why = fit(columns)
        if solved is not None:
            constant = solved[0] if columns[0] == 0 else 0.0
            rates = [0.0] * len(buckets)
            for value, column in zip(solved[1:] if columns[0] == 0 else solved,
                                     columns[1:] if columns[0] == 0 else columns, strict=True):
                rates[column - 1] = value
            note = f": with the constant it was {reasons[0]})" if reasons else ")"
            return constant, rates, method + (note if method == _NO_CONSTANT else "")
        reasons.append(why)
    if len(measured) <= 1 and not reasons[1:]:
        return 0.0, [pooled] * len(buckets), ("one rate, Σ batch_s / Σ tokens (the batches held one length bucket "
                                              f"and the fit with a per-batch constant was {reasons[0]})")
    return 0.0, [pooled] * len(buckets), (f"one pooled rate, Σ batch_s / Σ tokens: the per-bucket fits were "
                                          f"{' / '.join(reasons)} (batches too alike in their bucket mix)")


def fit_batches(batches: Sequence[Batch], buckets: tuple[str, ...]) -> Fit:
    """The least-squares fit over ``batches`` (see the module doc), with its residual.

    Example: batches of 10 short tokens in 1 s and 20 long tokens in 4 s fit ``s_per_token == (0.1, 0.2)``.
    """
    stats = pass_stats(PassEvidence("", 0.0, None, tuple(batches)), buckets)
    constant, rates, method = fit_rates(stats, buckets)
    residuals = [b.batch_s - predict_batch(b, constant, rates, buckets) for b in batches]
    rms = math.sqrt(math.fsum(r * r for r in residuals) / len(residuals)) if residuals else 0.0
    mean = statistics.fmean(b.batch_s for b in batches) if batches else 0.0
    return Fit(buckets, tuple(rates), method, rms, mean, len(batches), constant)


def predict_batch(batch: Batch, constant: float, rates: Sequence[float], buckets: tuple[str, ...]) -> float:
    """The fit's batch time: ``constant + Σ rate × tokens`` per bucket."""
    return constant + sum(r * batch_tokens(batch, k) for r, k in zip(rates, buckets, strict=True))


