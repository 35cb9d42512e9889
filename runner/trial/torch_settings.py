"""What the trial sets in torch before loading the model, and what it reads back for the manifest.

The backend check (refuse a GPU study on the wrong torch build or without a GPU), the
determinism settings the variant declares, and the numerics switches that change GPU results.

Determinism: ``torch.use_deterministic_algorithms(mode)`` does two things, the kernel-selection
flag that eager kernels obey, and Inductor's own deterministic mode (``torch._inductor.config``),
which only ``torch.compile`` reads; setting the latter imports Inductor and Dynamo, close to a
second. A variant that compiles gets the full call; any other gets the same kernel flag through
``torch.set_deterministic_debug_mode`` (which sets exactly that flag, with ``warn_only`` off) and
Inductor is left alone. The manifest records both, read back from torch.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from protocol.records.stages import NO_GPU_ERROR, WRONG_BUILD_ERROR, Variant

#: The study's deterministic setting, as ``torch.set_deterministic_debug_mode`` takes it (errors, not warnings).
_DEBUG_MODE = {True: "error", False: "default"}


class Refusal(Exception):
    """The trial will not run here (wrong torch build for the study's stack, no GPU): status ``refused``."""


def detected_backend(torch: Any) -> str:
    """Which build of torch this is: ``rocm`` (HIP), ``cuda`` or ``cpu``."""
    if getattr(torch.version, "hip", None):
        return "rocm"
    return "cuda" if getattr(torch.version, "cuda", None) else "cpu"


def check_backend(torch: Any, stack: str, device: str) -> None:
    """Refuse to run a GPU study on the wrong torch build, or without a GPU (raises :class:`Refusal`)."""
    build = detected_backend(torch)
    if stack in ("cuda", "rocm") and build != stack:
        raise Refusal(f"{WRONG_BUILD_ERROR}: the study's stack is {stack!r} but this torch {torch.__version__} is a "
                      f"{build} build (run it in the {stack} image, or with a {stack} torch)")
    if device == "cuda" and not torch.cuda.is_available():
        raise Refusal(f"{NO_GPU_ERROR}: torch {torch.__version__} ({build} build) sees no GPU "
                      f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, "
                      f"HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES')!r})")


def apply_determinism(torch: Any, variant: Variant) -> str:
    """Set deterministic algorithms as the variant declares; returns the torch call used.

    With ``compile`` the full ``torch.use_deterministic_algorithms`` (Inductor's mode included: compile imports Inductor
    anyway); without, ``torch.set_deterministic_debug_mode``, the same kernel flag without importing Inductor.
    """
    if variant.compile:
        torch.use_deterministic_algorithms(variant.deterministic, warn_only=False)
        return "torch.use_deterministic_algorithms"
    torch.set_deterministic_debug_mode(_DEBUG_MODE[bool(variant.deterministic)])
    return "torch.set_deterministic_debug_mode"


def apply_cudnn(torch: Any, variant: Variant) -> None:
    """cuDNN: deterministic as the variant declares, never benchmark-selected kernels (GPU trials only)."""
    if variant.device == "cuda":
        torch.backends.cudnn.deterministic = variant.deterministic
        torch.backends.cudnn.benchmark = False


def determinism_record(torch: Any, variant: Variant, api: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The manifest's ``determinism`` block (declared settings and what torch reports), and reasons for empty fields."""
    inductor = sys.modules.get("torch._inductor.config") if variant.compile else None
    record = {
        "seed": variant.seed,
        "use_deterministic_algorithms": variant.deterministic,
        "deterministic_api": api,
        "cudnn_deterministic": variant.deterministic if variant.device == "cuda" else None,
        "cudnn_benchmark": False if variant.device == "cuda" else None,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "threads": variant.threads,
        # Read back from torch: what determinism really costs (extra work) in this run.
        "deterministic_algorithms_enabled": bool(torch.are_deterministic_algorithms_enabled()),
        "deterministic_warn_only": bool(torch.is_deterministic_algorithms_warn_only_enabled()),
        "fill_uninitialized_memory": _fill_uninitialized_memory(torch),
        "inductor_deterministic": bool(inductor.deterministic) if inductor is not None else None,
    }
    reasons = {}
    if inductor is None:
        reasons["inductor_deterministic"] = ("the variant does not use torch.compile: Inductor compiles nothing here, "
                                             "so its deterministic mode is not set")
    return record, reasons


def _fill_uninitialized_memory(torch: Any) -> bool | None:
    try:
        return bool(torch.utils.deterministic.fill_uninitialized_memory)
    except AttributeError:
        return None


def numerics_settings(torch: Any, device: str) -> dict[str, Any]:
    """Settings that change GPU numbers and speed (TF32, reduced-precision reductions, SDPA kernels)."""
    settings: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    cuda = torch.backends.cuda
    settings["cuda_matmul_allow_tf32"] = bool(cuda.matmul.allow_tf32)
    settings["cuda_matmul_fp32_precision"] = getattr(cuda.matmul, "fp32_precision", None)  # torch ≥ 2.9 API
    settings["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    settings["cuda_matmul_allow_fp16_reduced_precision_reduction"] = bool(
        cuda.matmul.allow_fp16_reduced_precision_reduction)
    settings["cuda_matmul_allow_bf16_reduced_precision_reduction"] = bool(
        cuda.matmul.allow_bf16_reduced_precision_reduction)
    settings["sdpa_backends_enabled"] = {
        name: bool(getattr(cuda, f"{name}_sdp_enabled")())
        for name in ("flash", "mem_efficient", "math", "cudnn") if hasattr(cuda, f"{name}_sdp_enabled")
    }
    settings["applies_to"] = "GPU kernels" if device == "cuda" else "CPU trial: the TF32/SDPA switches are GPU-only"
    return settings
