"""Project the declared job's hours from the measured batches, with a seeded bootstrap over passes.

Pure Python (stdlib only). The method, stated in the memo:

1. **Fit.** Over every batch of a configuration's accepted measured passes
   (``batches.jsonl``, one line per batch), least squares of the batch time
   on a per-batch constant and the tokens per length bucket:
   ``batch_s ≈ s_per_batch + Σ_b s_per_token[b] × tokens[b]``. When that
   system is singular or gives a negative coefficient, the fit drops the
   constant; failing that, one pooled rate (Σ batch_s / Σ tokens) is used;
   the method says which and why. The root-mean-square residual is reported
   beside the mean batch time.
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

Example: ``project(passes, job_inputs=1000, corpora=1, workers=1, mix=None, seed="0:cfg", resamples=200)``.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.errors import UserError

# Version history: 1 = first format (Batch, PassEvidence, Fit, PassCheck, Projection).
SCHEMA_VERSION = 1

BATCHES_FILE = "batches.jsonl"
INTERVAL = (0.025, 0.975)
_SETUP_PHASES = ("imports_s", "load_s", "warmup_s")

ASSUMPTIONS = (
    "time grows linearly with the tokens of each length bucket (the fit), so the job's hours scale with its inputs",
    "the job's inputs per length bucket carry the measured mean tokens per input of that bucket",
    "the lots' cards run in parallel without contention (no multi-card campaign measured it), each worker paying "
    "the measured set-up (imports, load, warm-up) once",
    "the measured passes are a fair sample of the job's passes: the bootstrap resamples them, so it cannot see "
    "conditions they never met (thermal drift over days, other tenants, failures)",
)


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
    s_per_token: tuple[float, ...]
    method: str
    residual_rms_s: float
    mean_batch_s: float
    batches: int
    s_per_batch: float = 0.0  # the per-batch constant (0 when the model has none)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "buckets": list(self.buckets),
            "s_per_batch": self.s_per_batch,
            "s_per_token": dict(zip(self.buckets, self.s_per_token, strict=True)),
            "method": self.method,
            "residual_rms_s": self.residual_rms_s,
            "mean_batch_s": self.mean_batch_s,
            "batches": self.batches,
        }


@dataclass(frozen=True)
class PassCheck:
    """A measured pass against the pass predicted from its own batches by the fit."""

    trial_id: str
    pass_s: float
    predicted_s: float

    @property
    def relative_error(self) -> float:
        return (self.predicted_s - self.pass_s) / self.pass_s if self.pass_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"trial_id": self.trial_id, "pass_s": self.pass_s, "predicted_s": self.predicted_s,
                "relative_error": self.relative_error}


@dataclass(frozen=True)
class Projection:
    """The job's projected wall hours for one configuration, with the bootstrap behind the interval.

    ``samples_h`` holds every resample's job hours, in draw order (not written to JSON: re-derive it from
    the recorded ``seed`` and ``resamples``).
    """

    job_inputs: int
    corpora: int
    workers: int
    shares: tuple[tuple[str, float], ...]
    tokens_per_input: tuple[tuple[str, float], ...]
    fit: Fit
    pass_factor: float
    checks: tuple[PassCheck, ...]
    s_per_input: float
    setup_s: float
    compute_h: float
    job_h: float
    low_h: float
    high_h: float
    seed: str
    resamples: int
    passes: int
    samples_h: tuple[float, ...] = field(repr=False, default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "job_inputs": self.job_inputs,
            "corpora": self.corpora,
            "workers": self.workers,
            "shares": dict(self.shares),
            "tokens_per_input": dict(self.tokens_per_input),
            "fit": self.fit.to_dict(),
            "pass_factor": self.pass_factor,
            "checks": [c.to_dict() for c in self.checks],
            "max_check_error": max((abs(c.relative_error) for c in self.checks), default=None),
            "s_per_input": self.s_per_input,
            "setup_s": self.setup_s,
            "compute_h": self.compute_h,
            "job_h": self.job_h,
            "interval_h": [self.low_h, self.high_h],
            "interval": f"{INTERVAL[0] * 100:g}th–{INTERVAL[1] * 100:g}th percentile of the bootstrap",
            "bootstrap": {"seed": self.seed, "resamples": self.resamples, "over": f"{self.passes} accepted passes",
                          "rng": "Python random.Random(seed), passes drawn with replacement"},
        }


# -- reading ----------------------------------------------------------------------------------


def read_batches(path: Path) -> tuple[Batch, ...]:
    """Read a trial's ``batches.jsonl``; a malformed line is an error naming the file and line.

    Example: a line ``{"index": 0, "n_inputs": 2, "n_tokens": 10, "inputs_by_bucket": {"short": 2},
    "tokens_by_bucket": {"short": 10}, "batch_s": 0.5, "device_s": null}`` gives one :class:`Batch`.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no per-batch record", str(path),
                        "The trial predates batches.jsonl: rerun the campaign to project a job.") from None
    batches = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
            batch = Batch(
                index=_int(data["index"]),
                n_inputs=_int(data["n_inputs"]),
                n_tokens=_int(data["n_tokens"]),
                inputs_by_bucket={str(k): _int(v) for k, v in dict(data["inputs_by_bucket"]).items()},
                tokens_by_bucket={str(k): _int(v) for k, v in dict(data["tokens_by_bucket"]).items()},
                batch_s=_seconds(data["batch_s"]),
                device_s=None if data.get("device_s") is None else _seconds(data["device_s"]),
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise UserError(f"malformed per-batch record ({type(exc).__name__}: {exc})", where,
                            "Restore batches.jsonl from the results bundle.") from None
        batches.append(batch)
    return tuple(batches)


def setup_seconds(status: dict[str, Any]) -> float | None:
    """Imports + load + warm-up from a trial's status.json ``phases`` (``None`` if one is missing).

    Example: ``setup_seconds({"phases": {"imports_s": 2.0, "load_s": 1.0, "warmup_s": 0.5}}) == 3.5``.
    """
    phases = status.get("phases")
    if not isinstance(phases, dict):
        return None
    values = [phases.get(name) for name in _SETUP_PHASES]
    if any(not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0 for v in values):
        return None
    return float(sum(values))  # type: ignore[arg-type]


# -- the fit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Stats:
    """Sufficient statistics of one pass: normal equations (column 0 = the per-batch constant, then one
    column of tokens per bucket), bucket sums, batch count, times."""

    xtx: tuple[tuple[float, ...], ...]
    xty: tuple[float, ...]
    tokens: tuple[float, ...]
    inputs: tuple[float, ...]
    batches: float
    batch_s: float
    pass_s: float


def _pass_stats(p: PassEvidence, buckets: tuple[str, ...]) -> _Stats:
    n = len(buckets) + 1
    xtx = [[0.0] * n for _ in range(n)]
    xty = [0.0] * n
    for batch in p.batches:
        x = [1.0] + [float(batch.tokens_by_bucket.get(b, 0)) for b in buckets]
        for i in range(n):
            xty[i] += x[i] * batch.batch_s
            for j in range(n):
                xtx[i][j] += x[i] * x[j]
    tokens = tuple(float(sum(b.tokens_by_bucket.get(k, 0) for b in p.batches)) for k in buckets)
    inputs = tuple(float(sum(b.inputs_by_bucket.get(k, 0) for b in p.batches)) for k in buckets)
    return _Stats(tuple(tuple(r) for r in xtx), tuple(xty), tokens, inputs, float(len(p.batches)),
                  sum(b.batch_s for b in p.batches), p.pass_s)


def _sum_stats(items: Sequence[_Stats]) -> _Stats:
    n = len(items[0].xty)
    m = len(items[0].tokens)
    return _Stats(
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


def _rates(stats: _Stats, buckets: tuple[str, ...]) -> tuple[float, list[float], str]:
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
    stats = _pass_stats(PassEvidence("", 0.0, None, tuple(batches)), buckets)
    constant, rates, method = _rates(stats, buckets)
    residuals = [b.batch_s - _predict(b, constant, rates, buckets) for b in batches]
    rms = math.sqrt(math.fsum(r * r for r in residuals) / len(residuals)) if residuals else 0.0
    mean = statistics.fmean(b.batch_s for b in batches) if batches else 0.0
    return Fit(buckets, tuple(rates), method, rms, mean, len(batches), constant)


def _predict(batch: Batch, constant: float, rates: Sequence[float], buckets: tuple[str, ...]) -> float:
    return constant + sum(r * batch.tokens_by_bucket.get(k, 0) for r, k in zip(rates, buckets, strict=True))


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
    per_pass = [_pass_stats(p, buckets) for p in passes]
    whole = _sum_stats(per_pass)
    if mix is not None:
        unmeasured = [b for b, share in mix if share > 0 and whole.inputs[buckets.index(b)] == 0]
        if unmeasured:
            raise ValueError(f"the job's mix needs length bucket(s) {', '.join(unmeasured)}, which no measured "
                             "batch held: nothing to extrapolate from")
    setups = [p.setup_s for p in passes if p.setup_s is not None]
    setup = statistics.median(setups) if setups else 0.0

    def job_hours(stats: _Stats, setup_s: float) -> tuple[float, float, list[float], float, dict[str, float],
                                                            dict[str, float]]:
        constant, rates, _ = _rates(stats, buckets)
        factor = stats.pass_s / stats.batch_s if stats.batch_s else 1.0
        total_inputs = sum(stats.inputs)
        shares = dict(mix) if mix is not None else {b: stats.inputs[i] / total_inputs for i, b in enumerate(buckets)}
        per_token = {b: (stats.tokens[i] / stats.inputs[i] if stats.inputs[i] else 0.0)
                     for i, b in enumerate(buckets)}
        # the per-batch constant spread over the measured inputs per batch (the variant's batch size)
        per_batch = constant * stats.batches / total_inputs if total_inputs else 0.0
        s_input = factor * (per_batch + sum(shares.get(b, 0.0) * per_token[b] * rates[i]
                                            for i, b in enumerate(buckets)))
        compute_s = job_inputs * corpora * s_input
        return (compute_s / workers + setup_s) / 3600, s_input, rates, factor, shares, per_token

    job_h, s_input, _rates_point, factor, shares, per_token = job_hours(whole, setup)
    fit = fit_batches([b for p in passes for b in p.batches], buckets)
    checks = tuple(
        PassCheck(p.trial_id, p.pass_s,
                  factor * sum(_predict(batch, fit.s_per_batch, fit.s_per_token, buckets) for batch in p.batches))
        for p in passes)

    rng = random.Random(seed)
    samples = []
    n = len(passes)
    for _ in range(resamples):
        picks = [rng.randrange(n) for _ in range(n)]
        stats = _sum_stats([per_pass[i] for i in picks])
        picked_setups = [s for s in (passes[i].setup_s for i in picks) if s is not None]
        samples.append(job_hours(stats, statistics.median(picked_setups) if picked_setups else 0.0)[0])
    ordered = sorted(samples)
    return Projection(
        job_inputs=job_inputs, corpora=corpora, workers=workers,
        shares=tuple((b, shares.get(b, 0.0)) for b in buckets),
        tokens_per_input=tuple((b, per_token[b]) for b in buckets),
        fit=fit, pass_factor=factor, checks=checks, s_per_input=s_input, setup_s=setup,
        compute_h=job_inputs * corpora * s_input / 3600, job_h=job_h,
        low_h=percentile(ordered, INTERVAL[0]), high_h=percentile(ordered, INTERVAL[1]),
        seed=seed, resamples=resamples, passes=n, samples_h=tuple(samples),
    )


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of sorted values. Example: ``percentile([1, 2, 3, 4], 0.5) == 2.5``."""
    if not ordered:
        raise ValueError("no values")
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"expected seconds >= 0, got {value!r}")
    return float(value)


# -- what decide reads per trial --------------------------------------------------------------


@dataclass(frozen=True)
class TrialRecord:
    """Per-trial files beyond raw.csv: the per-batch record, set-up phases, energy counters.

    ``batches`` is ``None`` with ``batches_reason`` when the trial wrote no ``batches.jsonl``.
    """

    batches: tuple[Batch, ...] | None
    batches_reason: str = ""
    setup_s: float | None = None
    gpu_energy_j: float | None = None
    cpu_energy_j: float | None = None
    gpu_energy_reason: str = "status.json records no gpu_energy_j"
    cpu_energy_reason: str = "status.json records no cpu_energy_j"


def energy_fields(status: dict[str, Any]) -> dict[str, Any]:
    """The energy counters of a trial's status.json, each ``None`` with its reason when not a count of joules.

    Example: ``energy_fields({"gpu_energy_j": None, "gpu_energy_reason": "CPU trial"})["gpu_energy_reason"]``
    is ``"CPU trial"``.
    """
    energy: dict[str, Any] = {}
    for kind in ("gpu", "cpu"):
        value = status.get(f"{kind}_energy_j")
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        energy[f"{kind}_energy_j"] = float(value) if ok and value is not None else None
        reason = str(status.get(f"{kind}_energy_reason") or "")
        if not ok:
            reason = reason or (f"status.json records no {kind}_energy_j" if value is None
                                else f"status.json {kind}_energy_j is not a count of joules: {value!r}")
        energy[f"{kind}_energy_reason"] = "" if ok else reason
    return energy


def trial_record(trial_dir: Path, status: dict[str, Any]) -> TrialRecord:
    """Read one trial's ``batches.jsonl`` and the set-up and energy fields of its status.json."""
    path = trial_dir / BATCHES_FILE
    batches: tuple[Batch, ...] | None = read_batches(path) if path.exists() else None
    return TrialRecord(
        batches=batches,
        batches_reason="" if batches is not None else f"no {BATCHES_FILE} in {trial_dir} (the trial predates it)",
        setup_s=setup_seconds(status),
        **energy_fields(status),
    )


def energy_figures(records: Sequence[TrialRecord], corpus_inputs: int, corpus_inputs_job: int | None) -> \
        dict[str, Any]:
    """Joules per input and per validated corpus, GPU and CPU apart; empty with the reason when unread.

    The median over the accepted passes' counters, divided by the corpus's inputs; per validated corpus
    of the job when one is declared (``corpus_inputs_job`` inputs, linear), else of the measured corpus.
    Never money: shown beside the cost, never in it.

    Example: passes of 100 J and 120 J over 10 inputs: ``gpu_j_per_input == 11.0``.
    """
    size = corpus_inputs_job if corpus_inputs_job is not None else corpus_inputs
    figures: dict[str, Any] = {"per_corpus_inputs": size}
    for kind in ("gpu", "cpu"):
        values = [getattr(r, f"{kind}_energy_j") for r in records]
        known = [v for v in values if v is not None]
        if known and len(known) == len(values) and corpus_inputs > 0:
            per_input = statistics.median(known) / corpus_inputs
            figures[f"{kind}_j_per_input"] = per_input
            figures[f"{kind}_j_per_validated_corpus"] = per_input * size
            figures[f"{kind}_reason"] = ""
        else:
            reasons = sorted({getattr(r, f"{kind}_energy_reason") for r in records} - {""})
            figures[f"{kind}_j_per_input"] = None
            figures[f"{kind}_j_per_validated_corpus"] = None
            figures[f"{kind}_reason"] = "; ".join(reasons) or "no accepted pass"
    return figures
