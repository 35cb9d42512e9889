"""Campaign files for tests, written through their records (never as dict literals), so a fixture is always a
file isocost itself would write and a strict reader reads it.

Example::

    write_status(trial_dir, trial_status("001-r1-a", completed=6, expected=6, pass_s=2.1))
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.records.codec import write_record
from protocol.records.manifest import Manifest
from protocol.records.stages import CampaignRecord, MemoryPeaks, PhaseTimes, TrialSpec, TrialStatus, Variant, WarmupRule

if TYPE_CHECKING:
    from runner.hosts.record import HostEntry, HostsFile


def trial_status(trial_id: str, status: str = "ok", *, completed: int = 0, expected: int = 0,
                 pass_s: float | None = None, memory: MemoryPeaks | None = None, **fields: Any) -> TrialStatus:
    """A trial's status as the trial writes it (phases beyond ``pass_s`` not reached)."""
    return TrialStatus(trial_id=trial_id, status=status, completed=completed, expected=expected,
                       phases=PhaseTimes(pass_s=pass_s), memory=memory or MemoryPeaks(), truncated_count=0,
                       **fields)


def write_status(trial_dir: Path, status: TrialStatus) -> Path:
    path = trial_dir / "status.json"
    write_record(path, status)
    return path


def write_campaign_record(root: Path, record: CampaignRecord, **changes: Any) -> Path:
    """campaign.json of ``root`` from ``record`` (``changes`` replacing some of its fields)."""
    path = root / "campaign.json"
    write_record(path, dataclasses.replace(record, **changes) if changes else record)
    return path


def manifest_for(spec: TrialSpec, **blocks: Any) -> Manifest:
    """The manifest a trial of ``spec`` writes first (the spec's keys, no image), ``blocks`` (``software=…``,
    ``device=…``, ``host=…``) added."""
    base: dict[str, Any] = {"image_ref": None, "image_id": None, "image_digest": None, "fault_injection": None,
                            "started_at": "", "launcher": spec.launcher}
    return Manifest(trial_id=spec.trial_id, campaign_id=spec.campaign_id, study_sha256=spec.study_sha256,
                    variant=spec.variant, repetition=spec.repetition, order_index=spec.order_index,
                    attempt=spec.attempt, corpus_fingerprint=spec.corpus_fingerprint,
                    model_fingerprint=spec.model_fingerprint, warmup=spec.warmup, **{**base, **blocks})


SAMPLE_VARIANT = Variant(variant_id="batch_size=4", stack="cpu", device="cpu", precision="fp32", quantization="none",
                         compile=False, attention="sdpa", batch_size=4, padding="longest", max_length=128,
                         length_grouping="none", resume="none", threads=1, seed=0, deterministic=True)


def sample_spec(trial_id: str = "001-r1-batch_size-4", **changes: Any) -> TrialSpec:
    """A trial spec with plain values (``changes`` replacing some)."""
    spec = TrialSpec(trial_id=trial_id, campaign_id="c0ffee", study_sha256="s" * 64, variant=SAMPLE_VARIANT,
                     repetition=1, order_index=1, attempt=1, corpus_path="/corpus.jsonl", corpus_fingerprint="sha256:a",
                     model_path="/model", model_fingerprint="sha256:b", warmup=WarmupRule("tuning", 2, 1, "warmup"),
                     warmup_texts=("a", "b"), launcher="process")
    return dataclasses.replace(spec, **changes) if changes else spec


def host_entry(name: str, folder: str = "", **fields: Any) -> HostEntry:
    """A host of hosts.json as `isocost run --host NAME=local` writes it (folder: its name), with ``fields`` set."""
    from runner.hosts.record import HostEntry

    return HostEntry(name=name, dir=folder or name, url="local", spec={"name": name, "url": "local"}, **fields)


def hosts_file(*hosts: HostEntry) -> HostsFile:
    """A multi-host campaign's hosts.json record listing ``hosts`` (write it with ``write_record``)."""
    from runner.hosts.record import HostsFile, HostsImage

    return HostsFile(about="one campaign per host", created_at="2026-12-01T00:00:00.000+00:00", study_name="s",
                     study_sha256="0" * 64, stack="cpu", image=HostsImage("img@sha256:" + "1" * 64, "", "", "pulled"),
                     hosts=hosts)
