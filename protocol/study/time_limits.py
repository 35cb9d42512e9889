"""Time limits scaled to the machine they run on: a demo step on a slow or busy machine gets the time that
machine needs, measured there, never only a limit chosen on a fast one.

Two rules, both pure (the caller measures):

- :func:`tuning_limit`: the tuning pass of a demo study runs under the study's ``trial_timeout_s`` times the
  machine's load per core (the 1-minute load average over the CPU count, measured when the pass starts; never
  below 1), or under ``ISOCOST_DEMO_TIMEOUT_S`` seconds when that variable is set.
- :func:`campaign_limit`: once the tuning pass has run, the study's own ``trial_timeout_s`` is at least
  :data:`CAMPAIGN_SAFETY` times that pass's measured seconds, scaled from the tuning split's size to the
  corpus's (rounded up to a minute); a fast machine keeps the template's limit.

Example::

    tuning_limit(900.0, load_per_core=2.5, study="generate.toml").seconds    # 2250.0
    campaign_limit(900.0, measured_s=1000.0, corpus_inputs=24, tuning_inputs=30)[0]   # 3240.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from protocol.errors import UserError

#: The variable that sets the demo's tuning limit outright (seconds).
OVERRIDE_VARIABLE = "ISOCOST_DEMO_TIMEOUT_S"
#: A campaign trial may be this many times slower than the measured tuning pass (scaled to the corpus): the
#: variants include batch 1 and bf16, which on a CPU run several times slower than the reference variant.
CAMPAIGN_SAFETY = 4.0


@dataclass(frozen=True)
class TimeLimit:
    """A time limit in seconds (None: no limit), where it comes from (in words), and how to raise it."""

    seconds: float | None
    source: str
    fix: str


def tuning_limit(study_limit_s: float, *, load_per_core: float, study: str, override: str | None = None) -> TimeLimit:
    """The demo tuning pass's limit: ``override`` (the variable's text) when set, else the study's limit × the
    measured load per core (at least × 1)."""
    fix = (f"Set {OVERRIDE_VARIABLE}=SECONDS for more time (e.g. make run STUDY=generate "
           f"{OVERRIDE_VARIABLE}={int(max(study_limit_s, 60) * 4)}), or build the demo on a less loaded machine.")
    if override:
        try:
            seconds = float(override)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds <= 0:
            raise UserError(f"{OVERRIDE_VARIABLE}={override[:40]!r} is not a positive number of seconds",
                            OVERRIDE_VARIABLE, "Set it to the tuning pass's time limit in seconds, e.g. 3600.")
        return TimeLimit(seconds, f"{OVERRIDE_VARIABLE}={override}", fix)
    factor = max(1.0, load_per_core)
    return TimeLimit(study_limit_s * factor,
                     f"trial_timeout_s {study_limit_s:g} s of {study} × {factor:.1f}, this machine's load per core "
                     "measured now (never below 1)", fix)


def campaign_limit(study_limit_s: float, *, measured_s: float, corpus_inputs: int, tuning_inputs: int
                   ) -> tuple[float, str]:
    """The study's ``trial_timeout_s`` after a tuning pass measured at ``measured_s`` (and why)."""
    scaled = CAMPAIGN_SAFETY * measured_s * max(1.0, corpus_inputs / max(tuning_inputs, 1))
    seconds = max(study_limit_s, 60.0 * math.ceil(scaled / 60.0))
    reason = (f"the tuning pass took {measured_s:.0f} s here over {tuning_inputs} inputs; a trial over "
              f"{corpus_inputs} inputs gets {CAMPAIGN_SAFETY:g}× that, scaled to its size, and at least "
              f"{study_limit_s:g} s")
    return seconds, reason
