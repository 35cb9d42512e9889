"""Project the declared job's hours from the measured batches, with a seeded bootstrap over passes.

Pure Python (stdlib only). The method, stated in the memo:

1. **Fit.** Over every batch of a configuration's accepted measured passes
   (``batches.jsonl``, one line per batch), least squares of the batch time
   on a per-batch constant and the tokens per length bucket (and, for a text-generation pass, the
   generated tokens: input and output tokens are fitted apart):
   ``batch_s ≈ s_per_batch + Σ_b s_per_token[b] × tokens[b]``. When that
   system is singular or gives a negative coefficient, the fit drops the
   constant; failing that, one pooled rate (Σ batch_s / Σ tokens) is used;
   the method says which and why. The root-mean-square residual is reported
   beside the mean batch time (:mod:`protocol.costing.batch_fit`).
2. **Whole-pass check.** The time of a pass outside its batches (reading,
   tokenizing, writing) is carried by the factor ``Σ pass_s / Σ batch_s``;
   each pass is then predicted from its own batches and compared with its
   measured ``pass_s`` (relative error per pass).
3. **The job.** Seconds per input = factor × (s_per_batch ÷ measured inputs
   per batch + Σ_b share[b] × tokens per input[b] × s_per_token[b]), where
   share is the job's declared mix (or the corpus's own) and tokens per input
   the measured mean in that bucket (the job runs at the variant's batch size).
   Compute seconds = inputs × corpora × seconds per input, spread over the
   workers (lots × cards per lot) without contention, plus the measured
   per-trial set-up (imports, load, warm-up: median over the passes) once per
   worker.
4. **Uncertainty.** A bootstrap over passes (sample the accepted passes with
   replacement, refit, re-project), seeded and recorded; the interval is the
   2.5th–97.5th percentile of the resampled job hours.

Refused (no projection, the reason given): zero accepted passes, any failed
attempt of the variant, a pass without its per-batch record, or a job mix
that needs a length bucket no measured batch held.

The per-trial files the passes come from are read by :mod:`protocol.costing.trial_files`.

Example: ``project(passes, job_inputs=1000, corpora=1, workers=1, mix=None, seed="0:cfg", resamples=200)``.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from protocol.costing.batch_fit import (
    GENERATED,
    SCHEMA_VERSION,
    Fit,
    PassEvidence,
    PassStats,
    fit_batches,
    fit_rates,
    pass_stats,
    predict_batch,
    sum_stats,
)
from protocol.records.codec import Convert, Schema, options

INTERVAL = (0.025, 0.975)

ASSUMPTIONS = (
    "time grows linearly with the tokens of each length bucket (the fit), so the job's hours scale with its inputs",
    "the job's inputs per length bucket carry the measured mean tokens per input of that bucket",
    "the lots' cards run in parallel without contention (no multi-card campaign measured it), each worker paying "
    "the measured set-up (imports, load, warm-up) once",
    "the measured passes are a fair sample of the job's passes: the bootstrap resamples them, so it cannot see "
    "conditions they never met (thermal drift over days, other tenants, failures)",
)


@dataclass(frozen=True)
class PassCheck:
    """A measured pass against the pass predicted from its own batches by the fit."""

    trial_id: str
    pass_s: float
    predicted_s: float
    CODEC: ClassVar[Schema] = Schema("pass check", derived=("relative_error",))

    @property
    def relative_error(self) -> float:
        return (self.predicted_s - self.pass_s) / self.pass_s if self.pass_s else 0.0


#: Pairs (bucket, figure) written as one JSON object.
_BY_NAME = options(convert=Convert(dict, lambda data: tuple((str(k), float(v)) for k, v in data.items()),
                                   "a JSON object of numbers"))
#: Written inside ``interval_h`` and ``bootstrap`` (see ``Projection.CODEC``), or not at all.
_GROUPED = options(written=False)


def _projection_extra(projection: Projection) -> dict[str, Any]:
    """The figures decision.json shows beside a projection's fields, grouped as readers expect."""
    return {
        "max_check_error": max((abs(c.relative_error) for c in projection.checks), default=None),
        "interval_h": [projection.low_h, projection.high_h],
        "interval": f"{INTERVAL[0] * 100:g}th–{INTERVAL[1] * 100:g}th percentile of the bootstrap",
        "bootstrap": {"seed": projection.seed, "resamples": projection.resamples,
                      "over": f"{projection.passes} accepted passes",
                      "rng": "Python random.Random(seed), passes drawn with replacement"},
    }


