"""The device checks of ``isocost selfcheck``: the card seen, timers, memory counters, a real OOM, energy.

Each check takes the :class:`Context` and returns one :class:`protocol.records.selfcheck.Check`. They use the
trial's own pieces: :class:`runner.trial.measure.PhaseTimer` (synchronise before start and stop),
``runner.trial.env`` (device facts, NVML/amdsmi matched to torch's card), ``runner.trial.energy``
(the meters of the measured pass) and ``runner.trial.faults.fill_device`` (the out-of-memory fill).
On ``--device cpu`` the GPU checks SKIP with the reason; CPU figures are given where there are some.

Example::

    ctx = Context(torch=torch, device="cuda", out=Path("out"), budget_s=300)
    check_timing(ctx).figure   # 'host 0.2031 s, CUDA events 0.2029 s around 40 matmuls …'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.records.selfcheck import (
    ASYNC_CONTAINED_SHARE,
    TIMING_ABSOLUTE_TOLERANCE_S,
    TIMING_RELATIVE_TOLERANCE,
    TIMING_TARGET_S,
    Check,
    failed,
    passed,
    skipped,
)
from runner.trial.measure import PhaseTimer, clock, peak_rss_bytes

#: Side of the timing workload's square matmuls: large enough to keep a GPU busy, small on a CPU.
MATMUL_SIZE = {True: 2048, False: 256}
PROBE_BYTES = 256 * 2**20
ENERGY_WORKLOAD_S = 0.5


@dataclass
class Context:
    """What every check needs: torch, the device asked for, where to write, what was found so far."""

    torch: Any
    device: str  # cuda | rocm | cpu (the stack; torch calls both GPUs "cuda")
    out: Path
    budget_s: float
    #: Where the checks' own tensors go; the fake-GPU tests keep them on the CPU while torch.cuda is faked.
    tensor_device: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    usable: bool = False  # a GPU that torch sees, of the build asked for (set by the gpu check)
    seconds_per_matmul: float | None = None
    workload: Any = None  # runner.trial.selfcheck_model.Workload, once prepared
    reference: Path | None = None  # the fp32 trial's predictions.jsonl (numerics compares with it)
    reference_numerics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.tensor_device:
            self.tensor_device = "cpu" if self.device == "cpu" else "cuda"

    @property
    def gpu(self) -> bool:
        return self.device != "cpu"

    def sync(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def _gib(value: float) -> str:
    return f"{value / 2**30:,.1f} GiB"


# -- the GPU seen ---------------------------------------------------------------------------------------------


def check_gpu(ctx: Context) -> Check:
    """Name, UUID, memory, driver, backend version; NVML (amdsmi) matched to torch's card by UUID / PCI."""
    if not ctx.gpu:
        return skipped("gpu", "--device cpu: no GPU is checked (the CPU is described in selfcheck.json)")
    from runner.trial.env import device_facts
    from runner.trial.torch_settings import Refusal, check_backend

    try:
        check_backend(ctx.torch, ctx.device, "cuda")
    except Refusal as exc:
        return failed("gpu", "no usable GPU", str(exc))
    ctx.facts, ctx.reasons = device_facts(ctx.torch, "cuda")
    ctx.usable = True
    facts, reasons = ctx.facts, ctx.reasons
    figure = (f"{facts['gpu_name']}, {facts.get('gpu_uuid') or 'UUID unknown'}, {_gib(facts['gpu_memory_bytes'])}, "
              f"driver {facts.get('driver_version') or '?'}, {facts['backend']} {facts.get('backend_version')}")
    problems = [f"{key} unknown: {reasons.get(key, 'not reported')}"
                for key in ("gpu_uuid", "driver_version", "backend_version") if not facts.get(key)]
    tool = "NVML" if facts["backend"] == "cuda" else "amdsmi"
    if facts["backend"] == "cuda":
        nvml_uuid = facts.get("nvml_uuid")
        if nvml_uuid is None:
            why = reasons.get("nvml_match") or reasons.get("driver_version") or "no match"
            problems.append(f"NVML did not identify torch's card: {why}")
        elif facts.get("gpu_uuid") and nvml_uuid.lower() != str(facts["gpu_uuid"]).lower():
            problems.append(f"NVML's card {nvml_uuid} is not torch's {facts['gpu_uuid']}")
    compat = facts.get("compat") or {}
    figure += (f"; {tool} agrees on the card; driver/backend {compat.get('status', '?')} in "
               f"{compat.get('table') or 'no table'}")
    if compat.get("status") == "not listed":
        problems.append(f"driver/backend not listed as compatible: {compat.get('detail')}")
    details = {"facts": facts, "reasons": reasons}
    if problems:
        return failed("gpu", figure.split(";")[0], "; ".join(problems), **details)
    return passed("gpu", figure, **details)


# -- timing -----------------------------------------------------------------------------------------------------


def _matmuls(ctx: Context, reps: int) -> None:
    torch = ctx.torch
    size = MATMUL_SIZE[ctx.gpu]
    a = torch.randn(size, size, device=ctx.tensor_device)
    b = torch.randn(size, size, device=ctx.tensor_device)
    for _ in range(reps):
        a = torch.mm(a, b) * (1.0 / size)


