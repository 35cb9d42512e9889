"""The values a measurement can take: each number of an evidence file is checked for its domain when read.

The raw chain and the seals prove that a row or a file was not changed after isocost wrote it; they do not make
its values possible, and anyone can recompute a sha256 chain. So a reader also checks every number against the
domain of its field: finite, and within the bounds its unit gives (seconds, bytes, joules, a share, a count) or
the field declares. A value outside it (``pass_s = -5``, ``inf``, ``nan``, a peak of 10^30 bytes) is refused
naming the file, the row and the column, before any summary or ranking sees it.

Where the domains are declared: by unit for every field whose name carries one (``_s``, ``_bytes``, ``_j``,
``_share``, ``_count``, ``n_…``), by name for the quantities the evidence files share (:data:`QUANTITIES`:
``completed``, ``attempt``, ``batch_size`` …), a raw.csv column's own in
:data:`protocol.records.raw_columns.RAW_DOMAINS`
(beside the columns), and a record field's own in its metadata (``field(metadata=options(domain=COUNT))``,
:mod:`protocol.records.codec`). Each reader checks the numbers it reads against them.

Example::

    SECONDS.problem(-5.0)           # 'outside its domain (≥ 0, ≤ 10^9)'
    unit_domain("peak_rss_bytes")   # BYTES
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    """The closed range ``[low, high]`` a finite number must lie in."""

    low: float
    high: float
    name: str = ""

    def problem(self, value: float) -> str:
        """What is wrong with ``value`` in words ("" when it is in the domain)."""
        if isinstance(value, float) and not math.isfinite(value):
            return "not a finite number"
        if not self.low <= value <= self.high:
            return f"outside its domain ({self.words()})"
        return ""

    def words(self) -> str:
        """Example: ``SECONDS.words() == "≥ 0, ≤ 10^9"``."""
        parts = [] if self.low == -math.inf else [f"≥ {_plain(self.low)}"]
        parts += [] if self.high == math.inf else [f"≤ {_plain(self.high)}"]
        return ", ".join(parts) or "finite"


def _plain(number: float) -> str:
    if number and float(number).is_integer() and abs(number) >= 10**6:
        exponent = math.log10(abs(number))
        if exponent.is_integer():
            return f"{'-' if number < 0 else ''}10^{int(exponent)}"
        exponent = math.log2(abs(number))
        if exponent.is_integer():
            return f"{'-' if number < 0 else ''}2^{int(exponent)}"
    return f"{number:g}"


#: Any finite number (a metric, a score, a difference that may be negative).
FINITE = Domain(-math.inf, math.inf, "finite")
#: Seconds: about 31 years; no trial, queue, phase or campaign period lasts longer.
SECONDS = Domain(0, 10**9, "seconds")
#: Bytes of memory, a file or a disk: 2^60 (an exbibyte) is more than any machine has.
BYTES = Domain(0, 2**60, "bytes")
#: Joules: 10^15 J is a megawatt for 30 years.
JOULES = Domain(0, 10**15, "joules")
#: A share of a whole (device busy share: device time / pass time, which timer granularity may put a little
#: above 1, never at 2).
SHARE = Domain(0, 2, "share")
#: A fraction or probability.
FRACTION = Domain(0, 1, "fraction")
#: A count of things (inputs, tokens, events, compilations).
COUNT = Domain(0, 2**53, "count")
#: A count that starts at 1 (a repetition, an attempt, a batch size).
POSITIVE = Domain(1, 2**53, "positive count")
#: A process exit status (negative: the signal that ended it).
EXIT_CODE = Domain(-255, 255, "exit status")
#: Any integer a 64-bit column holds.
INT64 = Domain(-(2**63), 2**63 - 1, "integer")

#: A field's unit, by how its name ends (units in names: ``pass_s``, ``peak_rss_bytes``, ``gpu_energy_j``).
_BY_SUFFIX = (("_s", SECONDS), ("_bytes", BYTES), ("_j", JOULES), ("_share", SHARE), ("_count", COUNT))


#: The quantities the evidence files share by name whose name says no unit: the same field in raw.csv, spec.json,
#: status.json and manifest.json (a record field may still declare its own, ``options(domain=…)``).
QUANTITIES: dict[str, Domain] = {
    **dict.fromkeys(("repetition", "attempt", "batch_size", "max_length", "threads"), POSITIVE),
    **dict.fromkeys(("order_index", "completed", "expected", "expected_ids", "observed_ids", "seed", "oom_events",
                     "pass_compilations", "truncated_count", "rows", "slots"), COUNT),
    "exit_code": EXIT_CODE, "seconds": SECONDS,
}


def domain_of(name: str) -> Domain | None:
    """A field's domain by its name: :data:`QUANTITIES`, else its unit (:func:`unit_of`); None: only finite."""
    return QUANTITIES.get(name) or unit_of(name)


def unit_of(name: str) -> Domain | None:
    """The domain a field's unit gives, by its name's ending (``_s``, ``_bytes``, ``_j``, ``_share``, ``_count``) or
    ``n_…`` (a count); None when the name says no unit (hours are left out: a margin in hours may be negative)."""
    for suffix, domain in _BY_SUFFIX:
        if name.endswith(suffix):
            return domain
    return COUNT if name.startswith("n_") else None


def unit_domain(name: str, is_int: bool = False) -> Domain:
    """:func:`domain_of`, else any finite number (an integer: any 64-bit one)."""
    return domain_of(name) or (INT64 if is_int else FINITE)


__all__ = ["BYTES", "COUNT", "EXIT_CODE", "FINITE", "FRACTION", "INT64", "JOULES", "POSITIVE", "SECONDS",
           "QUANTITIES", "SHARE", "Domain", "domain_of", "unit_domain", "unit_of"]
