"""LoadGen's own logs read back: ``mlperf_log_summary.txt`` as a frozen record, ``mlperf_log_trace.json``'s
per-query times.

:func:`parse_summary` reads the summary LoadGen 6.0.17 writes (checked against real runs of it: VALID, INVALID by
early stopping, token latencies) into :class:`LoadgenSummary` (on the codec, ``schema_version`` 1): the verdict
(``Result is : VALID|INVALID``) with each of its conditions (performance constraints, minimum duration, minimum
queries, early stopping), the early-stopping lines and how many more queries it asks for, the scheduled and
completed rates, the latency percentiles and, where the run measured tokens, the first-token and per-output-token
percentiles (nanoseconds, as LoadGen writes them) and the test parameters it used. A summary without its verdict
line is refused (:class:`~protocol.errors.UserError`): a run cut short wrote none.

:func:`trace_samples` reads LoadGen's per-sample times from its trace (each ``Sample`` begin event: the scheduled
time, and the issue and completion offsets from it), LoadGen's own view beside the harness's ``queries.jsonl``.

Example::

    summary = parse_summary(out / "mlperf_log_summary.txt")
    summary.valid, summary.early_stopping_met, summary.latency_ns["99.00"]     # False, False, 64211287
    summary.more_queries_needed                                               # 409
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from protocol.errors import UserError
from protocol.io.safe_read import read_text
from protocol.records.codec import Schema

SUMMARY_FILE = "mlperf_log_summary.txt"
DETAIL_FILE = "mlperf_log_detail.txt"
ACCURACY_FILE = "mlperf_log_accuracy.json"
TRACE_FILE = "mlperf_log_trace.json"
#: The LoadGen logs a serving run keeps (the trace too: it holds LoadGen's per-query times).
LOG_FILES = (SUMMARY_FILE, DETAIL_FILE, ACCURACY_FILE, TRACE_FILE)
_MAX_SUMMARY_BYTES = 2**20
_MAX_TRACE_BYTES = 2**31
_FIX = "Keep LoadGen's mlperf_log_summary.txt as it wrote it; re-run the serving run if it was cut short."

_FLAGS = {"Performance constraints satisfied": "performance_constraints_met",
          "Min duration satisfied": "min_duration_met", "Min queries satisfied": "min_queries_met",
          "Early stopping satisfied": "early_stopping_met"}
_RATES = {"Completed samples per second": "completed_qps", "Scheduled samples per second": "scheduled_qps",
          "Completed tokens per second": "completed_tokens_per_second"}
#: The three distributions: line pattern → the record's field (min/max/mean and each percentile).
_DISTRIBUTIONS = (
    (re.compile(r"^(Min|Max|Mean) latency \(ns\)$"), "latency_ns"),
    (re.compile(r"^([\d.]+) percentile latency \(ns\)$"), "latency_ns"),
    (re.compile(r"^(Min|Max|Mean) First Token latency \(ns\)$"), "first_token_ns"),
    (re.compile(r"^([\d.]+) percentile first token latency \(ns\)$"), "first_token_ns"),
    (re.compile(r"^(Min|Max|Mean) Time per Output Token \(ns\)$"), "tpot_ns"),
    (re.compile(r"^([\d.]+) percentile time to output token \(ns\)$"), "tpot_ns"),
)
_MORE = re.compile(r"Would need to run at least (\d+) more queries")
_PROCESSED = re.compile(r"Processed (\d+) queries")
_SAMPLE = re.compile(r'"name":"Sample".*"ph":"b".*"ts":([\d.]+).*"sample_seq":(\d+).*"sample_idx":(\d+),'
                     r'"issue_start_ns":(\d+),"complete_ns":(\d+)')


@dataclass(frozen=True)
class LoadgenSummary:
    """``mlperf_log_summary.txt`` as a record. Distributions are keyed ``min``, ``max``, ``mean`` and the
    percentile as LoadGen writes it (``"99.00"``), in nanoseconds; empty where the run measured none."""

    scenario: str
    mode: str
    valid: bool
    performance_constraints_met: bool | None
    min_duration_met: bool | None
    min_queries_met: bool | None
    early_stopping_met: bool | None
    early_stopping: tuple[str, ...]
    queries_processed: int | None
    more_queries_needed: int | None
    completed_qps: float | None
    scheduled_qps: float | None
    completed_tokens_per_second: float | None
    latency_ns: dict[str, int]
    first_token_ns: dict[str, int]
    tpot_ns: dict[str, int]
    parameters: dict[str, str]
    warnings: bool
    errors: bool
    CODEC: ClassVar[Schema] = Schema("loadgen_summary", version=1)

    def percentile_ms(self, distribution: str, percentile: float) -> float | None:
        """``percentile`` (0.99) of ``latency``, ``first_token`` or ``tpot`` in ms; None when not reported.

        Example: ``summary.percentile_ms("latency", 0.99)``."""
        values: dict[str, int] = getattr(self, f"{distribution}_ns")
        value = values.get(f"{percentile * 100:.2f}")
        return None if value is None else value / 1e6


@dataclass(frozen=True)
class TraceSample:
    """One sample in LoadGen's trace: its sequence number, sample index, and times in ns from the test start."""

    sample_seq: int
    sample_index: int
    scheduled_ns: int
    issued_ns: int
    completed_ns: int


