"""The records of a validated study, and how its series expand into variants.

:class:`Study` is frozen: the file's sha256, the data it depends on
(:class:`DataRef`), the length buckets, the quality, warm-up and campaign
rules, the base configuration and the series. :meth:`Study.variants` expands
the series (one field varied at a time, identical configurations merged,
each common seed its own variant ``<id>@seed=<n>``). The choices a variant
field accepts (``STACKS``, ``PRECISIONS``…) are listed here too.

Example: a series over ``threads = [1, 2]`` expands to the variants ``threads=1`` and ``threads=2``; with
``campaign.seeds = [0, 1]`` to ``threads=1@seed=0``, ``threads=1@seed=1``, ``threads=2@seed=0``, ``threads=2@seed=1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.costing.job import Job
from protocol.errors import UserError
from protocol.records.stages import CONFIG_FIELDS, Variant, WarmupRule
from protocol.study.traffic import Traffic

METRICS = ("accuracy", "macro_f1")
REPLAY_KINDS = ("identical", "bounded", "quality")
STACKS = ("cpu", "cuda", "rocm")
PRECISIONS = ("fp32", "bf16", "fp16")
QUANTIZATIONS = ("none", "int8-dynamic")
PADDINGS = ("longest", "max_length")
GROUPINGS = ("none", "sort")
ATTENTIONS = ("sdpa", "eager")
#: ``halve-batch-on-oom``: after an out-of-memory error the failed batch is retried with half the
#: batch size (down to 1) inside the same measured pass; its time and OOM attempts count.
RESUMES = ("none", "halve-batch-on-oom")


@dataclass(frozen=True)
class DataRef:
    """A file or directory the study depends on, and its expected fingerprint."""

    path: Path
    fingerprint: str


@dataclass(frozen=True)
class LengthBucket:
    name: str
    max_tokens: int | None  # None: open-ended last bucket


@dataclass(frozen=True)
class QualityRule:
    metric: str
    minimum: float
    tuned_on: str
    reference_variant: str
    max_metric_drop: float
    min_agreement: float
    subgroups: tuple[str, ...]
    replay: str
    max_score_delta: float | None
    #: The task's own [quality] keys (``protocol.tasks``), e.g. an embedding's ``min_cosine``.
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CampaignRule:
    repetitions: int
    order: str
    trial_timeout_s: float | None
    seeds: tuple[int, ...] = ()  # common seeds: every variant runs under each, results kept apart
    memory_limit_bytes: int | None = None  # container memory limit (docker launcher)
    cpu_limit: float | None = None  # container CPU limit in CPUs (docker launcher); None: derived from the host
    output_file_limit_bytes: int | None = None  # largest file a trial container may write; None: the default


@dataclass(frozen=True)
class Deadline:
    """The access window the whole campaign must fit, as local times in ``tz``."""

    start: str
    end: str
    tz: str
    waiting_h: float  # declared waiting periods the rental must be held for


@dataclass(frozen=True)
class Costing:
    catalog: Path | None  # None: the shipped dated snapshot


@dataclass(frozen=True)
class Series:
    name: str
    field: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Study:
    """A validated study. ``sha256`` is the hash of the file's exact bytes."""

    path: Path
    sha256: str
    name: str
    question: str
    scenario: str
    expected_artifacts: int
    corpus: DataRef
    tuning: DataRef
    model: DataRef
    length_buckets: tuple[LengthBucket, ...]
    quality: QualityRule
    warmup: WarmupRule
    campaign: CampaignRule
    base: dict[str, Any]
    series: tuple[Series, ...]
    deadline: Deadline | None = None
    costing: Costing = Costing(catalog=None)
    images: tuple[tuple[str, str], ...] = ()  # (stack, image reference by digest)
    job: Job | None = None  # the real job to project (protocol/costing/job.py); None: price the campaign only
    task: str = "text-classification"  # what a valid output is (protocol/tasks/); the study's `task` key
    task_options: Mapping[str, Any] = field(default_factory=dict)  # the task's own tables, JSON-ready
    engine_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # [engines.NAME] as declared
    #: [traffic] of a scenario = "server" study (protocol/study/traffic.py); None: offline
    traffic: Traffic | None = None

    def settings_of(self, engine: str) -> dict[str, Any]:
        """The settings a trial of ``engine`` runs with: its [engines.NAME] table, else its declared defaults."""
        from protocol.engines import engine_named

        if engine in self.engine_settings:
            return dict(self.engine_settings[engine])
        return {key.key.rsplit(".", 1)[-1]: key.value for key in engine_named(engine).settings}

    def image_for(self, stack: str) -> str:
        return dict(self.images).get(stack, "")

    def variants(self) -> tuple[Variant, ...]:
        """Expand the series into variants, in declaration order, merging identical configs; a server study's
        configuration once per target rate (:meth:`rated_variants`).

        With ``campaign.seeds``, every variant runs under each common seed as its own variant
        (``<id>@seed=<n>``): results per seed are kept apart, never pooled.
        """
        variants = self.rated_variants()
        if not self.campaign.seeds:
            return variants
        return tuple(
            Variant(**{**_variant_kwargs(v), "variant_id": seeded_id(v.variant_id, seed), "seed": seed,
                       "series": v.series})
            for v in variants
            for seed in self.campaign.seeds
        )

    def rated_variants(self) -> tuple[Variant, ...]:
        """The configurations of the series (:meth:`series_variants`); in a server study, each once per declared
        target rate, in the order of ``[traffic] rates_qps``, with its ``rate_qps`` (``<id>@rate_qps=<r>`` when the
        study declares more than one rate; one rate keeps the configuration's id). Offline: the configurations."""
        configurations = self.series_variants()
        rates = self.traffic.rates_qps if self.traffic is not None else ()
        if not rates:
            return configurations
        return tuple(
            Variant(**{**_variant_kwargs(v), "variant_id": rated_id(v.variant_id, rate) if len(rates) > 1
                       else v.variant_id, "rate_qps": rate, "series": v.series})
            for v in configurations
            for rate in rates
        )

    def reference_for(self, variant_id: str) -> str:
        """The reference variant a variant is compared with: the same seed when seeds are declared, and the same
        target rate when a server study declares several."""
        base, seed = split_seeded_id(variant_id)
        _, rate = split_rated_id(base)
        reference = self.quality.reference_variant
        if rate is not None:
            reference = f"{reference}{RATE_MARK}{rate}"
        return seeded_id(reference, seed) if seed is not None else reference

    def series_variants(self) -> tuple[Variant, ...]:
        found: dict[tuple[Any, ...], Variant] = {}
        for series in self.series:
            for value in series.values:
                config = dict(self.base)
                config[series.field] = value
                key = tuple(config[name] for name in CONFIG_FIELDS)
                if key in found:
                    old = found[key]
                    found[key] = Variant(**{**_variant_kwargs(old), "series": (*old.series, series.name)})
                    continue
                variant_id = f"{series.field}={_value_text(value)}"
                found[key] = Variant(variant_id=variant_id, series=(series.name,), **config)
        return tuple(found.values())