def calibrate(ctx: Context, target_s: float) -> int:
    """Matmuls for a region of about ``target_s`` (one run timed after a warm-up run)."""
    if ctx.seconds_per_matmul is None:
        _matmuls(ctx, 1)
        with PhaseTimer(ctx.sync) as timer:
            _matmuls(ctx, 2)
        ctx.seconds_per_matmul = max((timer.elapsed_s or 0.0) / 2, 1e-6)
    return max(1, min(20_000, math.ceil(target_s / ctx.seconds_per_matmul)))


def check_timing(ctx: Context) -> Check:
    """Host timer (synchronised, as the trial's) against CUDA events around the same known workload."""
    reps = calibrate(ctx, TIMING_TARGET_S if ctx.gpu else TIMING_TARGET_S / 4)
    if not ctx.gpu:
        with PhaseTimer() as timer:
            _matmuls(ctx, reps)
        return skipped("timing", "CPU: no CUDA events to compare the host timer with",
                       f"host timer {timer.elapsed_s:.4f} s around {reps} matmuls {MATMUL_SIZE[False]}^2 fp32",
                       host_s=timer.elapsed_s, reps=reps)
    start, stop = ctx.event(), ctx.event()
    with PhaseTimer(ctx.sync) as timer:
        start.record()
        _matmuls(ctx, reps)
        stop.record()
    host_s = float(timer.elapsed_s or 0.0)
    events_s = start.elapsed_time(stop) / 1000.0
    tolerance_s = max(TIMING_RELATIVE_TOLERANCE * host_s, TIMING_ABSOLUTE_TOLERANCE_S)
    figure = (f"host {host_s:.4f} s, CUDA events {events_s:.4f} s around {reps} matmuls {MATMUL_SIZE[True]}^2 "
              f"fp32 (differ by {abs(host_s - events_s) * 1000:.2f} ms; tolerance {tolerance_s * 1000:.1f} ms)")
    details = {"host_s": host_s, "events_s": events_s, "tolerance_s": tolerance_s, "reps": reps}
    if abs(host_s - events_s) > tolerance_s:
        return failed("timing", figure, "the host timer and the CUDA events disagree beyond the tolerance (another "
                                        "process on this GPU, or a timer that does not synchronise)", **details)
    return passed("timing", figure, **details)


def _queue_kernel(ctx: Context, cycles: int) -> None:
    """A kernel that keeps the GPU busy for ``cycles`` clock cycles; the host's call returns at once."""
    ctx.torch.cuda._sleep(cycles)


def check_async(ctx: Context) -> Check:
    """A deliberately queued kernel must not escape the measured region (the trial's synchronised timer)."""
    if not ctx.gpu:
        return skipped("async", "CPU: kernels run synchronously, nothing can be queued past the timer")
    probe_start, probe_stop = ctx.event(), ctx.event()
    ctx.sync()
    probe_start.record()
    _queue_kernel(ctx, 10_000_000)
    probe_stop.record()
    ctx.sync()
    per_cycle_s = max(probe_start.elapsed_time(probe_stop) / 1000.0 / 10_000_000, 1e-12)
    cycles = int(min(TIMING_TARGET_S / per_cycle_s, 2**62))
    start, stop = ctx.event(), ctx.event()
    with PhaseTimer(ctx.sync) as timer:
        launch_start = clock()
        start.record()
        _queue_kernel(ctx, cycles)
        stop.record()
        launch_s = clock() - launch_start
    region_s = float(timer.elapsed_s or 0.0)
    kernel_s = start.elapsed_time(stop) / 1000.0
    figure = (f"a queued kernel of {kernel_s * 1000:.1f} ms (device time): the host call returned after "
              f"{launch_s * 1000:.2f} ms, the measured region lasted {region_s * 1000:.1f} ms")
    details = {"kernel_s": kernel_s, "launch_s": launch_s, "region_s": region_s, "cycles": cycles}
    if region_s < ASYNC_CONTAINED_SHARE * kernel_s:
        return failed("async", figure, "the queued kernel escaped the measured region: the timer stopped before "
                                       "the device finished", **details)
    if launch_s >= 0.5 * kernel_s:
        figure += " (launches were synchronous here: CUDA_LAUNCH_BLOCKING set?)"
    return passed("async", figure, **details)


# -- memory -----------------------------------------------------------------------------------------------------