@dataclass(frozen=True)
class Projection:
    """The job's projected wall hours for one configuration, with the bootstrap behind the interval.

    ``samples_h`` holds every resample's job hours, in draw order (not written to JSON: re-derive it from
    the recorded ``seed`` and ``resamples``).
    """

    job_inputs: int
    corpora: int
    workers: int
    shares: tuple[tuple[str, float], ...] = field(metadata=_BY_NAME)
    tokens_per_input: tuple[tuple[str, float], ...] = field(metadata=_BY_NAME)
    fit: Fit
    pass_factor: float
    checks: tuple[PassCheck, ...]
    s_per_input: float
    setup_s: float
    compute_h: float
    job_h: float
    low_h: float = field(metadata=_GROUPED)
    high_h: float = field(metadata=_GROUPED)
    seed: str = field(metadata=_GROUPED)
    resamples: int = field(metadata=_GROUPED)
    passes: int = field(metadata=_GROUPED)
    samples_h: tuple[float, ...] = field(repr=False, default=(), metadata=_GROUPED)
    #: Measured mean tokens generated per input (a text-generation job), for the cost per million tokens.
    generated_per_input: float | None = None
    CODEC: ClassVar[Schema] = Schema("projection", SCHEMA_VERSION, extra=_projection_extra)



# -- reading ----------------------------------------------------------------------------------


# -- the fit ----------------------------------------------------------------------------------


# -- the projection ---------------------------------------------------------------------------


def refusal(accepted: int, failures: int, statuses: dict[str, int], equivalent: bool | None) -> str:
    """Why a configuration is not extrapolated (``""`` when it may be).

    Example: ``refusal(0, 0, {}, True)`` is ``"zero accepted passes: nothing to extrapolate from"``.
    """
    if accepted == 0:
        return "zero accepted passes: nothing to extrapolate from"
    if failures:
        shown = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()) if s != "ok") or f"{failures} rejected"
        return (f"the variant failed {failures} of its attempts ({shown}): a variant that failed on any bucket "
                "is not extrapolated to a larger job")
    if equivalent is not True:
        return "quality not shown equivalent to the reference: its hours would price an unaccepted result"
    return ""


def project(
    passes: Sequence[PassEvidence],
    *,
    job_inputs: int,
    corpora: int,
    workers: int,
    mix: tuple[tuple[str, float], ...] | None,
    seed: str,
    resamples: int,
) -> Projection:
    """Project the job's wall hours from ``passes`` (accepted, each with its batches).

    Raises ``ValueError`` with the reason when the passes cannot support a projection (no
    batches, a mix bucket never measured); the caller shows it as the configuration's reason.
    """
    if not passes:
        raise ValueError("zero accepted passes: nothing to extrapolate from")
    empty = [p.trial_id for p in passes if not p.batches]
    if empty:
        raise ValueError(f"no per-batch record for trial(s) {', '.join(empty)}")
    buckets = tuple(sorted({b for p in passes for batch in p.batches for b in batch.inputs_by_bucket}
                           | {b for b, _ in (mix or ())}))
    generates = any(batch.generated_tokens is not None for p in passes for batch in p.batches)
    buckets += (GENERATED,) if generates else ()  # a generation's output tokens: one more column of the fit
    per_pass = [pass_stats(p, buckets) for p in passes]
    whole = sum_stats(per_pass)
    if mix is not None:
        unmeasured = [b for b, share in mix if share > 0 and whole.inputs[buckets.index(b)] == 0]
        if unmeasured:
            raise ValueError(f"the job's mix needs length bucket(s) {', '.join(unmeasured)}, which no measured "
                             "batch held: nothing to extrapolate from")
    job = _Job(buckets, mix, job_inputs, corpora, workers)
    setup = _median_setup(passes)
    point = _job_hours(whole, setup, job)
    fit = fit_batches([b for p in passes for b in p.batches], buckets)
    checks = tuple(
        PassCheck(p.trial_id, p.pass_s, point.factor * sum(
            predict_batch(batch, fit.s_per_batch, fit.s_per_token, buckets) for batch in p.batches))
        for p in passes)
    samples = _bootstrap(passes, per_pass, job, seed, resamples)
    ordered = sorted(samples)
    return Projection(
        job_inputs=job_inputs, corpora=corpora, workers=workers,
        shares=tuple((b, point.shares.get(b, 0.0)) for b in buckets),
        tokens_per_input=tuple((b, point.per_token[b]) for b in buckets),
        fit=fit, pass_factor=point.factor, checks=checks, s_per_input=point.s_input, setup_s=setup,
        compute_h=job_inputs * corpora * point.s_input / 3600, job_h=point.job_h,
        low_h=percentile(ordered, INTERVAL[0]), high_h=percentile(ordered, INTERVAL[1]),
        seed=seed, resamples=resamples, passes=len(passes), samples_h=tuple(samples),
        generated_per_input=point.per_token[GENERATED] if generates else None,
    )


