"""The real job a study is benchmarked for: the optional ``[job]`` table (parsing and validation only).

Without a ``[job]`` table ``decide`` prices the campaign itself (its own
measured period and rental). With one, it also projects the declared job from
the measured batches (:mod:`protocol.costing.projection`) and prices it under every
billing model.

Keys (every error names the study file and the key):

- ``inputs`` (> 0), or ``inputs_per_day`` (> 0) × ``days`` (> 0): the job's size;
- ``corpora``: accepted corpora the job must deliver (default: the study's ``expected_artifacts``);
- ``cards_per_lot``: workers one rented lot runs in parallel (default: the catalog's cards per lot);
- ``fit_level``: the probability of fitting the deadline a configuration needs to be ranked (default 0.95);
- ``bootstrap_resamples`` (default 2000) and ``bootstrap_seed`` (default 0): the recorded bootstrap;
- ``[job.mix]``: share of the job's inputs per length bucket, summing to 1 (default: the corpus's own shares).

Every number has a bound (declared in :data:`protocol.study.schema.KEYS`), named in the error: a typo (three
zeros too many in ``bootstrap_resamples``) is refused by ``check``, never a ``decide`` that runs for an hour.

Example::

    [job]
    inputs = 1000000
    [job.mix]
    short = 0.5
    medium = 0.4
    long = 0.1
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from protocol.errors import UserError
from protocol.records.codec import Convert, Schema, options
from protocol.study.reader import TableReader, check_declared
from protocol.study.schema import KEYS

DEFAULT_FIT_LEVEL: float = KEYS["job.fit_level"].value
DEFAULT_RESAMPLES: int = KEYS["job.bootstrap_resamples"].value
MIX_TOLERANCE = 1e-6
#: ``[job.mix]`` written as one JSON object, bucket → share.
_SHARES = options(convert=Convert(dict, lambda data: tuple((str(k), float(v)) for k, v in data.items()),
                                  "a JSON object of shares"))


@dataclass(frozen=True)
class Job:
    """A validated ``[job]`` table. Example: ``Job(source="study.toml", inputs=1_000_000, corpora=1)``."""

    inputs: int
    corpora: int
    inputs_per_day: int | None = None
    days: int | None = None
    mix: tuple[tuple[str, float], ...] | None = field(default=None, metadata=_SHARES)  # None: the corpus's shares
    cards_per_lot: int | None = None  # None: the catalog's cards per lot
    fit_level: float = DEFAULT_FIT_LEVEL
    bootstrap_resamples: int = DEFAULT_RESAMPLES
    bootstrap_seed: int = 0
    source: str = field(default="", metadata=options(written=False))  # the study file, named in errors
    CODEC: ClassVar[Schema] = Schema("job", derived=("mix_source",))

    @property
    def mix_source(self) -> str:
        """Example: ``"declared in [job.mix]"``."""
        return "declared in [job.mix]" if self.mix else "the measured corpus's own bucket shares"

    def where(self, key: str) -> str:
        """Example: ``job.where("inputs") == "study.toml, key job.inputs"``."""
        return f"{self.source}, key job.{key}"



def parse_job(table: Any, source: str, bucket_names: tuple[str, ...], expected_artifacts: int) -> Job | None:
    """Validate the ``[job]`` table (``None`` when the study has none); each key's type, default and bounds are
    declared in :data:`protocol.study.schema.KEYS`.

    Example: ``parse_job({"inputs": 10}, "s.toml", ("short",), 1).inputs == 10``;
    ``parse_job({"inputs": 0}, "s.toml", (), 1)`` raises ``UserError("inputs must be between 1 and … (s.toml, key
    job.inputs)")``.
    """
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UserError("job must be a table", f"{source}, key job", "Write `[job]` with `inputs = …` below it.")
    job = TableReader(source, table, "job.")
    job.used.update(key.removeprefix("job.") for key in KEYS if key.startswith("job."))
    job.finish()
    fix = "Write `inputs = 1000000`, or `inputs_per_day = …` with `days = …`."
    inputs = job.declared("inputs", fix) if "inputs" in table else None
    per_day, days = job.declared("inputs_per_day", fix), job.declared("days", fix)
    if inputs is not None and (per_day is not None or days is not None):
        raise UserError("give inputs, or inputs_per_day with days, not both", job.where("inputs"),
                        "Keep one way of stating the job's size.")
    if inputs is None:
        if per_day is None or days is None:
            missing = "inputs_per_day" if per_day is None else "days"
            raise UserError("the job's size is missing", job.where(missing if days or per_day else "inputs"),
                            "Add `inputs = …`, or both `inputs_per_day = …` and `days = …`.")
        inputs = check_declared("job.inputs", per_day * days, job.where("days"),
                                shown=f"inputs_per_day × days ({per_day} × {days})")
    corpora = job.declared("corpora")
    return Job(source=source, inputs=inputs, corpora=expected_artifacts if corpora is None else corpora,
               inputs_per_day=per_day, days=days, mix=_mix(table.get("mix"), bucket_names, job.where("mix")),
               cards_per_lot=job.declared("cards_per_lot"), fit_level=job.declared("fit_level"),
               bootstrap_resamples=job.declared("bootstrap_resamples"), bootstrap_seed=job.declared("bootstrap_seed"))


def _mix(table: Any, bucket_names: tuple[str, ...], where: str) -> tuple[tuple[str, float], ...] | None:
    if table is None:
        return None
    if not isinstance(table, dict) or not table:
        raise UserError("mix must be a non-empty table of bucket = share", where,
                        "Write `[job.mix]` with one `bucket = share` line per length bucket.")
    if not bucket_names:
        raise UserError("a length mix needs the study's [[length_buckets]]", where,
                        "Declare [[length_buckets]], or drop [job.mix] to use the corpus's own mix.")
    shares = []
    for name, value in table.items():
        if name not in bucket_names:
            raise UserError(f"unknown length bucket {name!r}", f"{where}.{name}",
                            f"The study's length buckets: {', '.join(bucket_names)}.")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or not 0 <= value <= 1:
            raise UserError(f"a share must be a number from 0 to 1, got {value!r}", f"{where}.{name}")
        shares.append((str(name), float(value)))
    total = math.fsum(share for _, share in shares)
    if abs(total - 1.0) > MIX_TOLERANCE:
        raise UserError(f"the length mix sums to {total:g}, not 1", where,
                        "Give each bucket's share of the job's inputs so that they sum to 1.")
    return tuple(shares)