def parse_summary(path: Path) -> LoadgenSummary:
    """``mlperf_log_summary.txt`` (:class:`LoadgenSummary`); a UserError when it holds no verdict."""
    return summary_from_text(read_text(path, "LoadGen summary", max_bytes=_MAX_SUMMARY_BYTES), str(path))


def summary_from_text(text: str, where: str) -> LoadgenSummary:
    fields: dict[str, str] = {}
    flags: dict[str, bool] = {}
    rates: dict[str, float] = {}
    distributions: dict[str, dict[str, int]] = {"latency_ns": {}, "first_token_ns": {}, "tpot_ns": {}}
    parameters: dict[str, str] = {}
    in_parameters = False
    for raw in text.splitlines():
        line = raw.strip()
        if line == "Test Parameters Used":
            in_parameters = True
        key, sep, value = (part.strip() for part in line.partition(":"))
        if not sep or not key:
            continue
        if in_parameters:
            parameters[key] = value
        elif key in _FLAGS:
            flags[_FLAGS[key]] = value.lower() == "yes"
        elif key in _RATES:
            rates.setdefault(_RATES[key], _number(value, key, where))
        elif key in ("SUT name", "Scenario", "Mode", "Result is"):
            fields[key] = value
        else:
            _distribution(key, value, distributions, where)
    if fields.get("Result is") not in ("VALID", "INVALID"):
        raise UserError("the LoadGen summary holds no 'Result is : VALID|INVALID' line", where, _FIX)
    return LoadgenSummary(
        scenario=fields.get("Scenario", ""), mode=fields.get("Mode", ""), valid=fields["Result is"] == "VALID",
        performance_constraints_met=flags.get("performance_constraints_met"),
        min_duration_met=flags.get("min_duration_met"), min_queries_met=flags.get("min_queries_met"),
        early_stopping_met=flags.get("early_stopping_met"), early_stopping=_early_stopping(text),
        queries_processed=_last_int(_PROCESSED, text), more_queries_needed=_last_int(_MORE, text),
        completed_qps=rates.get("completed_qps"), scheduled_qps=rates.get("scheduled_qps"),
        completed_tokens_per_second=rates.get("completed_tokens_per_second"), parameters=parameters,
        warnings="No warnings encountered during test." not in text,
        errors="No errors encountered during test." not in text, **distributions)


def _number(value: str, key: str, where: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UserError(f"{key!r} is not a number: {value!r}", where, _FIX) from None


def _distribution(key: str, value: str, distributions: dict[str, dict[str, int]], where: str) -> None:
    for pattern, name in _DISTRIBUTIONS:
        match = pattern.match(key)
        if match:
            label = match.group(1).lower() if match.group(1).isalpha() else match.group(1)
            distributions[name][label] = int(_number(value, key, where))
            return


def _early_stopping(text: str) -> tuple[str, ...]:
    """The lines under each ``… Early Stopping Result:`` heading, up to the next blank line or heading."""
    found: list[str] = []
    taking = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("Early Stopping Result:"):
            taking = True
            found.append(line)
        elif taking and (not line or line.startswith("=")):
            taking = False
        elif taking:
            found.append(line)
    return tuple(found)


def _last_int(pattern: re.Pattern[str], text: str) -> int | None:
    values = [int(match) for match in pattern.findall(text.replace("\n", " "))]
    return max(values) if values else None


def trace_samples(path: Path) -> list[TraceSample]:
    """Each sample's times from LoadGen's ``mlperf_log_trace.json`` (read by line: LoadGen writes it one event a
    line, and not always strict JSON), in trace order."""
    text = read_text(path, "LoadGen trace", max_bytes=_MAX_TRACE_BYTES)
    samples = []
    for line in text.splitlines():
        if '"name":"Sample"' not in line or '"ph":"b"' not in line:
            continue
        match = _SAMPLE.search(line)
        if match is None:
            raise UserError(f"a Sample event of an unknown shape: {line[:120]!r}", str(path), _FIX)
        scheduled = round(float(match.group(1)) * 1000)
        samples.append(TraceSample(sample_seq=int(match.group(2)), sample_index=int(match.group(3)),
                                   scheduled_ns=scheduled, issued_ns=scheduled + int(match.group(4)),
                                   completed_ns=scheduled + int(match.group(5))))
    return samples
