"""Energy of the measured pass: cumulative counters read just before and just after it.

- GPU, NVIDIA: NVML ``nvmlDeviceGetTotalEnergyConsumption`` (millijoules since the driver
  loaded) of the card this trial uses (matched by UUID or PCI bus id, never "device 0").
- GPU, AMD: amdsmi ``amdsmi_get_energy_count`` (accumulator × resolution, microjoules), when
  the ``amdsmi`` module is importable.
- CPU: RAPL package domains, ``/sys/class/powercap/intel-rapl:N/energy_uj`` (microjoules; the
  counter wraps at ``max_energy_range_uj``), summed over packages, when readable. Since Linux
  5.10 these files are root-only, so a non-root trial usually gets ``None`` with that reason.

Each meter answers ``(joules, "")`` or ``(None, reason)``; a reading that failed is never 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")

_PACKAGE_DIR = re.compile(r"^intel-rapl:\d+$")  # top-level domains are packages; intel-rapl:0:0 are parts


@dataclass
class RaplMeter:
    """CPU package energy from RAPL powercap counters."""

    root: Path = field(default_factory=lambda: POWERCAP)
    _domains: list[tuple[Path, int]] = field(default_factory=list)
    _start: list[int] = field(default_factory=list)
    reason: str = ""

    def start(self) -> None:
        self._domains, self._start = [], []
        if not self.root.is_dir():
            self.reason = f"no RAPL powercap interface at {self.root} (not exposed on this host or in this container)"
            return
        dirs = sorted(p for p in self.root.iterdir() if _PACKAGE_DIR.match(p.name))
        if not dirs:
            self.reason = f"no RAPL package domain (intel-rapl:N) under {self.root}"
            return
        try:
            for path in dirs:
                limit = int((path / "max_energy_range_uj").read_text().strip())
                self._domains.append((path, limit))
                self._start.append(int((path / "energy_uj").read_text().strip()))
        except PermissionError:
            self._domains = []
            self.reason = (f"{dirs[0]}/energy_uj is not readable by this user (root-only since Linux 5.10, "
                           "CVE-2020-8694)")
        except (OSError, ValueError) as exc:
            self._domains = []
            self.reason = f"RAPL counter unreadable: {exc}"

    def stop(self) -> tuple[float | None, str]:
        if not self._domains:
            return None, self.reason or "RAPL meter was not started"
        total_uj = 0
        try:
            for (path, limit), before in zip(self._domains, self._start, strict=True):
                after = int((path / "energy_uj").read_text().strip())
                total_uj += after - before if after >= before else after + limit - before  # one wrap at most
        except (OSError, ValueError) as exc:
            return None, f"RAPL counter unreadable at the end of the pass: {exc}"
        return total_uj / 1e6, ""


@dataclass
class NvmlEnergy:
    """Energy of one NVIDIA card through NVML; ``handle`` comes from :func:`runner.trial.env.nvml_handle`."""

    pynvml: Any
    handle: Any
    _start_mj: int | None = None
    reason: str = ""

    def start(self) -> None:
        try:
            self._start_mj = int(self.pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception as exc:  # NVML raises its own error types (e.g. NotSupported before Volta)
            self._start_mj, self.reason = None, f"NVML energy counter unavailable: {exc}"

    def stop(self) -> tuple[float | None, str]:
        if self._start_mj is None:
            return None, self.reason or "NVML energy meter was not started"
        try:
            end = int(self.pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception as exc:  # NVML raises its own error types
            return None, f"NVML energy counter unavailable at the end of the pass: {exc}"
        return (end - self._start_mj) / 1000.0, ""


@dataclass
class AmdsmiEnergy:
    """Energy of one AMD card through amdsmi's energy accumulator."""

    amdsmi: Any
    handle: Any
    _start_uj: float | None = None
    reason: str = ""

    def _read_uj(self) -> float:
        data = self.amdsmi.amdsmi_get_energy_count(self.handle)
        count = data.get("energy_accumulator", data.get("power"))
        return float(count) * float(data["counter_resolution"])

    def start(self) -> None:
        try:
            self._start_uj = self._read_uj()
        except Exception as exc:  # amdsmi raises its own error types
            self._start_uj, self.reason = None, f"amdsmi energy counter unavailable: {exc}"

    def stop(self) -> tuple[float | None, str]:
        if self._start_uj is None:
            return None, self.reason or "amdsmi energy meter was not started"
        try:
            end = self._read_uj()
        except Exception as exc:  # amdsmi raises its own error types
            return None, f"amdsmi energy counter unavailable at the end of the pass: {exc}"
        return (end - self._start_uj) / 1e6, ""


@dataclass
class NoMeter:
    """A counter that cannot be read here: always ``None`` with the reason."""

    reason: str

    def start(self) -> None:
        pass

    def stop(self) -> tuple[float | None, str]:
        return None, self.reason
