"""Timers and memory counters for the trial."""

from __future__ import annotations

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
