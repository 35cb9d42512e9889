"""The limits every trial container runs under: the study's, else derived from the daemon's machine.

Memory (no swap) and CPUs come from the study's ``[campaign]`` table, else from ``docker info`` of
the daemon's machine (all its CPUs; its memory less max(1 GiB, 1/8) kept for the host CLI, the
daemon and the kernel); each limit records where it came from. Files a trial writes, its /tmp and
the daemon's copy of its log are bounded too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

#: Every file a trial writes (predictions, logs, status) is at most this large unless the study says.
DEFAULT_FILE_SIZE_BYTES = 4 * 2**30
#: The daemon keeps a trial's stdout/stderr (json-file log) up to this size; the host copies it to trial.log.
DEFAULT_LOG_MAX_BYTES = 64 * 2**20
#: Memory kept back from a derived limit: max(this, the machine's memory / 8).
RESERVED_MEMORY_BYTES = 2**30


@dataclass(frozen=True)
class ContainerLimits:
    pids_limit: int = 512
    mem_limit: str | None = None  # bytes, e.g. "8589934592"; None = derive from the daemon's machine
    tmpfs_size: str = "256m"
    shm_size: str | None = None  # None = the daemon's default (64 MiB)
    cpus: float | None = None  # None = derive from the daemon's machine (all its CPUs)
    file_size_bytes: int = DEFAULT_FILE_SIZE_BYTES
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    mem_limit_source: str = ""  # "study", or how it was derived (set by resolve_limits)
    cpus_source: str = ""


def study_limits(campaign: Any) -> ContainerLimits:
    """The container limits a study's ``[campaign]`` table sets (memory, CPUs, largest file); the rest default."""
    return ContainerLimits(
        mem_limit=str(campaign.memory_limit_bytes) if campaign.memory_limit_bytes else None,
        cpus=campaign.cpu_limit,
        file_size_bytes=campaign.output_file_limit_bytes or DEFAULT_FILE_SIZE_BYTES,
    )


def engines_shm_size(variants: Iterable[Any]) -> str | None:
    """The /dev/shm a campaign's containers need: the most any of its variants' engines declares (vLLM's engine core
    needs more than Docker's 64 MiB), as ``"512m"``; None when the daemon's default is enough."""
    from protocol.engines import engine_named

    mib = max((engine_named(variant.engine).container_shm_mib for variant in variants), default=0)
    return f"{mib}m" if mib else None


def resolve_limits(limits: ContainerLimits, info: dict[str, Any]) -> ContainerLimits:
    """Fill the memory and CPU limits the study left open from the daemon machine's ``docker info``."""
    memory, memory_source = limits.mem_limit, "study"
    if memory is None and info.get("MemoryLimit") is False:
        memory_source = "none: the engine reports no memory-limit support (MemoryLimit false)"
    elif memory is None:
        total = int(info.get("MemTotal") or 0)
        if total > 0:
            kept = max(RESERVED_MEMORY_BYTES, total // 8)
            memory = str(total - kept if total - kept >= 256 * 2**20 else max(total // 2, 6 * 2**20))
            memory_source = (f"derived: the engine machine's MemTotal {total} bytes less {total - int(memory)} "
                             "kept for the host CLI, the engine and the kernel")
        else:
            memory_source = "none: the engine reported no MemTotal"
    cpus, cpus_source = limits.cpus, "study"
    if cpus is None and info.get("CpuCfsQuota") is False:
        cpus_source = "none: the engine's kernel has no CPU CFS quota (CpuCfsQuota false)"
    elif cpus is None:
        count = int(info.get("NCPU") or 0)
        if count > 0:
            cpus, cpus_source = float(count), f"derived: all {count} CPUs the engine reports (NCPU)"
        else:
            cpus_source = "none: the engine reported no NCPU"
    return replace(limits, mem_limit=memory, cpus=cpus, mem_limit_source=memory_source, cpus_source=cpus_source)


def cpus_text(cpus: float | None) -> str:
    if cpus is None:
        return "none"
    return str(int(cpus)) if float(cpus).is_integer() else str(cpus)

