"""``python -m runner.trial.probe``: what a container of this image sees of the GPU (``hosts check``).

Prints one JSON line: the torch build, whether a GPU is visible, the device facts the trials record
(``runner.trial.env.device_facts``, with the driver/backend compatibility check against the tables
shipped in this image), and whether a tiny computation on the device gives the right answer.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from protocol.hardware.compat import NOT_LISTED


def probe() -> dict[str, Any]:
    import torch

    from runner.trial.env import device_facts
    from runner.trial.torch_settings import detected_backend

    result: dict[str, Any] = {"torch": torch.__version__, "build": detected_backend(torch)}
    result["gpu_visible"] = bool(torch.cuda.is_available())
    result["gpu_count"] = int(torch.cuda.device_count()) if result["gpu_visible"] else 0
    if not result["gpu_visible"]:
        return result
    facts, reasons = device_facts(torch, "cuda")
    result["facts"], result["reasons"] = facts, reasons
    if (facts.get("compat") or {}).get("status") == NOT_LISTED:  # e.g. a card older than the wheel's archs: a
        return result  # kernel would fail with "no kernel image", and the host's judge names the floor instead
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    result["compute_ok"] = float(x.sum().item()) == 1023 * 1024 / 2
    return result


def main() -> int:
    try:
        print(json.dumps(probe(), default=str))
    except Exception as exc:  # the probe reports; the host decides  # noqa: BLE001
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
