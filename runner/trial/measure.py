"""Timers and memory counters for the trial."""

from __future__ import annotations

import os
import resource
import time
from typing import Any

#: The one clock every host-side phase timing uses.
clock = time.perf_counter


class PhaseTimer:
    """Measures one phase; on a GPU it synchronises the device before start and stop."""

    def __init__(self, sync: Any = None) -> None:
        self._sync = sync
        self.start_s = 0.0
        self.elapsed_s: float | None = None

    def __enter__(self) -> PhaseTimer:
        if self._sync is not None:
            self._sync()
        self.start_s = clock()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sync is not None and exc[0] is None:
            self._sync()
        self.elapsed_s = clock() - self.start_s


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux reports kibibytes)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def descendants_peak_rss() -> dict[str, Any]:
    """The processes this trial started and that still run (an engine's core and workers: vLLM's), each one's peak
    resident set size (``VmHWM`` in ``/proc/PID/status``) and their sum, read now. The sum of each process's peak is
    an upper bound of their peak together (their peaks need not coincide); ``peak_rss_bytes`` counts this process
    only. ``{"count": 0, ...}`` when none runs; an empty ``why`` when it could be read."""
    children: dict[int, list[int]] = {}
    peaks: dict[int, int] = {}
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError as exc:
        return {"count": None, "peak_rss_bytes_sum": None, "why": f"no /proc to read ({exc.strerror})"}
    for entry in entries:
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:
            continue  # gone since the listing
        children.setdefault(int(fields.get("PPid", "0").strip() or 0), []).append(int(entry))
        peak = fields.get("VmHWM", "").split()
        peaks[int(entry)] = int(peak[0]) * 1024 if peak else 0
    found, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return {"count": len(found), "peak_rss_bytes_sum": sum(peaks.get(pid, 0) for pid in found),
            "peak_rss_bytes": {str(pid): peaks.get(pid, 0) for pid in sorted(found)}, "why": ""}
