"""The record of ``isocost selfcheck``: what one host's GPU path gave, check by check.

A selfcheck runs on the host itself, before days are rented or a campaign is trusted. Each
:class:`Check` is ``PASS``, ``FAIL`` or ``SKIP``, with its measured figure in one line and, for
``FAIL`` and ``SKIP``, the reason. :class:`SelfcheckReport` is ``selfcheck.json`` (sorted JSON,
``schema_version``); :func:`render_text` is the short text report beside it. Any ``FAIL`` makes the
whole check fail (:func:`exit_code`: 1); a ``SKIP`` never passes for a ``PASS``, and a report with
nothing but skips is no success either (exit status 3).

Tolerances are fixed here, before anything is measured, so the docs can cite them.

History of ``SELFCHECK_SCHEMA_VERSION``: 1 (0.1.0): first version.

Example::

    report = read_record(Path("selfcheck.json"), SelfcheckReport)
    print(render_text(report), end="")
    sys.exit(exit_code(report))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from protocol.records.codec import Schema

SELFCHECK_SCHEMA_VERSION = 1
Verdict = Literal["PASS", "FAIL", "SKIP"]
VERDICTS: tuple[Verdict, ...] = ("PASS", "FAIL", "SKIP")

#: The checks, in the order they run (the order also decides what the budget cuts first: the last ones).
CHECK_NAMES = ("gpu", "timing", "async", "memory", "energy", "warmup", "numerics", "oom", "oom-trial", "compile")

#: Host timer around a synchronised region against CUDA events around the same work: they agree within
#: this share of the host time, or within the absolute margin, whichever is larger.
TIMING_RELATIVE_TOLERANCE = 0.05
TIMING_ABSOLUTE_TOLERANCE_S = 0.002
#: The known workload of the timing check runs at least this long (scaled from one timed run).
TIMING_TARGET_S = 0.2
#: A queued kernel "escapes" a measured region when the region is shorter than this share of the kernel's
#: own device time.
ASYNC_CONTAINED_SHARE = 0.95
#: Labels of fp16/bf16 against fp32, by id: at least this share identical (the demo study's min_agreement).
MIN_PRECISION_AGREEMENT = 0.99
#: The out-of-memory probe: steps of 1/FILL_STEPS_PER_FREE of the free memory, at most FILL_MAX_STEPS of them
#: (twice the free memory: a device that never refuses is reported, never filled for ever).
FILL_STEPS_PER_FREE = 32
FILL_MAX_STEPS = 64
#: The OOM trial: a real device out-of-memory (``runner.trial.faults``) before its second measured batch of
#: OOM_BATCH_SIZE inputs, in a fresh process as a campaign runs it; it must end as an ``oom`` row.
OOM_FAULT = "fill-device-at-batch:1"
OOM_BATCH_SIZE = 4


@dataclass(frozen=True)
class Check:
    """One check's verdict, its figure (one line) and, unless it passed, why."""

    name: str
    verdict: Verdict
    figure: str
    reason: str = ""
    seconds: float | None = None
    #: Raw values behind the figure, units in the names (``host_s``, ``peak_reserved_bytes``).
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if self.verdict != "PASS" and not self.reason:
            raise ValueError(f"check {self.name!r} is {self.verdict} without a reason")


def passed(name: str, figure: str, **details: Any) -> Check:
    return Check(name, "PASS", figure, details=details)


def failed(name: str, figure: str, reason: str, **details: Any) -> Check:
    return Check(name, "FAIL", figure, reason, details=details)


def skipped(name: str, reason: str, figure: str = "", **details: Any) -> Check:
    return Check(name, "SKIP", figure, reason, details=details)


def cut_for_budget(name: str, budget_s: float, needs_s: float, left_s: float) -> Check:
    """The SKIP of a step the budget had no room for, saying so."""
    return skipped(name, f"cut to fit --budget-s {budget_s:g}: needs about {needs_s:.0f} s, {max(left_s, 0):.0f} s "
                         "left", cut=True)


