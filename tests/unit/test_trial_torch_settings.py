"""runner.trial.torch_settings: determinism as the variant declares it, recorded as torch reports it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from protocol.records.stages import Variant  # noqa: E402
from runner.trial.torch_settings import apply_determinism, determinism_record  # noqa: E402

BASE = Variant(variant_id="v", stack="cpu", device="cpu", precision="fp32", quantization="none", compile=False,
               attention="sdpa", batch_size=1, padding="longest", max_length=64, length_grouping="none",
               resume="none", threads=1, seed=0, deterministic=True)


@pytest.fixture(autouse=True)
def _restore_determinism():
    yield
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("deterministic", [True, False])
def test_eager_variant_sets_the_kernel_flag_and_records_it(deterministic):
    variant = dataclasses.replace(BASE, deterministic=deterministic)
    api = apply_determinism(torch, variant)
    assert api == "torch.set_deterministic_debug_mode"
    record, reasons = determinism_record(torch, variant, api)
    assert record["deterministic_algorithms_enabled"] is deterministic
    assert record["use_deterministic_algorithms"] is deterministic
    assert record["deterministic_warn_only"] is False
    assert record["deterministic_api"] == api
    assert record["inductor_deterministic"] is None
    assert "does not use torch.compile" in reasons["inductor_deterministic"]


def test_compiled_variant_also_sets_inductors_deterministic_mode():
    variant = dataclasses.replace(BASE, compile=True)
    api = apply_determinism(torch, variant)
    assert api == "torch.use_deterministic_algorithms"
    record, reasons = determinism_record(torch, variant, api)
    assert record["deterministic_algorithms_enabled"] is True
    assert record["inductor_deterministic"] is True
    assert reasons == {}


def test_eager_variant_does_not_import_inductor():
    """The point of the split: a fresh process that applies an eager variant's settings never loads Inductor."""
    program = textwrap.dedent("""
        import sys
        import torch
        from protocol.records.stages import Variant
        from runner.trial.torch_settings import apply_determinism
        variant = Variant(variant_id="v", stack="cpu", device="cpu", precision="fp32", quantization="none",
                          compile=False, attention="sdpa", batch_size=1, padding="longest", max_length=64,
                          length_grouping="none", resume="none", threads=1, seed=0, deterministic=True)
        apply_determinism(torch, variant)
        assert torch.are_deterministic_algorithms_enabled()
        print("torch._inductor" in sys.modules, "torch._dynamo" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300)
    assert done.stdout.split() == ["False", "False"]
