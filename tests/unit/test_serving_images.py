"""Server studies outside a local process: each image (CPU built and tested here; CUDA, ROCm locked only) carries
MLPerf LoadGen at the ``serving`` extra's pin (its hash in the lock, imported by the image's build check); a trial
environment without LoadGen is refused before the model loads, naming the module and both fixes (engine vllm's
launchers: tests/unit/test_vllm_image.py)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from runner.images.requirements import parse_lock
from runner.trial.run import missing_loadgen

ROOT = Path(__file__).resolve().parents[2]


def _serving_pin() -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = extras["serving"]
    return pin


@pytest.mark.parametrize("stack", ["cpu", "cuda", "rocm", "cpu-vllm"])
def test_each_image_locks_loadgen_at_the_serving_extras_pin(stack: str) -> None:
    name, version = _serving_pin().split("==")
    locked = {p.name: p for p in parse_lock((ROOT / f"images/{stack}/requirements.lock").read_text())}
    assert locked[name].version == version and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h)
                                                   for h in locked[name].hashes)
    assert f"{name}=={version}" in (ROOT / f"images/{stack}/requirements.in").read_text()
    assert "mlperf_loadgen" in (ROOT / f"images/{stack}/Dockerfile").read_text()  # the build's import check


def test_a_trial_without_loadgen_is_refused_naming_the_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mlperf_loadgen" else real(name, *a))
    why = missing_loadgen()
    assert "mlperf_loadgen" in why and "isocost images build --stack cpu" in why and ".[serving]" in why


def test_an_environment_with_loadgen_serves() -> None:
    pytest.importorskip("mlperf_loadgen")
    assert missing_loadgen() == ""