@dataclass(frozen=True)
class _Job:
    """What is projected: the length buckets, the declared mix (``None``: the corpus's own), the size, workers."""

    buckets: tuple[str, ...]
    mix: tuple[tuple[str, float], ...] | None
    job_inputs: int
    corpora: int
    workers: int


@dataclass(frozen=True)
class _Estimate:
    """One projection of the job from one set of pass statistics (the point, or one bootstrap resample)."""

    job_h: float
    s_input: float
    factor: float
    shares: dict[str, float]
    per_token: dict[str, float]


def _job_hours(stats: PassStats, setup_s: float, job: _Job) -> _Estimate:
    """Step 3 of the module doc: seconds per input from the fit, × inputs × corpora over the workers, + set-up."""
    buckets = job.buckets
    constant, rates, _ = fit_rates(stats, buckets)
    factor = stats.pass_s / stats.batch_s if stats.batch_s else 1.0
    total_inputs = sum(stats.inputs)
    shares = (dict(job.mix) if job.mix is not None
              else {b: stats.inputs[i] / total_inputs for i, b in enumerate(buckets)})
    per_token = {b: (stats.tokens[i] / stats.inputs[i] if stats.inputs[i] else 0.0) for i, b in enumerate(buckets)}
    if GENERATED in buckets:  # every input generates: the measured mean per input, whatever its length bucket
        shares = {**shares, GENERATED: 1.0}
        per_token[GENERATED] = stats.tokens[buckets.index(GENERATED)] / total_inputs if total_inputs else 0.0
    # the per-batch constant spread over the measured inputs per batch (the variant's batch size)
    per_batch = constant * stats.batches / total_inputs if total_inputs else 0.0
    s_input = factor * (per_batch + sum(shares.get(b, 0.0) * per_token[b] * rates[i] for i, b in enumerate(buckets)))
    compute_s = job.job_inputs * job.corpora * s_input
    return _Estimate((compute_s / job.workers + setup_s) / 3600, s_input, factor, shares, per_token)


def _median_setup(passes: Sequence[PassEvidence]) -> float:
    setups = [p.setup_s for p in passes if p.setup_s is not None]
    return statistics.median(setups) if setups else 0.0


def _bootstrap(
    passes: Sequence[PassEvidence], per_pass: Sequence[PassStats], job: _Job, seed: str, resamples: int,
) -> list[float]:
    """Step 4: the job hours of each resample (passes drawn with replacement, refitted), in draw order."""
    rng = random.Random(seed)
    samples = []
    n = len(passes)
    for _ in range(resamples):
        picks = [rng.randrange(n) for _ in range(n)]
        stats = sum_stats([per_pass[i] for i in picks])
        samples.append(_job_hours(stats, _median_setup([passes[i] for i in picks]), job).job_h)
    return samples


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of sorted values. Example: ``percentile([1, 2, 3, 4], 0.5) == 2.5``."""
    if not ordered:
        raise ValueError("no values")
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


# -- what decide reads per trial --------------------------------------------------------------


