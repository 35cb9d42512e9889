"""Records exchanged between stages: frozen dataclasses written as sorted JSON.

Every record carries ``schema_version``. History:
  1 (0.1.0): first version.
  2 (trial spec, trial status only): the spec carries each input's length bucket
    (``input_buckets``) and the pass's shapes to warm up (``warmup_shapes``); the status carries
    the measured pass's energy (``gpu_energy_j``, ``cpu_energy_j`` and their reasons) and the
    compilations during the pass (``pass_compilations``).
  1.0.0: each file has one version (docs/formats.md); the pre-release versions (spec.json 1 and 2,
    status.json 1, events.jsonl 1) are refused naming the version and what to do.
Loaders reject any other version with a message that says what to do. ``campaign.json`` is
:class:`CampaignRecord` (its own version, :data:`CAMPAIGN_SCHEMA_VERSION`); a raw-table row, typed,
is :class:`protocol.records.raw_record.RawRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from protocol.io.csvio import safe_cell
from protocol.records import codec
from protocol.records.codec import OMIT_NONE, Schema

SCHEMA_VERSION = 1
#: status.json; history: 1 (0.1.0): first version; 2: the energy reasons (1.0's version; 1 is refused).
TRIAL_SCHEMA_VERSION = 2
#: spec.json; history: 1, 2 as status.json; 3: ``task`` and ``task_options`` (1.0's version; 1 and 2 are refused);
#: 4 (1.1): the variant's ``engine`` and ``engine_settings`` (a version-3 spec reads as the default engine), and a
#: server study's ``traffic`` (absent: offline); 5 (1.1): the variant's ``rate_qps``, the target rate a server trial
#: serves (absent: offline; a version-4 server spec serves its traffic's one rate).
SPEC_SCHEMA_VERSION = 5

#: Fields that make up one variant. Changing any of them makes a NEW variant.
VARIANT_FIELDS: tuple[str, ...] = (
    "stack", "device", "precision", "quantization", "compile", "attention", "batch_size", "padding", "max_length",
    "length_grouping", "resume", "threads", "seed", "deterministic", "engine", "rate_qps",
)
#: The fields of a configuration: a variant's fields less its target rate. [base] and [[series]] declare these; a
#: server study's ``[traffic] rates_qps`` makes one variant of each configuration per rate (docs/serving.md).
CONFIG_FIELDS: tuple[str, ...] = VARIANT_FIELDS[:-1]
#: The variant fields of isocost 1.0 (raw format 5 has one column each): ``engine`` came in 1.1, then ``rate_qps``.
VARIANT_FIELDS_1_0: tuple[str, ...] = VARIANT_FIELDS[:-2]
#: The engine of a variant (and of every 1.0 trial) that names none.
DEFAULT_ENGINE = "transformers"

#: How a trial's error starts when a GPU variant finds no GPU (the campaign stops early on it).
NO_GPU_ERROR = "no GPU visible to the trial"
#: How a trial's error starts when its torch build is not the study's stack (a CPU torch for a cuda study...).
WRONG_BUILD_ERROR = "torch build does not match the study's stack"

#: Trial statuses. Only ``ok`` can lead to an accepted corpus.
STATUSES: tuple[str, ...] = ("ok", "oom", "error", "interrupted", "timeout", "refused")


@dataclass(frozen=True)
class Variant:
    """One fully specified configuration. ``variant_id`` is derived from the series."""

    variant_id: str
    stack: str
    device: str
    precision: str
    quantization: str
    compile: bool
    attention: str
    batch_size: int
    padding: str
    max_length: int
    length_grouping: str
    resume: str
    threads: int
    seed: int
    deterministic: bool
    engine: str = DEFAULT_ENGINE
    series: tuple[str, ...] = ()
    #: The target rate a server study's trial of this variant serves, queries per second (one of ``[traffic]
    #: rates_qps``); None for an offline study (not written, so an offline variant's record is as before).
    rate_qps: float | None = field(default=None, metadata=OMIT_NONE)
    CODEC: ClassVar[Schema] = Schema("variant", SCHEMA_VERSION)

    def config(self) -> dict[str, Any]:
        """The variant fields only (what defines the variant); ``engine`` only when it is not the default and
        ``rate_qps`` only for a server study (so an offline campaign's derived files re-derive byte for byte)."""
        return {**configuration_key(self), **({"rate_qps": self.rate_qps} if self.rate_qps is not None else {})}


def configuration_key(variant: Variant) -> dict[str, Any]:
    """The variant's configuration: :meth:`Variant.config` without ``rate_qps``. Two variants of one server study
    that differ only in their target rate have equal keys (what capacity groups by: the highest rate of one
    configuration that meets the bound). Compare keys with ``==``; ``json.dumps(key, sort_keys=True)`` is hashable.

    Example: ``configuration_key(a) == configuration_key(b)`` for ``batch_size=4@rate_qps=2`` and ``…@rate_qps=8``.
    """
    return {name: getattr(variant, name) for name in CONFIG_FIELDS
            if name != "engine" or variant.engine != DEFAULT_ENGINE}


@dataclass(frozen=True)
class WarmupRule:
    """One warm-up rule for all variants, fixed before any result is seen."""

    source: str  # "tuning": inputs from the tuning corpus, never from the measured corpus
    inputs: int
    runs: int
    recompilation: str  # "warmup": compile/recompile cost is charged to warm-up


@dataclass(frozen=True)
class TrialSpec:
    """What the host asks one trial to do. Paths are as the trial sees them."""

    trial_id: str
    campaign_id: str
    study_sha256: str
    variant: Variant
    repetition: int
    order_index: int
    attempt: int
    corpus_path: str
    corpus_fingerprint: str
    model_path: str
    model_fingerprint: str
    warmup: WarmupRule
    warmup_texts: tuple[str, ...]
    launcher: str
    image_ref: str = ""
    image_id: str = ""
    image_digest: str = ""
    timeout_s: float | None = None
    #: Input id → the study's length-bucket name, copied from the campaign's ``corpus_index.csv``
    #: (bucketed by the untruncated token count). Empty: the study declares no buckets.
    input_buckets: dict[str, str] = field(default_factory=dict)
    #: Padded (rows, length) shapes the warm-up runs besides its tuning texts: the measured pass's
    #: longest, shortest and last batch (``protocol.study.shapes.warmup_shapes``), built from tuning tokens.
    warmup_shapes: tuple[tuple[int, int], ...] = ()
    #: The study's task (``protocol.tasks``): what the trial produces per input and writes.
    task: str = "text-classification"
    #: What the task needs beyond the variant (e.g. an embedding's pooling), as the study declares it.
    task_options: dict[str, Any] = field(default_factory=dict)
    #: The settings of the variant's engine (the study's ``[engines.NAME]``, its defaults filled in); {} for the
    #: default engine, which has none.
    engine_settings: dict[str, Any] = field(default_factory=dict)
    #: The study's ``[traffic]`` (:class:`protocol.study.traffic.Traffic`, JSON-ready) for a ``scenario = "server"``
    #: study:
    #: the trial serves requests under MLPerf LoadGen's Server scenario instead of its offline pass. None: offline.
    traffic: dict[str, Any] | None = field(default=None, metadata=OMIT_NONE)
    schema_version: int = SPEC_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("spec.json", SPEC_SCHEMA_VERSION, reads=(3, 4, 5), pre_release=(1, 2))


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds per phase, measured by the trial. ``None`` = not reached (see reasons)."""

    verify_s: float | None = None
    imports_s: float | None = None
    load_s: float | None = None
    warmup_s: float | None = None
    pass_s: float | None = None
    gpu_pass_s: float | None = None
    write_s: float | None = None
    trial_s: float | None = None


@dataclass(frozen=True)
class MemoryPeaks:
    """Peaks in bytes; allocated and reserved are separate counters, never summed."""

    peak_rss_bytes: int | None = None
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    #: Whole device (every process), ``torch.cuda.mem_get_info`` total − free: after the pass's last batch,
    #: and the largest of the samples taken after each batch. Not this trial's own use: see the peaks.
    device_used_bytes: int | None = None
    device_total_bytes: int | None = None
    device_used_max_bytes: int | None = None


@dataclass(frozen=True)
class TrialStatus:
    """The trial's own account of how it ended (``status.json``)."""

    trial_id: str
    status: str
    completed: int
    expected: int
    phases: PhaseTimes
    memory: MemoryPeaks
    truncated_count: int | None
    oom_events: int = 0  # out-of-memory errors absorbed by a declared resume variant
    error: str = ""
    empty_reasons: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    ended_at: str = ""
    #: Energy of the measured pass in joules (counters read just before and after it); None + reason.
    gpu_energy_j: float | None = None
    cpu_energy_j: float | None = None
    gpu_energy_reason: str = ""
    cpu_energy_reason: str = ""
    #: torch.compile graphs compiled during the measured pass (0 = the warm-up covered it); None + reason
    #: in ``empty_reasons`` when the variant does not compile.
    pass_compilations: int | None = None
    schema_version: int = TRIAL_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("status.json", TRIAL_SCHEMA_VERSION, pre_release=(1,))


def csv_cell(value: Any) -> str:
    """One raw-table cell: empty for None, true/false, floats by repr (round-trips exactly); a text that starts like a
    spreadsheet formula (a trial's last log line in ``notes``) shown as text (:func:`protocol.io.csvio.safe_cell`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(safe_cell(str(value)))


def format_reasons(reasons: dict[str, str]) -> str:
    return "; ".join(f"{key}: {reasons[key]}" for key in sorted(reasons))


# -- campaign.json ---------------------------------------------------------------------------------

#: ``campaign.json``'s format. History: 1 (0.1.0): first version (1.0's); 2 (1.1): each variant's ``engine``, raw
#: format 6 (a version-1 campaign's variants all ran the default engine); 3 (1.1): a server study's variants carry
#: their ``rate_qps``, raw format 7 (a version-2 campaign's variants have none: offline, or one rate).
CAMPAIGN_SCHEMA_VERSION = 3


@dataclass(frozen=True)
class Rental:
    """The flat plan this campaign's host is rented under (matched against the catalog by `decide`)."""

    gpu: str
    lots: int
    CODEC: ClassVar[Schema] = Schema("rental", check=lambda rental: _rental_problem(rental))


def _rental_problem(rental: Rental) -> str:
    from protocol.costing.plans import MAX_LOTS
    return "" if 1 <= rental.lots <= MAX_LOTS else f"rental needs lots from 1 to {MAX_LOTS}, got {rental.lots}"


@dataclass(frozen=True)
class InputFacts:
    """One input the campaign froze (corpus, tuning corpus or model): where it was, its fingerprint.

    ``inputs`` (records in a data set), ``content_fingerprint`` (ids, texts and labels, whatever the file's bytes) and
    ``index_sha256`` (the frozen ``corpus_index.csv``) only where they apply: None is not written.
    """

    path: str
    fingerprint: str
    inputs: int | None = None
    content_fingerprint: str | None = None
    index_sha256: str | None = None
    CODEC: ClassVar[Schema] = Schema("input facts", omit_none=True)


@dataclass(frozen=True)
class HostFacts:
    """The machine the host CLI ran on when the campaign started."""

    hostname: str
    cpu_count: int | None


@dataclass(frozen=True)
class CatalogFacts:
    """The plan catalog in force at the start, copied into the campaign directory as ``snapshot``."""

    snapshot: str
    source: str
    sha256: str


@dataclass(frozen=True)
class CampaignRecord:
    """``campaign.json``: what was frozen before the first trial (written once by ``isocost run``).

    Only ``schema_version`` is required: a key absent from the file (written by hand, or by an early
    0.1 build) reads as its default.

    ``launcher`` is what the launcher described (its keys depend on its kind); ``seen_corpus_reuse`` the
    acknowledged earlier evaluation of this final corpus (an evaluations-ledger entry), None when none.
    """

    campaign_id: str = ""
    created_at: str = ""
    setup_started_at: str | None = None
    isocost_version: str = ""
    raw_schema_version: int | None = None
    study_name: str = ""
    study_path: str = ""
    study_sha256: str = ""
    question: str = ""
    corpus: InputFacts | None = None
    tuning: InputFacts | None = None
    model: InputFacts | None = None
    warmup: WarmupRule | None = None
    warmup_texts: tuple[str, ...] = ()
    warmup_ids: tuple[str, ...] = ()
    variants: tuple[Variant, ...] = ()
    repetitions: int = 0
    order: str = ""
    launcher: dict[str, Any] = field(default_factory=dict)
    host: HostFacts | None = None
    rental: Rental | None = None
    catalog: CatalogFacts | None = None
    empty_reasons: dict[str, str] = field(default_factory=dict)
    seen_corpus_reuse: dict[str, Any] | None = None
    schema_version: int = CAMPAIGN_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("campaign.json", CAMPAIGN_SCHEMA_VERSION, reads=(1, 2, 3))

    @property
    def launcher_kind(self) -> str:
        return str(self.launcher.get("kind", ""))

    @property
    def corpus_inputs(self) -> int:
        """Inputs in the measured corpus (0 when not recorded)."""
        return (self.corpus.inputs or 0) if self.corpus is not None else 0

    @property
    def slots_planned(self) -> int:
        return len(self.variants) * self.repetitions

    def variant(self, variant_id: str) -> Variant:
        return next(v for v in self.variants if v.variant_id == variant_id)


def read_status(trial_dir: Path) -> TrialStatus | None:
    """A trial's status.json, typed; None when the trial wrote none (it crashed before), UserError naming the file
    and the key when it is there but not a status this isocost reads (never read as an empty status)."""
    path = trial_dir / "status.json"
    if not path.exists():
        return None
    return codec.read_record(path, TrialStatus)


# -- events.jsonl ----------------------------------------------------------------------------------

#: One line of ``events.jsonl``. History: 1: lines without ``schema_version``; 2: every line carries
#: ``schema_version`` (1.0's version; a line of version 1, or without one, is refused as pre-release).
EVENT_SCHEMA_VERSION = 2
@dataclass(frozen=True)
class CampaignEvent:
    """One timestamp of a campaign phase (``events.jsonl``; its ``chain_sha256`` belongs to the log, not here).

    ``trial_id`` for a trial's events, ``job_id`` for a Slurm job's; neither is written when None.
    """

    at: str
    event: str
    trial_id: str | None = field(default=None, metadata=codec.OMIT_NONE)
    job_id: str | None = field(default=None, metadata=codec.OMIT_NONE)
    CODEC: ClassVar[Schema] = Schema("events.jsonl line", EVENT_SCHEMA_VERSION, unversioned=1, pre_release=(1,))


# -- verdicts.json ---------------------------------------------------------------------------------

#: ``verdicts.json``. History: 1 (0.1.0): first version.
VERDICTS_SCHEMA_VERSION = 1


def _check_verdicts(record: VerdictsRecord) -> str:
    """Each verdict names its trial and says whether its pass was accepted (what the decision reads)."""
    for number, verdict in enumerate(record.verdicts):
        if not isinstance(verdict.get("trial_id"), str):
            return f"key 'verdicts[{number}].trial_id' must be a string, got {verdict.get('trial_id')!r}"
        if not isinstance(verdict.get("corpus_accepted"), bool):
            return f"key 'verdicts[{number}].corpus_accepted' must be true or false"
    return ""


@dataclass(frozen=True)
class VerdictsRecord:
    """``verdicts.json``: every trial's verdict, re-derived from its prediction file by the validate stage.

    A verdict's keys depend on the study's task (its check's figures, the agreement's details), so each is kept as
    the object written; the check makes sure each has a string ``trial_id`` and a ``corpus_accepted`` true or
    false. ``inconsistent`` (the evidence banner, when read with ``--allow-inconsistent``) is not written when None.
    """

    campaign_id: str
    rows_total: int
    verdicts: tuple[dict[str, Any], ...]
    inconsistent: str | None = field(default=None, metadata=codec.OMIT_NONE)
    CODEC: ClassVar[Schema] = Schema("verdicts.json", VERDICTS_SCHEMA_VERSION, check=_check_verdicts)

    @property
    def accepted_trials(self) -> frozenset[str]:
        """The trials whose pass was accepted."""
        return frozenset(str(v["trial_id"]) for v in self.verdicts if v["corpus_accepted"])
