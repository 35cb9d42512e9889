"""What the demo builder measures about this machine before a timed step: its load per core.

The demo's tuning passes run under the study's trial limit scaled by this measurement
(:func:`protocol.study.time_limits.tuning_limit`), so a loaded 2-core machine is not held to a limit chosen on an idle
one.

Example::

    load_per_core()   # 3.4 on a 2-core machine with a 1-minute load average of 6.8
"""

from __future__ import annotations

import os


def load_per_core() -> float:
    """The 1-minute load average over the CPU count (0.0 where the system has no load average)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0
    return load / (os.cpu_count() or 1)
