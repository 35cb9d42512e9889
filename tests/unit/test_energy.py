"""Energy counters of the measured pass: RAPL (CPU packages), NVML and amdsmi (GPU), with fakes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from runner.trial.energy import AmdsmiEnergy, NvmlEnergy, RaplMeter


def package(root: Path, name: str, energy_uj: int, max_uj: int = 262_143_328_850) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (path / "name").write_text("package-0\n")
    return path


def test_rapl_sums_packages_and_ignores_their_subdomains(tmp_path):
    p0 = package(tmp_path, "intel-rapl:0", 1_000_000)
    p1 = package(tmp_path, "intel-rapl:1", 7_000_000)
    package(tmp_path, "intel-rapl:0:0", 5)  # core subdomain: part of package 0, never added again
    meter = RaplMeter(tmp_path)
    meter.start()
    (p0 / "energy_uj").write_text("3500000\n")
    (p1 / "energy_uj").write_text("7250000\n")
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("999999999\n")
    assert meter.stop() == (2.75, "")


def test_rapl_counter_wrap_uses_max_energy_range(tmp_path):
    p0 = package(tmp_path, "intel-rapl:0", 999_000_000, max_uj=1_000_000_000)
    meter = RaplMeter(tmp_path)
    meter.start()
    (p0 / "energy_uj").write_text("4000000\n")  # wrapped past 1e9 µJ
    joules, reason = meter.stop()
    assert reason == ""
    assert joules == (1_000_000_000 - 999_000_000 + 4_000_000) / 1e6


def test_rapl_unreadable_counter_is_null_with_reason(tmp_path, monkeypatch):
    package(tmp_path, "intel-rapl:0", 1)
    real = Path.read_text

    def deny(self: Path, *args, **kwargs):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", deny)
    meter = RaplMeter(tmp_path)
    meter.start()
    joules, reason = meter.stop()
    assert joules is None
    assert "not readable by this user" in reason and "intel-rapl:0/energy_uj" in reason


def test_rapl_absent_is_null_with_reason(tmp_path):
    meter = RaplMeter(tmp_path / "none")
    meter.start()
    joules, reason = meter.stop()
    assert joules is None and "no RAPL powercap interface" in reason


def test_nvml_energy_is_the_difference_in_joules_and_errors_become_reasons():
    readings = iter([10_000, 12_500])
    nvml = SimpleNamespace(nvmlDeviceGetTotalEnergyConsumption=lambda handle: next(readings))
    meter = NvmlEnergy(nvml, handle=1)
    meter.start()
    assert meter.stop() == (2.5, "")

    def unsupported(handle):
        raise RuntimeError("Not Supported")

    meter = NvmlEnergy(SimpleNamespace(nvmlDeviceGetTotalEnergyConsumption=unsupported), handle=1)
    meter.start()
    assert meter.stop() == (None, "NVML energy counter unavailable: Not Supported")


def test_amdsmi_energy_uses_the_counter_resolution():
    readings = iter([{"energy_accumulator": 1_000, "counter_resolution": 15.3},
                     {"energy_accumulator": 3_000, "counter_resolution": 15.3}])
    smi = SimpleNamespace(amdsmi_get_energy_count=lambda handle: next(readings))
    meter = AmdsmiEnergy(smi, handle="h")
    meter.start()
    joules, reason = meter.stop()
    assert reason == ""
    assert abs(joules - 2_000 * 15.3 / 1e6) < 1e-12
