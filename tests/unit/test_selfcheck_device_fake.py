"""The device checks of ``isocost selfcheck`` on the fake CUDA and ROCm backends (tests/unit/fakegpu.py).

Timing and asynchrony use a virtual GPU with its own timeline (kernels queue, events record on the
device's timeline, ``synchronize`` waits for the queue) and a virtual host clock: nothing here sleeps
or depends on how fast this machine is, and a timer that forgets to synchronise is caught.
"""

from __future__ import annotations

import sys

import pytest
from fakegpu import GPU_UUID, TOTAL_BYTES, FakeAmdsmi, FakeNvml, pose_as_gpu

from protocol.records.selfcheck import FILL_MAX_STEPS

torch = pytest.importorskip("torch")

from runner.trial import selfcheck_device as device  # noqa: E402
from runner.trial.selfcheck_device import Context  # noqa: E402


def gpu_context(monkeypatch, tmp_path, backend="cuda", nvml=True):
    log = pose_as_gpu(monkeypatch, torch, backend)
    if backend == "cuda" and nvml:
        FakeNvml().install(monkeypatch)
    if backend == "rocm":
        FakeAmdsmi().install(monkeypatch)
    ctx = Context(torch=torch, device=backend, out=tmp_path, budget_s=300, tensor_device="cpu")
    return ctx, log


class VirtualGpu:
    """A device timeline beside a virtual host clock; each host clock read costs one microsecond."""

    def __init__(self, sync_waits: bool = True) -> None:
        self.host = 0.0
        self.free_at = 0.0
        self.sync_waits = sync_waits

    def clock(self) -> float:
        self.host += 1e-6
        return self.host

    def launch(self, seconds: float) -> None:
        self.free_at = max(self.host, self.free_at) + seconds

    def synchronize(self) -> None:
        if self.sync_waits:
            self.host = max(self.host, self.free_at)

    def install(self, monkeypatch) -> VirtualGpu:
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.at: float | None = None

            def record(self) -> None:
                self.at = max(gpu.host, gpu.free_at)  # completes when the work queued before it does

            def elapsed_time(self, other: Event) -> float:
                assert self.at is not None and other.at is not None
                return (other.at - self.at) * 1000.0

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.cuda, "synchronize", self.synchronize)
        monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: self.launch(cycles * 1e-9))  # a 1 GHz clock
        monkeypatch.setattr("runner.trial.measure.clock", self.clock)
        monkeypatch.setattr(device, "clock", self.clock)
        monkeypatch.setattr(device, "_matmuls", lambda ctx, reps: self.launch(reps * 1e-3))  # 1 ms per matmul
        return self


# -- the GPU seen -------------------------------------------------------------------------------------------


def test_gpu_check_reads_the_card_and_nvml_names_the_same_one(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path)
    check = device.check_gpu(ctx)
    assert check.verdict == "PASS", check
    assert ctx.usable
    assert check.figure.startswith(f"Fake H200, {GPU_UUID}, 80.0 GiB, driver 570.124.06, cuda 12.8")
    assert "NVML agrees on the card" in check.figure
    assert check.details["facts"]["nvml_uuid"] == GPU_UUID  # the second NVML card, matched by UUID


def test_gpu_check_on_rocm_matches_amdsmi_by_pci_bus_id(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path, "rocm")
    check = device.check_gpu(ctx)
    assert check.verdict == "PASS", check
    assert check.figure.startswith("Fake MI300X, amd-uuid-trial, 80.0 GiB, driver 6.12.12, rocm 7.2.0")
    assert "amdsmi agrees on the card" in check.figure


