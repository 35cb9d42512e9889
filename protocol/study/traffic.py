"""The ``[traffic]`` table of a serving study (issue 36): the requests a serving run sends, declared before it runs.

A serving study (``scenario = "server"``: :mod:`protocol.study.load` reads this table then; docs/serving.md) measures a
configuration under requests that arrive while others run, as MLPerf LoadGen's Server scenario sends them. This
module is the table's rule and record, pure and standalone: :func:`parse_traffic` reads it from a
:class:`~protocol.study.reader.TableReader` into a frozen :class:`Traffic` (on the codec, ``schema_version`` 1).

Keys (declared in :data:`TRAFFIC_KEYS`, in the rows of :mod:`protocol.study.keys`; the study schema,
:mod:`protocol.study.schema`, declares the ``traffic`` table itself, as it declares ``engines``, and docs/serving.md
lists these keys):

- ``arrivals``: ``"poisson"`` (LoadGen's Server rule: Poisson arrivals at the target rate, from a seeded RNG) or
  ``"trace"`` (the arrival times of ``trace``: a text file, one time in seconds from the start per line, sorted,
  non-negative, finite);
- ``rate_qps`` (one target rate) or ``rates_qps`` (a series, one run each), queries per second, each positive,
  finite and at most :data:`MAX_RATE_QPS`; a series rises strictly (each rate once, lowest first: a
  configuration's capacity is the highest rate of its ladder that meets the bound, and a list out of order is
  most likely a slip), and each configuration of the study runs once per rate (its variant's ``rate_qps``);
- ``min_query_count``, ``min_duration_s``, ``max_duration_s``: the run's length (LoadGen runs until both minimums
  are met, and stops at the maximum);
- the latency bound of the task: ``latency_bound_ms`` at ``latency_percentile`` (classification, embeddings;
  default 0.99), or ``ttft_bound_ms`` and ``tpot_bound_ms`` at ``ttft_percentile`` and ``tpot_percentile``
  (generation: time to first token and time per output token, MLPerf's LLM server rule);
- ``seed``: LoadGen's schedule, sample-index and library seeds;
- ``max_wait_ms``: the dynamic batcher's longest wait for more queries (its largest batch is the variant's
  ``batch_size``);
- ``max_batches_in_flight``: batches the system under test runs at once (default 1, each batch waits for the one
  before; more only for an engine that runs batches concurrently, checked by :mod:`protocol.study.load`).

**The query count rule.** A run decides a percentile bound only if enough queries were measured: when every one
of ``n`` queries is under the bound, the chance of that happening although a share ``1 - p`` of queries is over it
is ``p**n``; the bound is shown at confidence ``c`` once ``p**n <= 1 - c``. :func:`queries_needed` is the least such
``n``: 459 for p99 at :data:`CONFIDENCE` 0.99, the figure LoadGen's own early stopping asks for (50 queries
measured, "would need to run at least 409 more"). A smaller ``min_query_count`` is refused with the number.

Example::

    [traffic]
    arrivals = "poisson"
    rates_qps = [1.0, 2.0]
    min_query_count = 500
    min_duration_s = 30
    max_duration_s = 600
    latency_bound_ms = 200
    seed = 7

    traffic = parse_traffic(TableReader("study.toml", data["traffic"], "traffic."), "text-classification")
    traffic.rates_qps, traffic.queries_needed        # (1.0, 2.0), 459
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from protocol.errors import UserError
from protocol.io.safe_read import read_bytes
from protocol.records.codec import Schema, options
from protocol.records.domains import Domain
from protocol.study.keys import Bounds, StudyKey, key_rows
from protocol.study.reader import KIND_TYPES, TableReader, checked_type, within_bounds

#: The confidence a percentile bound is shown at: LoadGen's early stopping's (99 %).
CONFIDENCE = 0.99
#: The highest target rate a run may declare, in queries per second: LoadGen 6.0.17 scheduled and completed
#: 10,000 qps against an empty in-process system under test on this project's 2-core VM (p99 5.5 ms, VALID);
#: at 50,000 qps its p99 was 10.7 ms and the run INVALID (2026-12-03; docs/serving.md).
MAX_RATE_QPS = 10_000.0
#: The largest trace file read (bytes): ten million arrival times of about 16 characters.
MAX_TRACE_BYTES = 160 * 2**20
ARRIVALS = ("poisson", "trace")
#: What a serving trial writes besides the task's own outputs and the host seals with them (``outputs_sha256``):
#: the harness's answers and per-query times, LoadGen's summary and detail logs (runner/trial/serving/).
SERVING_FILES = ("answers.jsonl", "queries.jsonl", "mlperf_log_summary.txt", "mlperf_log_detail.txt")
#: The Python modules a server study's trial imports beside its engine's (``Engine.requires``): MLPerf LoadGen's
#: binding, from the ``serving`` extra (``mlcommons-loadgen``, pinned in pyproject.toml). The process launcher asks
#: each trial interpreter for them before anything runs, and ``isocost check`` reports the same (one place: here).
SERVING_REQUIRES = ("mlperf_loadgen",)
#: How to install them into an interpreter that lacks them.
SERVING_INSTALL = ("make setup installs the serving extra (mlcommons-loadgen) into .venv, make vllm into .venv-vllm; "
                   "another interpreter needs pip install 'isocost[serving]' (or '.[serving]' in this checkout)")
#: The tasks whose bound is on the whole answer; any other (text-generation) is bounded per token.
WHOLE_ANSWER_TASKS = ("text-classification", "sentence-embedding")
#: The most batches a serving run may have in flight at once (each is a thread of the trial and its requests).
MAX_IN_FLIGHT = 256
_WEEK_S, _HOUR_MS = 7 * 86400, 3_600_000
_PERCENT = Bounds(0, 1, low_open=True, high_open=True)

TRAFFIC_KEYS: dict[str, StudyKey] = {entry.key: entry for entry in key_rows(
    ("traffic.arrivals", "string", '"poisson"', None,
     '"poisson" (LoadGen\'s Server rule: Poisson arrivals at the target rate) or "trace" (recorded arrival times)'),
    ("traffic.rate_qps", "number", "required with poisson (or rates_qps)", Bounds(0, MAX_RATE_QPS, low_open=True),
     "target rate, queries per second"),
    ("traffic.rates_qps", "array", "required with poisson (or rate_qps)", None,
     "a series of target rates, queries per second, rising strictly (each as rate_qps): each configuration runs "
     "once per rate, as its own variant"),
    ("traffic.trace", "string", "required with trace", None,
     "arrival times: a text file, one time in seconds from the start per line, sorted; relative to the study"),
    ("traffic.min_query_count", "integer", "required", Bounds(1, 100_000_000),
     "queries a run measures at least: enough for each declared percentile to be decidable (459 for p99)"),
    ("traffic.min_duration_s", "number", "0", Bounds(0, _WEEK_S), "seconds a run lasts at least"),
    ("traffic.max_duration_s", "number", "none: no limit", Bounds(0, _WEEK_S, low_open=True),
     "seconds after which a run stops, whatever it measured"),
    ("traffic.latency_bound_ms", "number", "required (classification, embeddings)", Bounds(0, _HOUR_MS, low_open=True),
     "latency bound of one query, milliseconds"),
    ("traffic.latency_percentile", "number", "0.99", _PERCENT, "share of queries that must meet latency_bound_ms"),
    ("traffic.ttft_bound_ms", "number", "required (generation)", Bounds(0, _HOUR_MS, low_open=True),
     "time to first token bound, milliseconds"),
    ("traffic.ttft_percentile", "number", "0.99", _PERCENT, "share of queries that must meet ttft_bound_ms"),
    ("traffic.tpot_bound_ms", "number", "required (generation)", Bounds(0, _HOUR_MS, low_open=True),
     "time per output token bound, milliseconds"),
    ("traffic.tpot_percentile", "number", "0.99", _PERCENT,
     "share of queries that must meet tpot_bound_ms (LoadGen applies one percentile: equal to ttft_percentile)"),
    ("traffic.seed", "integer", "0", Bounds(0, 2**64 - 1), "LoadGen's schedule, sample-index and library seed"),
    ("traffic.max_wait_ms", "number", "5", Bounds(0, 60_000),
     "the dynamic batcher's longest wait for more queries after a batch's first one, milliseconds (the largest "
     "batch is the variant's batch_size)"),
    ("traffic.max_batches_in_flight", "integer", "1", Bounds(1, MAX_IN_FLIGHT),
     "batches the system under test runs at once: 1, each batch waits for the one before; more, each batch goes to "
     "the engine as soon as it forms (an engine that batches continuously: engine vllm with server = true)"),
)}


@dataclass(frozen=True)
class LatencyBound:
    """One bound: ``measure`` (``latency`` of a whole answer, ``ttft`` or ``tpot``) within ``bound_ms`` for a share
    ``percentile`` of the queries. Example: ``LatencyBound("latency", 200.0, 0.99).queries_needed == 459``."""

    measure: Literal["latency", "ttft", "tpot"]
    bound_ms: float
    percentile: float

    @property
    def queries_needed(self) -> int:
        return queries_needed(self.percentile)


@dataclass(frozen=True)
class TraceFile:
    """A trace of arrival times, checked when the table was read: its path (as the study gives it), sha256, how
    many arrivals and the time of the last one."""

    path: str
    sha256: str
    queries: int
    span_s: float


@dataclass(frozen=True)
class Traffic:
    """A validated ``[traffic]`` table (:func:`parse_traffic`). ``rates_qps`` is empty for a trace."""

    arrivals: Literal["poisson", "trace"]
    rates_qps: tuple[float, ...]
    trace: TraceFile | None
    min_query_count: int
    min_duration_s: float
    max_duration_s: float | None
    bounds: tuple[LatencyBound, ...]
    seed: int = field(metadata=options(domain=Domain(0, 2**64 - 1, "a 64-bit unsigned seed")))
    #: The dynamic batcher's longest wait after a batch's first query (its largest batch: the variant's batch_size).
    max_wait_ms: float = 5.0
    #: Batches run at once (1: in turn; more: only an engine that runs batches concurrently, ``Engine.concurrent``).
    max_batches_in_flight: int = 1
    CODEC: ClassVar[Schema] = Schema("traffic", version=1, derived=("queries_needed",))

    @property
    def queries_needed(self) -> int:
        """The least query count that decides every declared percentile (:func:`queries_needed`)."""
        return max(bound.queries_needed for bound in self.bounds)

    def bound(self, measure: str) -> LatencyBound | None:
        return next((b for b in self.bounds if b.measure == measure), None)


def key_table() -> str:
    """The key table of docs/serving.md (as docs/study.md's: key, type, default, bounds, meaning)."""
    lines = ["| key | type | required / default | bounds | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{k.key}` | {k.kind} | {k.default} | {k.bounds.words() if k.bounds else ''} | {k.meaning} |"
              for k in TRAFFIC_KEYS.values()]
    return "\n".join(lines)


def queries_needed(percentile: float, confidence: float = CONFIDENCE) -> int:
    """The least ``n`` with ``percentile**n <= 1 - confidence``: how many queries, all under the bound, show at
    ``confidence`` that the ``percentile`` of the latency is under it.

    Example: ``queries_needed(0.99) == 459``; ``queries_needed(0.9) == 44``; ``queries_needed(0.5) == 7``.
    """
    if not 0 < percentile < 1 or not 0 < confidence < 1:
        raise ValueError(f"percentile {percentile!r} and confidence {confidence!r} must lie in (0, 1)")
    target = 1 - confidence
    n = max(1, math.ceil(math.log(target) / math.log(percentile)))
    while percentile ** n > target:  # the logarithms rounded down
        n += 1
    while n > 1 and percentile ** (n - 1) <= target:  # or up
        n -= 1
    return n


def parse_traffic(reader: TableReader, task: str, base_dir: Path | None = None) -> Traffic:
    """The ``[traffic]`` table of a study of ``task`` (``reader``: a TableReader with prefix ``"traffic."``), every
    rule checked, each error naming the key and the fix; ``base_dir``: where a relative trace path starts (default:
    the study file's folder).

    Example: ``parse_traffic(TableReader("s.toml", {"rate_qps": 0, …}, "traffic."), "text-classification")``
    raises ``UserError("rate_qps must be between 0 (excluded) and 10000, got 0 (s.toml, key traffic.rate_qps) …")``.
    """
    reader.used.update(key.removeprefix("traffic.") for key in TRAFFIC_KEYS)
    reader.finish()
    arrivals = reader.choice("arrivals", ARRIVALS, TRAFFIC_KEYS["traffic.arrivals"].value)
    bounds = _bounds(reader, task)
    min_count = _declared(reader, "min_query_count")
    _check_count(reader, min_count, bounds)
    min_duration, max_duration = _declared(reader, "min_duration_s"), _declared(reader, "max_duration_s")
    if max_duration is not None and max_duration < min_duration:
        raise UserError(f"max_duration_s = {max_duration:g} is shorter than min_duration_s = {min_duration:g}",
                        reader.where("max_duration_s"), "Make max_duration_s at least min_duration_s, or remove it.")
    rates: tuple[float, ...] = ()
    trace = None
    if arrivals == "poisson":
        rates = _rates(reader)
        _check_length(reader, min_count, min(rates), max_duration)
        _check_busiest(reader, max(rates), min_duration)
    else:
        trace = _trace(reader, min_count, base_dir if base_dir is not None else Path(reader.source).parent)
    return Traffic(arrivals="trace" if trace else "poisson", rates_qps=rates, trace=trace, min_query_count=min_count,
                   min_duration_s=min_duration, max_duration_s=max_duration, bounds=bounds,
                   seed=_declared(reader, "seed"), max_wait_ms=_declared(reader, "max_wait_ms"),
                   max_batches_in_flight=_declared(reader, "max_batches_in_flight"))


def _declared(reader: TableReader, key: str, fix: str = "") -> Any:
    """``key`` as :data:`TRAFFIC_KEYS` declares it: of its kind, finite, within its bounds; its default when absent
    (None for a default in words, "missing required key" for a required one)."""
    entry = TRAFFIC_KEYS[f"traffic.{key}"]
    default = ... if entry.default.startswith("required") else entry.value
    value = reader.get(key, KIND_TYPES[entry.kind], default, fix)
    return None if value is None else _checked(entry, value, reader.where(key), fix)


def _checked(entry: StudyKey, value: Any, where: str, fix: str = "", shown: str = "") -> Any:
    value = checked_type(value, KIND_TYPES[entry.kind], where, fix)
    if entry.kind == "number":
        if not math.isfinite(value):
            raise UserError(f"expected a finite number, got {value!r}", where, fix or f"Use {entry.meaning}.")
        value = float(value)
    return within_bounds(entry, value, where, shown or entry.key.removeprefix("traffic."))


def _bounds(reader: TableReader, task: str) -> tuple[LatencyBound, ...]:
    if task in WHOLE_ANSWER_TASKS:
        _refuse(reader, ("ttft_bound_ms", "ttft_percentile", "tpot_bound_ms", "tpot_percentile"),
                f"a {task} answer is bounded as a whole", "latency_bound_ms and latency_percentile")
        return (LatencyBound("latency", _declared(reader, "latency_bound_ms"),
                             _declared(reader, "latency_percentile")),)
    _refuse(reader, ("latency_bound_ms", "latency_percentile"), f"a {task} answer is bounded per token",
            "ttft_bound_ms, tpot_bound_ms and their percentiles")
    ttft = LatencyBound("ttft", _declared(reader, "ttft_bound_ms"), _declared(reader, "ttft_percentile"))
    tpot = LatencyBound("tpot", _declared(reader, "tpot_bound_ms"), _declared(reader, "tpot_percentile"))
    if ttft.percentile != tpot.percentile:
        raise UserError(f"tpot_percentile {tpot.percentile:g} differs from ttft_percentile {ttft.percentile:g}",
                        reader.where("tpot_percentile"),
                        "LoadGen judges time to first token and time per output token at one percentile "
                        "(server_target_latency_percentile): declare the same share for both.")
    return ttft, tpot


def _refuse(reader: TableReader, keys: tuple[str, ...], why: str, instead: str) -> None:
    for key in keys:
        if key in reader.table:
            raise UserError(f"{key} does not apply: {why}", reader.where(key), f"Remove it; declare {instead}.")


def _check_count(reader: TableReader, min_count: int, bounds: tuple[LatencyBound, ...]) -> None:
    for bound in bounds:
        needed = bound.queries_needed
        if min_count < needed:
            share = f"{bound.percentile:g}"
            raise UserError(
                f"min_query_count = {min_count} cannot decide the {bound.measure} bound at percentile {share}: "
                f"at least {needed} queries are needed", reader.where("min_query_count"),
                f"Set min_query_count = {needed} or more: only when all of n queries meet the bound is a "
                f"{share} percentile shown at {CONFIDENCE:g} confidence, and that needs {share}^n <= "
                f"{1 - CONFIDENCE:g}, first true at n = {needed} (LoadGen's early stopping asks the same); "
                f"or declare a lower percentile.")


def _rates(reader: TableReader) -> tuple[float, ...]:
    given = [key for key in ("rate_qps", "rates_qps") if key in reader.table]
    if len(given) != 1:
        raise UserError("give rate_qps or rates_qps, not both" if given else "the target rate is missing",
                        reader.where(given[-1] if given else "rate_qps"),
                        "With arrivals = \"poisson\" declare one target rate (rate_qps = 2.0) or a series "
                        "(rates_qps = [1.0, 2.0]), in queries per second.")
    if given == ["rate_qps"]:
        return (_declared(reader, "rate_qps"),)
    values = _declared(reader, "rates_qps")
    if not values:
        raise UserError("rates_qps is empty", reader.where("rates_qps"), "Give at least one rate, e.g. [2.0].")
    entry = TRAFFIC_KEYS["traffic.rate_qps"]
    rates = tuple(_checked(entry, value, f"{reader.where('rates_qps')}[{i}]", shown=f"rates_qps[{i}]")
                  for i, value in enumerate(values))
    for place in range(1, len(rates)):
        if rates[place] <= rates[place - 1]:
            said = "repeats" if rates[place] == rates[place - 1] else "is below"
            raise UserError(f"rates_qps[{place}] = {rates[place]:g} {said} the rate before it ({rates[place - 1]:g}): "
                            "a series of rates rises strictly", f"{reader.where('rates_qps')}[{place}]",
                            "List each rate once, from lowest to highest (rates_qps = [2.0, 4.0, 8.0]): a "
                            "configuration's capacity is the highest rate of the series that meets the bound.")
    return rates


def _check_busiest(reader: TableReader, highest_qps: float, min_duration: float) -> None:
    """``min_duration_s`` holds a run at every rate: at the highest one it issues ``rate × min_duration_s`` queries,
    at most what ``min_query_count`` may ask (its bound)."""
    most = TRAFFIC_KEYS["traffic.min_query_count"].bounds
    assert most is not None
    queries = highest_qps * min_duration
    if queries <= most.high:
        return
    raise UserError(
        f"at {highest_qps:g} queries per second, min_duration_s = {min_duration:g} makes a run of about "
        f"{queries:.0f} queries, more than a run may hold ({most.high:.0f})", reader.where("min_duration_s"),
        f"Allow at most {math.floor(most.high / highest_qps)} s at the highest rate (a run's queries / the "
        "highest rate), or lower the highest rate.")


def _check_length(reader: TableReader, min_count: int, lowest_qps: float, max_duration: float | None) -> None:
    if max_duration is None or min_count / lowest_qps <= max_duration:
        return
    raise UserError(
        f"at {lowest_qps:g} queries per second, max_duration_s = {max_duration:g} stops a run after about "
        f"{lowest_qps * max_duration:.0f} queries, fewer than min_query_count = {min_count}",
        reader.where("max_duration_s"),
        f"Allow at least {math.ceil(min_count / lowest_qps)} s (min_query_count / the lowest rate), or raise the "
        f"rate.")


def _trace(reader: TableReader, min_count: int, base_dir: Path) -> TraceFile:
    _refuse(reader, ("rate_qps", "rates_qps"), "a trace gives its own arrival times", "the trace only")
    where = reader.where("trace")
    path = reader.get("trace", str, fix='Add `trace = "arrivals.txt"`: one arrival time in seconds per line.')
    if "\x00" in path or not path.strip():
        raise UserError("a path must be non-empty and contain no NUL byte", where)
    data = read_bytes(base_dir / path, "trace file", max_bytes=MAX_TRACE_BYTES,
                      fix="Name a text file of arrival times, one per line.")
    times = trace_times(data, where)
    if len(times) < min_count:
        raise UserError(f"the trace holds {len(times)} arrivals, fewer than min_query_count = {min_count}", where,
                        "Record a longer trace, or (if the percentile allows) a smaller min_query_count.")
    return TraceFile(path=path, sha256="sha256:" + hashlib.sha256(data).hexdigest(), queries=len(times),
                     span_s=times[-1])


def trace_times(data: bytes, where: str) -> tuple[float, ...]:
    """The arrival times of a trace file: one number of seconds from the start per line (blank lines skipped),
    each finite, non-negative and not before the one above it.

    Example: ``trace_times(b"0\\n0.5\\n1.25\\n", "t.txt") == (0.0, 0.5, 1.25)``; ``b"1\\n0.5\\n"`` is refused.
    """
    fix = "Write one arrival time per line, in seconds from the start, sorted, e.g. 0.0, 0.41, 0.93."
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise UserError("the trace file is not UTF-8 text", where, fix) from None
    times: list[float] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = float(line)
        except ValueError:
            raise UserError(f"line {number} is not a number: {line[:40]!r}", where, fix) from None
        if not math.isfinite(value) or value < 0:
            raise UserError(f"line {number}: an arrival time must be finite and not negative, got {line.strip()}",
                            where, fix)
        if times and value < times[-1]:
            raise UserError(f"line {number}: {value:g} s comes before the arrival above it ({times[-1]:g} s): "
                            "the trace is not sorted", where, fix)
        times.append(value)
    if not times:
        raise UserError("the trace file holds no arrival time", where, fix)
    return tuple(times)
