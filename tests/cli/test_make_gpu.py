"""``make run-cuda`` / ``make run-rocm`` on a machine without that GPU: fail in seconds, naming what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.isocost-installed"


@pytest.mark.parametrize(("target", "device", "missing"), [
    ("run-cuda", "/dev/nvidia0", ("NVIDIA Container Toolkit", "engine")),
    ("run-rocm", "/dev/kfd", ("/dev/kfd", "engine")),
])
def test_gpu_make_target_fails_fast_naming_what_is_missing(target: str, device: str, missing: tuple[str, ...]) -> None:
    if shutil.which("make") is None or not (ROOT / STAMP).exists():
        pytest.skip("needs make and the project's .venv")
    if Path(device).exists():
        pytest.skip(f"this machine has {device}: the target would really run")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    # -o STAMP: do not rebuild the venv here (its recipe is covered by CI's fresh clone)
    result = subprocess.run(["make", "--no-print-directory", "-o", STAMP, target], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.monotonic() - start
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert elapsed < 30, f"{target} took {elapsed:.1f} s to fail"
    assert "UNUSABLE" in output and any(word in output for word in missing), output
    assert "Traceback" not in output
    assert "demo prepare" not in output and "images build" not in output  # nothing slow ran first
