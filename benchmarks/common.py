"""Shared pieces of the benchmarks: the machine description, interleaving, medians, results.

Every figure keeps its raw samples; the table shows medians with the spread (min–max).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: Results file format. History: 1 (0.1.0): first version.
RESULTS_SCHEMA_VERSION = 1


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- the machine --------------------------------------------------------------------------------


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _git_revision() -> str | None:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True,
                               check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "")


def machine_facts() -> dict[str, Any]:
    """What the figures were measured on, read now (load average at the start included)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    memory = _memory_bytes()
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpu_count_logical": os.cpu_count(),
        "cpu_affinity_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": memory,
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "tokenizers": _version("tokenizers"),
        "pandas": _version("pandas"),
        "docker_sdk": _version("docker"),
        "isocost_revision": _git_revision(),
        "load_average_at_start": list(load) if load else None,
    }


def load_average() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


# -- figures ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """Median, min and max of raw samples (no percentile from a handful of runs)."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.low, "max": self.high, "n": len(self.samples),
                "samples": list(self.samples)}


@dataclass
class Row:
    """One line of the table; ``measured`` empty means not measured, and ``reason`` says why."""

    key: str
    title: str
    measured: str = ""
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "measured": self.measured, "baseline": self.baseline,
                "ratio": self.ratio, "target": self.target, "met": self.met, "reason": self.reason,
                "details": self.details}


def interleaved(pairs: int, first: Callable[[], float], second: Callable[[], float],
                between: Callable[[], None] | None = None) -> tuple[list[float], list[float]]:
    """Run A and B ``pairs`` times in ABBA order (A B, B A, A B, …) so drift hits both alike."""
    a_samples: list[float] = []
    b_samples: list[float] = []
    for index in range(pairs):
        order = ((first, a_samples), (second, b_samples))
        if index % 2:
            order = order[::-1]
        for run, sink in order:
            sink.append(run())
            if between is not None:
                between()
    return a_samples, b_samples


def ratio_spread(numerators: Sequence[float], denominators: Sequence[float]) -> Spread:
    """Per-pair ratios: each pair ran back to back, so the ratio cancels most machine drift."""
    return Spread(tuple(n / d for n, d in zip(numerators, denominators, strict=True)))


def paired_verdict(pairs: Sequence[dict[str, Any]], same_key: str, what: str,
                   target: float) -> tuple[list[float], list[float], Spread, bool | None, str]:
    """The runner's and the bare loop's ``pass_s`` of ``pairs``, bare/runner per pair and its verdict against
    ``target``: refused when a pair's ``same_key`` is false (the two sides' ``what`` differ)."""
    runner_s, bare_s = [p["runner_pass_s"] for p in pairs], [p["bare_s"] for p in pairs]
    ratio = ratio_spread(bare_s, runner_s)
    met, why = judge(ratio, target, higher_is_better=True)
    if not all(p[same_key] for p in pairs):
        met, why = False, f"the bare loop's {what} differ from the runner's: not the same work"
    return runner_s, bare_s, ratio, met, why


def median_interval(samples: tuple[float, ...]) -> tuple[float, float, float]:
    """A distribution-free ~95 % confidence interval for the median: (low, high, confidence).

    Order statistics x(k) and x(n-k+1), k the largest with P(Binomial(n, 1/2) < k) ≤ 2.5 %. With
    fewer than 6 samples no such k exists, and the interval is min–max (its confidence is shown).
    """
    ordered = sorted(samples)
    n = len(ordered)

    def below(k: int) -> float:  # P(Binomial(n, 1/2) <= k - 1)
        return sum(math.comb(n, i) for i in range(k)) / 2**n

    k = 1
    while k + 1 <= n // 2 and below(k + 1) <= 0.025:
        k += 1
    return ordered[k - 1], ordered[n - k], 1 - 2 * below(k)


def judge(spread: Spread, target: float, higher_is_better: bool) -> tuple[bool | None, str]:
    """Met, missed, or None ("cannot discriminate") when the median's interval straddles the target.

    The same spirit as the summary's rule for pass times (SPEC R6): when the run's own spread is as
    wide as the difference it should show, say so, and how to tighten it.
    """
    low, high, confidence = median_interval(spread.samples)
    good = (lambda x: x >= target) if higher_is_better else (lambda x: x <= target)
    if good(low) and good(high):
        return True, ""
    if not good(low) and not good(high):
        return False, ""
    met = good(spread.median)
    return None, (f"cannot discriminate: the median's {confidence * 100:.0f} % interval [{low:.3f}, {high:.3f}] "
                  f"(n = {len(spread.samples)}) straddles the target {target:g}; the median alone says "
                  f"{'met' if met else 'missed'}. Rerun with more pairs or on a quieter machine")


def fmt_s(spread: Spread, digits: int = 3) -> str:
    return f"{spread.median:.{digits}f} s [{spread.low:.{digits}f}–{spread.high:.{digits}f}]"


def fmt_ratio(spread: Spread, digits: int = 3) -> str:
    return f"{spread.median:.{digits}f} [{spread.low:.{digits}f}–{spread.high:.{digits}f}]"


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def runner_pass(spec: Any, trial_dir: Path) -> Any:
    """The runner's side of a pair: a new ``Trial`` in ``trial_dir``, its manifest and torch settings, ``run()``."""
    from runner.trial.run import Trial

    trial_dir.mkdir()
    trial = Trial(spec, trial_dir)
    trial.base_manifest()
    trial.setup_torch()
    trial.run()
    return trial


def classified(trial_dir: Path) -> list[tuple[str, str, float]]:
    """(id, label, score) of each line of a classification trial's ``predictions.jsonl``."""
    lines = (trial_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return [(d["id"], d["label"], d["score"]) for d in map(json.loads, lines)]


def worker_result(command: Sequence[str], result_path: Path, env: dict[str, str],
                  timeout_s: float | None) -> tuple[Any, str]:
    """Run a benchmark's worker process (in its own session, from the checkout) and read the JSON it leaves at
    ``result_path``: (the result, "") or (None, why not). Past ``timeout_s`` the worker's whole process group is
    killed, as on any interruption (a vLLM worker's engine processes are in it: none may outlive the benchmark)."""
    worker = subprocess.Popen(list(command), env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        stdout, stderr = worker.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(worker)
        return None, f"the worker ran past the time budget ({timeout_s:.0f} s) and was stopped"
    except BaseException:  # Ctrl-C: its own session would not get the signal
        stop_group(worker)
        raise
    if worker.returncode != 0 or not result_path.exists():
        tail = (stderr or stdout).strip().splitlines()[-5:]
        return None, f"the worker failed (exit {worker.returncode}): {' | '.join(tail)}"
    return json.loads(result_path.read_text(encoding="utf-8")), ""


def stop_group(worker: subprocess.Popen[str]) -> None:
    """SIGKILL the worker's whole session (it leads its own group), then reap it."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.communicate()


# -- the results file ---------------------------------------------------------------------------


def write_results(path: Path, payload: dict[str, Any]) -> None:
    """Sorted JSON, written to a .tmp file first and renamed (a crash never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"schema_version": RESULTS_SCHEMA_VERSION, **payload}, indent=1, sort_keys=True)
                   + "\n", encoding="utf-8")
    os.replace(tmp, path)
