"""GPU pre-flight for ``isocost hosts check``: one tiny container of the trial image must see the GPU.

Before rented time goes into a campaign: the container gets the GPU exactly as a trial would
(:func:`runner.launch.daemon.gpu.gpu_options`), runs ``python3 -m runner.trial.probe`` (no network,
read-only root, no capabilities, the image's non-root user), and its answer is judged here: a GPU
must be visible, a tiny computation must be right, and the driver (CUDA: NVIDIA's minimum-driver
table) or the ROCm/GPU/PyTorch combination (AMD's matrix) must not be "not listed".
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.hardware.compat import NOT_LISTED


@dataclass(frozen=True)
class GpuProbe:
    ok: bool
    summary: str  # one line for the hosts check output
    answer: dict[str, Any] = field(default_factory=dict)


def run_probe(client: Any, image_ref: str, user: str, gpu: dict[str, Any], timeout_s: float = 300) -> dict[str, Any]:
    """Create, run and remove the probe container; its JSON answer (or ``{"error": ...}``)."""
    kwargs: dict[str, Any] = {
        "image": image_ref,
        "name": f"isocost-gpu-probe-{uuid.uuid4().hex[:8]}",
        "entrypoint": ["python3", "-m", "runner.trial.probe"],
        "command": [],
        "user": user,
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges", *gpu.get("security_opt", [])],
        "environment": {"HOME": "/tmp", **gpu.get("environment", {})},
        "labels": {"org.isocost.kind": "gpu-probe"},
        "pids_limit": 128,
        "detach": True,
    }
    for key in ("device_requests", "devices", "group_add"):
        if key in gpu:
            kwargs[key] = gpu[key]
    container = client.containers.create(**kwargs)
    try:
        container.start()
        code = int(container.wait(timeout=timeout_s).get("StatusCode", -1))
        out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace").strip().splitlines()
        err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace").strip().splitlines()
    finally:
        try:
            container.remove(force=True)
        except Exception:  # noqa: BLE001 - best effort; labelled for cleanup
            pass
    try:
        answer = dict(json.loads(out[-1]))
    except (IndexError, ValueError):
        answer = {"error": f"the probe container exited with {code}: {(err or out or ['no output'])[-1][:300]}"}
    if code != 0 and "error" not in answer:
        answer["error"] = f"the probe container exited with {code}"
    return answer


def judge(answer: dict[str, Any], stack: str) -> GpuProbe:
    """Is this answer a GPU a campaign can use? One line either way."""
    if answer.get("error"):
        return GpuProbe(False, f"GPU probe failed: {answer['error']}", answer)
    if answer.get("build") != stack:
        return GpuProbe(False, f"the image's torch {answer.get('torch')} is a {answer.get('build')} build, the study "
                               f"needs {stack}", answer)
    if not answer.get("gpu_visible"):
        return GpuProbe(False, f"a container of the {stack} image sees no GPU (torch {answer.get('torch')})", answer)
    facts = answer.get("facts") or {}
    compat = facts.get("compat") or {}
    name = f"{facts.get('gpu_name')} ({facts.get('gpu_uuid') or 'no UUID'})"
    if compat.get("status") == NOT_LISTED:  # the driver or card floor, before the computation (not run then)
        return GpuProbe(False, f"{name}: {compat.get('detail')} ({compat.get('table')} {compat.get('data_version')})",
                        answer)
    if not answer.get("compute_ok"):
        return GpuProbe(False, f"{name}: a tiny computation on the GPU gave a wrong answer", answer)
    driver = facts.get("driver_version") or facts.get("rocm_version") or "driver not read"
    return GpuProbe(True, f"{name}, {driver}; compat {compat.get('status')}: {compat.get('detail')}", answer)