#: What joins a configuration's id and its target rate in a variant id (``batch_size=4@rate_qps=2``).
RATE_MARK = "@rate_qps="


def rate_text(rate_qps: float) -> str:
    """A rate as a variant id writes it: short (``2``, ``2.5``), and exact (``repr``) where short would round."""
    short = f"{rate_qps:g}"
    return short if float(short) == rate_qps else repr(rate_qps)


def rated_id(variant_id: str, rate_qps: float) -> str:
    """The id of a configuration's variant at one target rate. Example: ``rated_id("batch_size=4", 2.0)`` is
    ``"batch_size=4@rate_qps=2"``."""
    return f"{variant_id}{RATE_MARK}{rate_text(rate_qps)}"


def split_rated_id(variant_id: str) -> tuple[str, str | None]:
    """A variant id (without its seed) → its configuration's id and its rate's text (None: no rate in the id)."""
    base, sep, rate = variant_id.rpartition(RATE_MARK)
    return (base, rate) if sep else (variant_id, None)


def configuration_id(variant_id: str) -> str:
    """The id of a variant's configuration: the variant id without its target rate (its seed kept). Example:
    ``configuration_id("batch_size=4@rate_qps=2@seed=3") == "batch_size=4@seed=3"``. Pairs with
    :func:`protocol.records.stages.configuration_key` (the configuration's fields)."""
    base, seed = split_seeded_id(variant_id)
    return seeded_id(split_rated_id(base)[0], seed)


def series_id(variant_id: str) -> str:
    """The id of the series variant a variant comes from (what ``quality.reference_variant`` names): without
    its seed and its rate."""
    return split_rated_id(split_seeded_id(variant_id)[0])[0]


def seeded_id(variant_id: str, seed: int | None) -> str:
    return variant_id if seed is None else f"{variant_id}@seed={seed}"


def split_seeded_id(variant_id: str) -> tuple[str, int | None]:
    base, sep, seed = variant_id.rpartition("@seed=")
    if sep and seed.isdigit():
        return base, int(seed)
    return variant_id, None


def _variant_kwargs(variant: Variant) -> dict[str, Any]:
    return {"variant_id": variant.variant_id, **variant.config()}


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def bucket_for(n_tokens: int, buckets: tuple[LengthBucket, ...]) -> str:
    """Name of the length bucket holding ``n_tokens`` (upper bounds inclusive)."""
    for bucket in buckets:
        if bucket.max_tokens is None or n_tokens <= bucket.max_tokens:
            return bucket.name
    raise UserError(
        f"an input of {n_tokens} tokens is longer than every length bucket",
        "length_buckets",
        "Leave the last bucket open-ended (no max_tokens).",
    )


