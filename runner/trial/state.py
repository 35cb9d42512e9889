"""What a trial has measured so far (:class:`TrialState`) and what its pass is given (:class:`PassContext`).

The trial (``runner.trial.run``) owns one :class:`TrialState` and writes ``status.json`` from it at every ending;
the measured pass (``runner.trial.measured_pass``) or a server study's serving pass
(``runner.trial.serving.trial_pass``) receives a :class:`PassContext`, never the trial itself, and fills the
state as it goes, so a pass that fails part-way still leaves its counts for the status.

Example::

    state = TrialState()
    MeasuredPass(PassContext(spec, out, torch, fault, device_facts, state), model).run()
    state.phases["pass_s"], state.completed
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.records.stages import TrialSpec, Variant
from runner.trial.batches import NO_BUCKETS, UNBUCKETED
from runner.trial.faults import FaultInjector


@dataclass
class TrialState:
    """The trial's figures so far (status.json's): filled by the trial's stages and by its pass."""

    phases: dict[str, float | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    memory: dict[str, int | None] = field(default_factory=dict)
    completed: int = 0
    expected: int = 0
    truncated: int | None = None
    oom_events: int = 0
    gpu_energy_j: float | None = None
    cpu_energy_j: float | None = None
    gpu_energy_reason: str = ""
    cpu_energy_reason: str = ""
    pass_compilations: int | None = None
    peaks_reset: bool = False
    #: Seconds of the measured pass spent writing its files and probing memory (excluded from pass_s).
    pass_write_s: float = 0.0

    def sample_device_memory(self, torch: Any, device: str) -> None:
        """Whole-device memory in use (all processes: total − free, ``torch.cuda.mem_get_info``, which CUDA
        and ROCm builds both answer), kept as the largest sample; sampled after each batch."""
        if device != "cuda" or torch is None:
            return
        free, total = torch.cuda.mem_get_info()
        used = int(total) - int(free)
        self.memory["device_total_bytes"] = int(total)
        self.memory["device_used_max_bytes"] = max(used, self.memory.get("device_used_max_bytes") or 0)
        self.memory["device_used_bytes"] = used


@dataclass(frozen=True)
class PassContext:
    """What a pass reads of its trial (the spec, the trial directory, torch, the test-only faults, the manifest's
    device facts) and the :class:`TrialState` it fills."""

    spec: TrialSpec
    out: Path
    torch: Any
    fault: FaultInjector
    device: dict[str, Any]
    state: TrialState

    @property
    def variant(self) -> Variant:
        return self.spec.variant

    def sync(self) -> None:
        if self.variant.device == "cuda":
            self.torch.cuda.synchronize()

    def bucket(self, input_id: str) -> str:
        if not self.spec.input_buckets:
            return NO_BUCKETS
        return self.spec.input_buckets.get(input_id, UNBUCKETED)
