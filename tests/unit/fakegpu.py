"""CPU torch posing as a CUDA or ROCm build, for tests of the trial's GPU path without a GPU.

``pose_as_gpu(monkeypatch, torch, backend)`` patches the real (CPU) torch module so that
``torch.cuda`` answers like one card, and returns a :class:`CallLog` of what the trial asked of it
(synchronize, reset of peaks, events recorded and read, empty_cache, mem_get_info). Tensors stay
on the CPU: the trial's classifier is built with a CPU ``device`` and a fake model that logs each
forward in the same call log, so the order of device calls and forwards can be asserted.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

GPU_UUID = "GPU-6f1c5f1a-2b3c-4d5e-8f90-0123456789ab"
PCI_BUS_ID = "00000000:65:00.0"
TOTAL_BYTES = 80 * 2**30


@dataclass
class CallLog:
    calls: list[str] = field(default_factory=list)
    free_bytes: int = 70 * 2**30
    allocated_bytes: int = 3 * 2**30
    reserved_bytes: int = 4 * 2**30
    current_allocated_bytes: int = 0
    current_reserved_bytes: int = 2 * 2**30

    def names(self, *keep: str) -> list[str]:
        return [c for c in self.calls if not keep or c in keep]


class FakeEvent:
    log: CallLog

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing, "timing events must be created with enable_timing=True"
        self.at: float | None = None

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()  # the "device" runs synchronously here: host time between records
        self.log.calls.append("event.record")

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.at is not None and other.at is not None, "elapsed_time on an event never recorded"
        self.log.calls.append("event.elapsed_time")
        return (other.at - self.at) * 1000.0


def pose_as_gpu(monkeypatch: Any, torch: Any, backend: str = "cuda") -> CallLog:
    log = CallLog()
    event = type("FakeEvent", (FakeEvent,), {"log": log})
    cuda = torch.cuda

    def record(name: str, result: Any = None) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            log.calls.append(name)
            return result() if callable(result) else result
        return call

    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda, "synchronize", record("synchronize"))
    monkeypatch.setattr(cuda, "reset_peak_memory_stats", record("reset_peak_memory_stats"))
    monkeypatch.setattr(cuda, "empty_cache", record("empty_cache"))
    monkeypatch.setattr(cuda, "max_memory_allocated", record("max_memory_allocated", lambda: log.allocated_bytes))
    monkeypatch.setattr(cuda, "max_memory_reserved", record("max_memory_reserved", lambda: log.reserved_bytes))
    monkeypatch.setattr(cuda, "mem_get_info", record("mem_get_info", lambda: (log.free_bytes, TOTAL_BYTES)))
    monkeypatch.setattr(cuda, "memory_allocated", record("memory_allocated", lambda: log.current_allocated_bytes))
    monkeypatch.setattr(cuda, "memory_reserved", record("memory_reserved", lambda: log.current_reserved_bytes))
    monkeypatch.setattr(cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(cuda, "Event", event)
    props = SimpleNamespace(name="Fake H200" if backend == "cuda" else "Fake MI300X", total_memory=TOTAL_BYTES,
                            major=9, minor=0, uuid=GPU_UUID.removeprefix("GPU-"), pci_domain_id=0, pci_bus_id=0x65,
                            pci_device_id=0, gcnArchName="gfx942:sramecc+:xnack-")
    monkeypatch.setattr(cuda, "get_device_properties", lambda index=0: props)
    monkeypatch.setattr(cuda, "get_arch_list", lambda: ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"])
    monkeypatch.setattr(torch.version, "hip", "7.2.0" if backend == "rocm" else None)
    monkeypatch.setattr(torch.version, "cuda", "12.8" if backend == "cuda" else None)
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: backend == "cuda")
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91000 if backend == "cuda" else None)
    return log


class FakeNvml:
    """The few pynvml calls the trial makes, for two cards; the trial's card is the SECOND one."""

    def __init__(self, energy_mj: list[int] | None = None) -> None:
        self.energy_mj = list(energy_mj or [1_000_000, 1_250_500])
        self.cards = [("GPU-00000000-other-card-000000000000", "00000000:17:00.0"), (GPU_UUID, PCI_BUS_ID)]
        self.energy_handles: list[int] = []

    def install(self, monkeypatch: Any) -> FakeNvml:
        module = SimpleNamespace(
            nvmlInit=lambda: None, nvmlShutdown=lambda: None,
            nvmlSystemGetDriverVersion=lambda: "570.124.06",
            nvmlDeviceGetCount=lambda: len(self.cards),
            nvmlDeviceGetHandleByIndex=lambda i: i,
            nvmlDeviceGetUUID=lambda h: self.cards[h][0],
            nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=self.cards[h][1].encode()),
            nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=123),
            nvmlDeviceGetTotalEnergyConsumption=self._energy,
        )
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return self

    def _energy(self, handle: int) -> int:
        self.energy_handles.append(handle)
        return self.energy_mj.pop(0)


