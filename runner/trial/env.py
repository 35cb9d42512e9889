"""What this trial really runs on, read at run time (never inferred from a card name).

Every field is either a value or ``None`` with a reason in ``reasons``.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from protocol import __version__

_CPU_FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma", "sse4_2")


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cpu_facts() -> dict[str, Any]:
    model = None
    flags: list[str] = []
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model is None:
                model = value.strip()
            if key.strip() == "flags" and not flags:
                present = set(value.split())
                flags = [f for f in _CPU_FLAGS_OF_INTEREST if f in present]
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    memory_total = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                memory_total = int(line.split()[1]) * 1024  # the kernel reports kibibytes
                break
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu_model": model,
        "cpu_flags": flags,
        "cpu_count_logical": os.cpu_count(),
        "cpu_affinity_count": affinity,
        "memory_total_bytes": memory_total,
        "machine": platform.machine(),
        "kernel": platform.release(),
    }


def software_facts(torch: Any) -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": _package_version("transformers"),
        "tokenizers": _package_version("tokenizers"),
        "safetensors": _package_version("safetensors"),
        "numpy": _package_version("numpy"),
        "isocost": __version__,  # the code that ran (an image or a checkout need not have its package installed)
        "torch_cuda": getattr(torch.version, "cuda", None),
        "torch_hip": getattr(torch.version, "hip", None),
        # which torch build ran (a CPU wheel, or a CUDA/ROCm one): `make setup` prefers the CPU build
        "torch_build": ("rocm " + str(torch.version.hip) if getattr(torch.version, "hip", None)
                        else "cuda " + str(torch.version.cuda) if getattr(torch.version, "cuda", None) else "cpu"),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
    }


def device_facts(torch: Any, device: str) -> tuple[dict[str, Any], dict[str, str]]:
    """GPU name, UUID, memory, capability, driver and backend; reasons for what is unknown."""
    facts: dict[str, Any] = {
        "backend": "cpu",
        "backend_version": None,
        "gpu_name": None,
        "gpu_uuid": None,
        "gpu_memory_bytes": None,
        "compute_capability": None,
        "gfx_arch": None,
        "driver_version": None,
        "cudnn_version": None,
        "rocm_version": None,
        "pci_bus_id": None,
    }
    reasons: dict[str, str] = {}
    if device == "cpu":
        facts["backend_version"] = f"torch {torch.__version__} CPU kernels"
        for key in ("gpu_name", "gpu_uuid", "gpu_memory_bytes", "compute_capability",
                    "gfx_arch", "driver_version", "cudnn_version", "rocm_version", "pci_bus_id"):
            reasons[key] = "CPU trial: no GPU in use"
        return _with_compat(facts, torch), reasons

    hip = getattr(torch.version, "hip", None)
    facts["backend"] = "rocm" if hip else "cuda"
    facts["backend_version"] = hip or torch.version.cuda
    props = torch.cuda.get_device_properties(0)
    facts["gpu_name"] = props.name
    facts["gpu_memory_bytes"] = int(props.total_memory)
    facts["pci_bus_id"] = torch_pci_bus_id(props)
    facts["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    facts["hip_visible_devices"] = os.environ.get("HIP_VISIBLE_DEVICES")
    if hip:
        facts["gfx_arch"] = str(getattr(props, "gcnArchName", "")).split(":")[0] or None
        reasons["compute_capability"] = "ROCm device: see gfx_arch"
        reasons["cudnn_version"] = "ROCm build: no cuDNN"
        try:
            facts["rocm_version"] = Path("/opt/rocm/.info/version").read_text(encoding="utf-8").strip()
        except OSError:
            reasons["rocm_version"] = "/opt/rocm/.info/version not readable in this image"
        _amdsmi(facts, reasons)
    else:
        facts["compute_capability"] = f"{props.major}.{props.minor}"
        facts["arch_list"] = list(torch.cuda.get_arch_list())  # the card floor: what the wheel was compiled for
        reasons["gfx_arch"] = "NVIDIA device: see compute_capability"
        reasons["rocm_version"] = "CUDA build"
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        facts["cudnn_version"] = str(cudnn) if cudnn else None
        if cudnn is None:
            reasons["cudnn_version"] = "cuDNN not available to torch"
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            facts["gpu_uuid"] = text if text.startswith("GPU-") else f"GPU-{text}"
        _nvml(facts, reasons)
    return _with_compat(facts, torch), {k: v for k, v in reasons.items() if facts.get(k) is None}


def _with_compat(facts: dict[str, Any], torch: Any) -> dict[str, Any]:
    """Check the detected combination against the shipped CUDA driver table / ROCm matrix."""
    from protocol.hardware.compat import check_device

    facts["compat"] = check_device(facts, getattr(torch, "__version__", None))
    return facts


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def torch_pci_bus_id(props: Any) -> str | None:
    """``dddddddd:bb:dd.0`` of the card torch uses, from its device properties (None if torch lacks them)."""
    try:
        return f"{int(props.pci_domain_id):08x}:{int(props.pci_bus_id):02x}:{int(props.pci_device_id):02x}.0"
    except (AttributeError, TypeError, ValueError):
        return None


def _pci_key(text: str | None) -> tuple[int, ...] | None:
    """``0000:65:00.0`` and ``00000000:65:00.0`` name the same card."""
    if not text:
        return None
    parts = text.replace(".", ":").split(":")
    try:
        return tuple(int(part, 16) for part in parts)
    except ValueError:
        return None


def nvml_handle(pynvml: Any, uuid: str | None, pci_bus_id: str | None) -> tuple[Any, str]:
    """The NVML handle of the card torch uses: matched by UUID, else by PCI bus id; never "device 0"."""
    if not uuid and not pci_bus_id:
        return None, "torch reported neither the card's UUID nor its PCI bus id: NVML cannot be matched to it"
    want_pci = _pci_key(pci_bus_id)
    seen = []
    for index in range(int(pynvml.nvmlDeviceGetCount())):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        nvml_uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
        if uuid and nvml_uuid.lower() == uuid.lower():
            return handle, ""
        bus = _text(pynvml.nvmlDeviceGetPciInfo(handle).busId)
        if want_pci is not None and _pci_key(bus) == want_pci:
            return handle, ""
        seen.append(f"{nvml_uuid} at {bus}")
    return None, f"no NVML device matches torch's card (uuid {uuid}, PCI {pci_bus_id}); NVML sees {seen}"


def _nvml(facts: dict[str, Any], reasons: dict[str, str]) -> None:
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        reasons["driver_version"] = "nvidia-ml-py (pynvml) not installed in this environment"
        return
    try:
        pynvml.nvmlInit()
        try:
            facts["driver_version"] = _text(pynvml.nvmlSystemGetDriverVersion())
            handle, why = nvml_handle(pynvml, facts.get("gpu_uuid"), facts.get("pci_bus_id"))
            if handle is None:
                reasons["nvml_match"] = why
            else:
                facts["nvml_uuid"] = _text(pynvml.nvmlDeviceGetUUID(handle))
                facts["gpu_uuid"] = facts.get("gpu_uuid") or facts["nvml_uuid"]
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVML raises its own error types
        reasons["driver_version"] = f"NVML unavailable: {exc}"


def amdsmi_handle(amdsmi: Any, pci_bus_id: str | None) -> tuple[Any, str]:
    """The amdsmi handle of the card torch uses: matched by PCI bus id (BDF); the only card if there is one."""
    handles = list(amdsmi.amdsmi_get_processor_handles())
    want = _pci_key(pci_bus_id)
    seen = []
    for handle in handles:
        bdf = str(amdsmi.amdsmi_get_gpu_device_bdf(handle))
        if want is not None and _pci_key(bdf) == want:
            return handle, ""
        seen.append(bdf)
    if len(handles) == 1 and want is None:
        return handles[0], ""
    return None, f"no amdsmi device matches torch's card (PCI {pci_bus_id}); amdsmi sees {seen}"


def _amdsmi(facts: dict[str, Any], reasons: dict[str, str]) -> None:
    try:
        import amdsmi  # type: ignore[import-not-found]
    except ImportError:
        reasons["driver_version"] = "amdsmi not installed in this environment"
        reasons["gpu_uuid"] = "amdsmi not installed in this environment"
        return
    try:
        amdsmi.amdsmi_init()
        try:
            handle, why = amdsmi_handle(amdsmi, facts.get("pci_bus_id"))
            if handle is None:
                reasons["gpu_uuid"] = why
            else:
                facts["driver_version"] = str(amdsmi.amdsmi_get_gpu_driver_info(handle).get("driver_version"))
                facts["gpu_uuid"] = str(amdsmi.amdsmi_get_gpu_device_uuid(handle))
        finally:
            amdsmi.amdsmi_shut_down()
    except Exception as exc:  # amdsmi raises its own error types
        reasons["driver_version"] = f"amdsmi unavailable: {exc}"


def gpu_energy_meter(facts: dict[str, Any]) -> Any:
    """An energy meter (``runner.trial.energy``) for the card in ``facts`` (from :func:`device_facts`)."""
    from runner.trial.energy import AmdsmiEnergy, NoMeter, NvmlEnergy

    backend = facts.get("backend")
    if backend == "cuda":
        try:
            import pynvml
        except ImportError:
            return NoMeter("nvidia-ml-py (pynvml) not installed in this environment")
        try:
            pynvml.nvmlInit()
            handle, why = nvml_handle(pynvml, facts.get("gpu_uuid"), facts.get("pci_bus_id"))
        except Exception as exc:  # NVML raises its own error types
            return NoMeter(f"NVML unavailable: {exc}")
        return NvmlEnergy(pynvml, handle) if handle is not None else NoMeter(why)
    if backend == "rocm":
        try:
            import amdsmi
        except ImportError:
            return NoMeter("amdsmi not installed in this environment")
        try:
            amdsmi.amdsmi_init()
            handle, why = amdsmi_handle(amdsmi, facts.get("pci_bus_id"))
        except Exception as exc:  # amdsmi raises its own error types
            return NoMeter(f"amdsmi unavailable: {exc}")
        return AmdsmiEnergy(amdsmi, handle) if handle is not None else NoMeter(why)
    return NoMeter("CPU trial: no GPU energy counter")