def check_memory(ctx: Context) -> Check:
    """Allocated and reserved peaks read apart (never summed), against the whole device's mem_get_info."""
    if not ctx.gpu:
        return skipped("memory", "CPU: no device memory counters (a CPU trial records the host's peak RSS)",
                       f"host peak RSS {_mib(peak_rss_bytes())}", peak_rss_bytes=peak_rss_bytes())
    cuda = ctx.torch.cuda
    ctx.sync()
    cuda.empty_cache()
    cuda.reset_peak_memory_stats()
    before = int(cuda.memory_allocated())
    first = ctx.torch.empty(PROBE_BYTES, dtype=ctx.torch.uint8, device=ctx.tensor_device)
    second = ctx.torch.empty(PROBE_BYTES, dtype=ctx.torch.uint8, device=ctx.tensor_device)
    ctx.sync()
    allocated, reserved = int(cuda.max_memory_allocated()), int(cuda.max_memory_reserved())
    reserved_now = int(cuda.memory_reserved())
    free, total = (int(v) for v in cuda.mem_get_info())
    del first, second
    cuda.empty_cache()
    used = total - free
    card = int(ctx.facts.get("gpu_memory_bytes") or total)
    figure = (f"2 x {_mib(PROBE_BYTES)} held: peak allocated {_mib(allocated - before)} above the "
              f"{_mib(before)} before, peak reserved {_mib(reserved)} (read apart, never summed); device in use "
              f"{_gib(used)} of {_gib(total)} (mem_get_info)")
    problems = []
    if allocated - before < 2 * PROBE_BYTES:
        problems.append(f"max_memory_allocated rose by {allocated - before} bytes for {2 * PROBE_BYTES} held")
    if allocated > reserved:
        problems.append(f"allocated peak {allocated} above reserved peak {reserved}")
    if reserved_now > used:
        problems.append(f"this process reserves {reserved_now} bytes but the device reports only {used} in use")
    if abs(total - card) > 0.01 * card:
        problems.append(f"mem_get_info's total {total} differs from the card's {card}")
    details = {"before_allocated_bytes": before, "peak_allocated_bytes": allocated, "peak_reserved_bytes": reserved,
               "reserved_bytes": reserved_now, "device_used_bytes": used, "device_total_bytes": total}
    if problems:
        return failed("memory", figure, "; ".join(problems), **details)
    return passed("memory", figure, **details)


def check_oom(ctx: Context) -> Check:
    """Allocate in steps until the device refuses (capped), then release: the memory must come back."""
    if not ctx.gpu:
        return skipped("oom", "CPU: no device memory to exhaust (filling host memory would hit the whole machine)")
    from runner.trial.faults import fill_device, is_oom

    cuda = ctx.torch.cuda
    ctx.sync()
    cuda.empty_cache()
    free_before, _ = (int(v) for v in cuda.mem_get_info())
    allocated_before = int(cuda.memory_allocated())
    held: list[Any] = []
    refusal = ""
    step = 0
    try:
        step = fill_device(ctx.torch, held)
    except Exception as exc:  # the refusal is the point; anything else is reported too  # noqa: BLE001
        refusal = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}" if is_oom(exc) else ""
        if not refusal:
            return failed("oom", "", f"the fill failed otherwise: {type(exc).__name__}: {exc}")
    steps = len(held)
    reached = sum(int(block.numel()) for block in held)
    step = step or (reached // steps if steps else 0)
    held.clear()
    cuda.empty_cache()
    free_after, _ = (int(v) for v in cuda.mem_get_info())
    allocated_after = int(cuda.memory_allocated())
    figure = (f"refused after {steps} steps of {_mib(step)} ({_gib(reached)} held, {_gib(free_before)} free "
              f"before); released: {_gib(free_after)} free again")
    details = {"steps": steps, "step_bytes": step, "held_bytes": reached, "free_before_bytes": free_before,
               "free_after_bytes": free_after, "refusal": refusal}
    if not refusal:
        return failed("oom", figure.replace("refused after", "no refusal after"),
                      "the device never refused (it overcommits memory?): a real OOM cannot be provoked", **details)
    if allocated_after != allocated_before or free_after < free_before - max(step, 64 * 2**20):
        return failed("oom", figure, f"memory not released: allocated {allocated_after} (was {allocated_before}), "
                                     f"free {free_after} (was {free_before})", **details)
    return passed("oom", figure, **details)


# -- energy -----------------------------------------------------------------------------------------------------


def check_energy(ctx: Context) -> Check:
    """The energy counter the trials read around their pass, around half a second of work here."""
    from runner.trial.energy import RaplMeter
    from runner.trial.env import gpu_energy_meter

    meter = gpu_energy_meter(ctx.facts) if ctx.gpu else RaplMeter()
    counter = ("NVML energy counter" if ctx.facts.get("backend") == "cuda" else "amdsmi energy counter") \
        if ctx.gpu else "RAPL package counters"
    reps = calibrate(ctx, ENERGY_WORKLOAD_S)
    with PhaseTimer(ctx.sync) as timer:
        meter.start()
        _matmuls(ctx, reps)
        ctx.sync()
        joules, why = meter.stop()
    seconds = float(timer.elapsed_s or 0.0)
    if joules is None:
        return skipped("energy", f"{counter} not readable: {why}")
    figure = f"{joules:.2f} J over {seconds:.2f} s ({joules / max(seconds, 1e-9):.0f} W average), {counter}"
    if joules <= 0:
        return failed("energy", figure, f"the {counter} did not advance over {seconds:.2f} s of work",
                      joules=joules, seconds=seconds)
    return passed("energy", figure, joules=joules, seconds=seconds)