class FakeTokenizer:
    """Whitespace tokens → ids; pads like a Hugging Face tokenizer (lists in, tensors out)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def __call__(self, texts: list[str], truncation: bool = True, max_length: int | None = None,
                 padding: bool = False) -> dict[str, list[list[int]]]:
        ids = [[101] + [len(w) for w in t.split()] + [102] for t in texts]
        if truncation and max_length:
            ids = [i[:max_length] for i in ids]
        return {"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]}

    def pad(self, features: list[dict[str, list[int]]], padding: str, max_length: int,
            return_tensors: str) -> dict[str, Any]:
        width = max(len(f["input_ids"]) for f in features) if padding == "longest" else max_length
        ids = [f["input_ids"] + [0] * (width - len(f["input_ids"])) for f in features]
        mask = [f["attention_mask"] + [0] * (width - len(f["attention_mask"])) for f in features]
        return {"input_ids": self.torch.tensor(ids), "attention_mask": self.torch.tensor(mask)}


class FakeModel:
    """Logs each forward with its padded shape; two labels, deterministic logits."""

    def __init__(self, torch: Any, log: CallLog, compiled: bool = False) -> None:
        self.torch = torch
        self.log = log
        self.compiled = compiled  # pose as torch.compile with static shapes: each new shape compiles a graph
        self.shapes: list[tuple[int, int]] = []
        self.config = SimpleNamespace(id2label={0: "a", 1: "b"}, architectures=["Fake"], model_type="fake",
                                      _attn_implementation="sdpa")

    def __call__(self, input_ids: Any, attention_mask: Any) -> Any:
        self.log.calls.append("forward")
        shape = tuple(input_ids.shape)
        if self.compiled and shape not in self.shapes:
            from torch._dynamo.utils import counters

            counters["stats"]["unique_graphs"] += 1
        self.shapes.append(shape)
        logits = self.torch.stack([input_ids.sum(dim=1).float(), input_ids.shape[1] * self.torch.ones(
            input_ids.shape[0])], dim=1)
        return SimpleNamespace(logits=logits)

    def parameters(self) -> list[Any]:
        return [self.torch.zeros(3)]


def write_corpus(path: Path, lengths: list[int]) -> list[str]:
    """One input per length (words), ids ``t000`` …; returns the ids."""
    import json

    ids = []
    with open(path, "w", encoding="utf-8") as handle:
        for i, n in enumerate(lengths):
            ids.append(f"t{i:03d}")
            handle.write(json.dumps({"id": ids[-1], "text": " ".join(["word"] * n), "label": "a"}) + "\n")
    return ids


class FakeAmdsmi:
    """The few amdsmi calls the trial makes, for two cards; the trial's card (PCI 65:00.0) is the SECOND one."""

    def __init__(self, accumulators: list[int] | None = None) -> None:
        self.accumulators = list(accumulators or [10_000, 30_000])
        self.cards = [("amd-uuid-other", "0000:17:00.0"), ("amd-uuid-trial", "0000:65:00.0")]
        self.energy_handles: list[int] = []

    def install(self, monkeypatch: Any) -> FakeAmdsmi:
        module = SimpleNamespace(
            amdsmi_init=lambda: None, amdsmi_shut_down=lambda: None,
            amdsmi_get_processor_handles=lambda: [0, 1],
            amdsmi_get_gpu_device_bdf=lambda h: self.cards[h][1],
            amdsmi_get_gpu_device_uuid=lambda h: self.cards[h][0],
            amdsmi_get_gpu_driver_info=lambda h: {"driver_version": "6.12.12"},
            amdsmi_get_energy_count=self._energy,
        )
        monkeypatch.setitem(sys.modules, "amdsmi", module)
        return self

    def _energy(self, handle: int) -> dict[str, Any]:
        self.energy_handles.append(handle)
        return {"energy_accumulator": self.accumulators.pop(0), "counter_resolution": 15.259}
