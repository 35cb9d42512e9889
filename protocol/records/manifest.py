"""``manifest.json``: what a trial records of itself, environment and settings, typed (:class:`Manifest`).

The trial writes it several times as it goes (after its set-up, after loading, after the pass): the keys
of the spec and the host facts are there from the first write; each later block (``software``, ``device``,
``model``, ``truncation``…) only once the trial got that far, and is not written before. The facts blocks
(``host``, ``software``, ``device``, ``determinism``, ``numerics``, ``model``, an embedding's ``queries``)
are what the machine and the libraries answered: objects whose keys depend on the machine, kept as read.

History of ``schema_version``: 1 (0.1.0): first version (the keys below).

Example::

    manifest = read_manifest(trial_dir)  # None when the trial wrote none
    manifest.device.get("gpu_memory_bytes") if manifest and manifest.device else None
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from protocol.records import codec
from protocol.records.codec import OMIT_NONE, Schema
from protocol.records.stages import Variant, WarmupRule

#: history: 1 (1.0); 2 (1.1): ``engine``, what the variant's engine ran (a version-1 manifest has none), and a server
#: trial's ``serving`` block; 3 (1.1): the variant's ``rate_qps`` (a server trial's target rate; older ones have none).
MANIFEST_SCHEMA_VERSION = 3
MANIFEST_FILE = "manifest.json"


def _later(**kwargs: Any) -> Any:
    """A block written once the trial got that far: None (and not written) before."""
    return field(default=None, metadata=OMIT_NONE, **kwargs)


@dataclass(frozen=True)
class Manifest:
    """A trial's ``manifest.json`` (see the module docstring)."""

    trial_id: str
    campaign_id: str
    study_sha256: str
    variant: Variant
    repetition: int
    order_index: int
    attempt: int
    corpus_fingerprint: str
    model_fingerprint: str
    launcher: str
    image_ref: str | None
    image_id: str | None
    image_digest: str | None
    warmup: WarmupRule
    fault_injection: str | None
    started_at: str
    empty_reasons: dict[str, str] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    software: dict[str, Any] | None = _later()
    device: dict[str, Any] | None = _later()
    determinism: dict[str, Any] | None = _later()
    numerics: dict[str, Any] | None = _later()
    model: dict[str, Any] | None = _later()
    #: What the variant's engine really ran, read back from it (name, version, settings: ``TrialEngine.readback``).
    engine: dict[str, Any] | None = _later()
    warmup_shapes: tuple[tuple[int, int], ...] | None = _later()
    attention_ops: tuple[str, ...] | None = _later()
    queries: dict[str, Any] | None = _later()
    truncation: dict[str, int] | None = _later()
    #: A server study's serving run: LoadGen's verdict, rates and latency against the bound, the answers per id
    #: (runner/trial/serving/trial_pass.py); absent for an offline trial.
    serving: dict[str, Any] | None = _later()
    pass_order: str | None = _later()
    ended_at: str | None = _later()
    schema_version: int = MANIFEST_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema(MANIFEST_FILE, MANIFEST_SCHEMA_VERSION, reads=(1, 2, 3))


def read_manifest(trial_dir: Path) -> Manifest | None:
    """A trial's manifest.json, typed; None when the trial wrote none, UserError naming the file and the key when
    it is there but not a manifest this isocost reads."""
    path = trial_dir / MANIFEST_FILE
    if not path.exists():
        return None
    return codec.read_record(path, Manifest)