@dataclass(frozen=True)
class SelfcheckReport:
    """``selfcheck.json``: the request, what the host is, and every check so far."""

    device: str  # as run: cuda | rocm | cpu
    requested_device: str  # as asked: auto | cuda | rocm | cpu
    model: dict[str, Any]  # source (given | demo | random), path, what it is
    budget_s: float
    started_at: str
    environment: dict[str, Any] = field(default_factory=dict)  # software, host, device facts, numerics
    checks: tuple[Check, ...] = ()
    ended_at: str = ""
    elapsed_s: float | None = None
    schema_version: int = SELFCHECK_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("selfcheck.json", SELFCHECK_SCHEMA_VERSION)

    def with_check(self, check: Check) -> SelfcheckReport:
        return dataclasses.replace(self, checks=(*self.checks, check))

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)



def counts(report: SelfcheckReport) -> dict[str, int]:
    return {verdict: sum(1 for c in report.checks if c.verdict == verdict) for verdict in VERDICTS}


def overall(report: SelfcheckReport) -> str:
    """``FAIL`` when any check failed; ``SKIP`` when none failed and none passed (nothing was checked);
    else ``PASS`` (the skips are listed beside it, never hidden)."""
    tally = counts(report)
    if tally["FAIL"]:
        return "FAIL"
    return "PASS" if tally["PASS"] else "SKIP"


#: Exit status per overall verdict: 1 on any FAIL; 3 when nothing could be checked (all SKIP).
EXIT_CODES = {"PASS": 0, "FAIL": 1, "SKIP": 3}


def exit_code(report: SelfcheckReport) -> int:
    return EXIT_CODES[overall(report)]


def _gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) else "?"


def describe_environment(report: SelfcheckReport) -> list[str]:
    """The header lines: what ran, on what, with which model."""
    env = report.environment
    software = env.get("software", {})
    device = env.get("device", {})
    model = report.model
    lines = [f"isocost selfcheck: device {report.device} (asked: {report.requested_device}), budget "
             f"{report.budget_s:g} s, started {report.started_at}",
             f"torch {software.get('torch', '?')} ({software.get('torch_build', '?')} build), transformers "
             f"{software.get('transformers', '?')}, python {software.get('python', '?')}"]
    if device.get("gpu_name"):
        lines.append(f"GPU: {device['gpu_name']}, {device.get('gpu_uuid') or 'no UUID'}, "
                     f"{_gib(device.get('gpu_memory_bytes'))}, driver {device.get('driver_version') or '?'}, "
                     f"{device.get('backend')} {device.get('backend_version') or '?'}")
    lines.append(f"model: {model.get('source', '?')}: {model.get('description', '')} ({model.get('path', '')})")
    return lines


def ordered(checks: tuple[Check, ...]) -> list[Check]:
    """The checks in :data:`CHECK_NAMES` order (the host's OOM trial ends after the last in-process check)."""
    rank = {name: i for i, name in enumerate(CHECK_NAMES)}
    return sorted(checks, key=lambda c: rank.get(c.name, len(rank)))


def render_text(report: SelfcheckReport) -> str:
    """The short text report: header, one line per check (reason on the next line), the verdict line."""
    lines = describe_environment(report)
    width = max((len(c.name) for c in report.checks), default=0)
    for c in ordered(report.checks):
        lines.append(f"{c.verdict}  {c.name:<{width}}  {c.figure}".rstrip())
        if c.reason:
            lines.append(f"      {'':<{width}}  {'why' if c.verdict == 'SKIP' else 'reason'}: {c.reason}")
    tally = counts(report)
    elapsed = f" in {report.elapsed_s:.1f} s" if report.elapsed_s is not None else ""
    lines.append(f"{tally['PASS']} PASS, {tally['FAIL']} FAIL, {tally['SKIP']} SKIP{elapsed} (budget "
                 f"{report.budget_s:g} s) -> {overall(report)}")
    return "\n".join(lines) + "\n"