def test_gpu_check_fails_without_nvml_naming_why(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path, nvml=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    check = device.check_gpu(ctx)
    assert check.verdict == "FAIL"
    assert "driver_version unknown: nvidia-ml-py (pynvml) not installed" in check.reason


def test_gpu_check_fails_when_nvml_sees_another_card(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path, nvml=False)
    nvml = FakeNvml()
    nvml.cards = [("GPU-someone-else", "00000000:17:00.0")]
    nvml.install(monkeypatch)
    check = device.check_gpu(ctx)
    assert check.verdict == "FAIL"
    assert "NVML did not identify torch's card: no NVML device matches torch's card" in check.reason


def test_gpu_check_refuses_a_cuda_build_that_sees_no_gpu(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    check = device.check_gpu(ctx)
    assert check.verdict == "FAIL" and not ctx.usable
    assert check.reason.startswith("no GPU visible to the trial")


def test_gpu_check_refuses_the_wrong_build(tmp_path, monkeypatch):
    pose_as_gpu(monkeypatch, torch, "rocm")
    ctx = Context(torch=torch, device="cuda", out=tmp_path, budget_s=300, tensor_device="cpu")
    check = device.check_gpu(ctx)
    assert check.verdict == "FAIL"
    assert check.reason.startswith("torch build does not match the study's stack")


def test_gpu_check_skips_on_cpu(tmp_path):
    check = device.check_gpu(Context(torch=torch, device="cpu", out=tmp_path, budget_s=300))
    assert check.verdict == "SKIP" and "--device cpu" in check.reason


# -- timing and asynchrony ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_timing_host_timer_agrees_with_events_when_it_synchronises(tmp_path, monkeypatch, backend):
    ctx, _ = gpu_context(monkeypatch, tmp_path, backend)
    VirtualGpu().install(monkeypatch)
    check = device.check_timing(ctx)
    assert check.verdict == "PASS", check
    assert check.details["reps"] == 200  # calibrated to about 0.2 s of 1 ms matmuls
    assert check.details["events_s"] == pytest.approx(0.2)
    assert check.details["host_s"] == pytest.approx(0.2, abs=1e-4)


def test_timing_fails_when_the_host_timer_does_not_wait(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path)
    gpu = VirtualGpu().install(monkeypatch)
    ctx.seconds_per_matmul = 1e-3  # calibrated while synchronize still worked
    gpu.sync_waits = False
    check = device.check_timing(ctx)
    assert check.verdict == "FAIL"
    assert "disagree beyond the tolerance" in check.reason


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_a_queued_kernel_stays_inside_the_measured_region(tmp_path, monkeypatch, backend):
    ctx, _ = gpu_context(monkeypatch, tmp_path, backend)
    VirtualGpu().install(monkeypatch)
    check = device.check_async(ctx)
    assert check.verdict == "PASS", check
    assert check.details["kernel_s"] == pytest.approx(0.2)
    assert check.details["launch_s"] < 1e-3 < 0.19 < check.details["region_s"]  # queued, then waited for
    assert "synchronous" not in check.figure


def test_a_timer_without_synchronisation_lets_the_kernel_escape(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path)
    gpu = VirtualGpu().install(monkeypatch)
    original = gpu.synchronize
    calls = []

    def sync_only_first() -> None:  # the probe's calibration synchronises; the measured region does not
        calls.append(1)
        if len(calls) <= 2:
            original()

    monkeypatch.setattr(torch.cuda, "synchronize", sync_only_first)
    check = device.check_async(ctx)
    assert check.verdict == "FAIL"
    assert "escaped the measured region" in check.reason


def test_async_check_skips_on_cpu(tmp_path):
    assert device.check_async(Context(torch=torch, device="cpu", out=tmp_path, budget_s=300)).verdict == "SKIP"


# -- memory and the out-of-memory probe ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_memory_reads_allocated_and_reserved_apart_against_mem_get_info(tmp_path, monkeypatch, backend):
    ctx, log = gpu_context(monkeypatch, tmp_path, backend)
    ctx.facts = {"gpu_memory_bytes": TOTAL_BYTES}
    log.allocated_bytes, log.reserved_bytes = 2 * device.PROBE_BYTES, 2 * device.PROBE_BYTES + 2**20
    check = device.check_memory(ctx)
    assert check.verdict == "PASS", check
    details = check.details
    assert details["peak_allocated_bytes"] == log.allocated_bytes
    assert details["peak_reserved_bytes"] == log.reserved_bytes  # its own figure, never added to the other
    assert details["device_used_bytes"] == TOTAL_BYTES - log.free_bytes
    calls = log.names("reset_peak_memory_stats", "max_memory_allocated", "max_memory_reserved", "mem_get_info")
    assert calls == ["reset_peak_memory_stats", "max_memory_allocated", "max_memory_reserved", "mem_get_info"]


def test_memory_fails_when_allocated_exceeds_reserved(tmp_path, monkeypatch):
    ctx, log = gpu_context(monkeypatch, tmp_path)
    log.allocated_bytes, log.reserved_bytes = 2 * device.PROBE_BYTES, device.PROBE_BYTES
    check = device.check_memory(ctx)
    assert check.verdict == "FAIL" and "above reserved peak" in check.reason


def test_memory_fails_when_the_counter_misses_the_blocks_held(tmp_path, monkeypatch):
    ctx, log = gpu_context(monkeypatch, tmp_path)
    log.allocated_bytes = device.PROBE_BYTES  # only one of the two blocks seen
    check = device.check_memory(ctx)
    assert check.verdict == "FAIL" and "max_memory_allocated rose by" in check.reason


class Block:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def numel(self) -> int:
        return self.nbytes


def refuse_after(monkeypatch, steps: int) -> None:
    made = []

    def allocate(torch_, nbytes):
        if len(made) >= steps:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.19 GiB")
        made.append(Block(nbytes))
        return made[-1]

    monkeypatch.setattr("runner.trial.faults.allocate_device_bytes", allocate)


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_oom_probe_fills_until_refused_then_releases(tmp_path, monkeypatch, backend):
    ctx, log = gpu_context(monkeypatch, tmp_path, backend)
    refuse_after(monkeypatch, 31)
    check = device.check_oom(ctx)
    assert check.verdict == "PASS", check
    assert check.details["steps"] == 31
    assert check.details["step_bytes"] == log.free_bytes // 32
    assert check.details["refusal"].startswith("OutOfMemoryError: CUDA out of memory")
    assert "refused after 31 steps" in check.figure


def test_oom_probe_fails_when_the_device_never_refuses(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path)
    refuse_after(monkeypatch, 10**6)
    check = device.check_oom(ctx)
    assert check.verdict == "FAIL" and check.details["steps"] == FILL_MAX_STEPS  # capped, never for ever
    assert "never refused" in check.reason


def test_oom_probe_fails_when_memory_does_not_come_back(tmp_path, monkeypatch):
    ctx, log = gpu_context(monkeypatch, tmp_path)
    refuse_after(monkeypatch, 5)
    reads = iter([0, 3 * 2**30])  # allocated before the fill, and after the release
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: next(reads))
    check = device.check_oom(ctx)
    assert check.verdict == "FAIL" and "memory not released" in check.reason


def test_oom_probe_reports_another_failure_as_such(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path)

    def broken(torch_, nbytes):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr("runner.trial.faults.allocate_device_bytes", broken)
    check = device.check_oom(ctx)
    assert check.verdict == "FAIL" and "the fill failed otherwise: RuntimeError" in check.reason


# -- energy -------------------------------------------------------------------------------------------------------


def test_energy_reads_the_cards_counter_around_the_work(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path, nvml=False)
    nvml = FakeNvml(energy_mj=[1_000_000, 1_250_500]).install(monkeypatch)
    VirtualGpu().install(monkeypatch)
    device.check_gpu(ctx)
    check = device.check_energy(ctx)
    assert check.verdict == "PASS", check
    assert check.details["joules"] == pytest.approx(250.5)
    assert nvml.energy_handles == [1, 1]  # torch's card, not NVML device 0
    assert "NVML energy counter" in check.figure


def test_energy_counter_that_does_not_advance_fails(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path, nvml=False)
    FakeNvml(energy_mj=[5_000, 5_000]).install(monkeypatch)
    VirtualGpu().install(monkeypatch)
    device.check_gpu(ctx)
    check = device.check_energy(ctx)
    assert check.verdict == "FAIL" and "did not advance" in check.reason


def test_energy_unreadable_is_a_skip_with_the_reason(tmp_path, monkeypatch):
    ctx, _ = gpu_context(monkeypatch, tmp_path, "rocm")
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    VirtualGpu().install(monkeypatch)
    ctx.facts = {"backend": "rocm"}
    check = device.check_energy(ctx)
    assert check.verdict == "SKIP"
    assert check.reason == "amdsmi energy counter not readable: amdsmi not installed in this environment"


def test_cpu_energy_without_rapl_is_a_skip_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr("runner.trial.energy.POWERCAP", tmp_path / "no-powercap")
    check = device.check_energy(Context(torch=torch, device="cpu", out=tmp_path, budget_s=300))
    assert check.verdict == "SKIP" and "no RAPL powercap interface" in check.reason
