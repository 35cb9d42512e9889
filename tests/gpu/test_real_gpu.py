"""On a real GPU (marker ``gpu``; skipped without one): the trial's GPU path end to end, through processes.

Run on a GPU machine with: ``python -m pytest -q -m gpu tests/gpu``. Nothing here runs on a CPU-only
machine (CI): the fake-backend tests in tests/unit/test_trial_gpu_fake.py cover the calls there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU visible to torch"),
]

STACK = "rocm" if getattr(torch.version, "hip", None) else "cuda"


def gpu_workspace(make_workspace, **options):
    replace = {'stack = "cpu"\ndevice = "cpu"': f'stack = "{STACK}"\ndevice = "cuda"', **options.pop("replace", {})}
    return make_workspace(replace=replace, **options)


def run(study: Path, out: Path) -> list[dict[str, str]]:
    from runner.campaign_dir.layout import read_raw
    from runner.cli import main

    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    return read_raw(out / "raw.csv")


def test_gpu_trial_records_device_time_memory_energy_and_card(make_workspace, tmp_path):
    rows = run(gpu_workspace(make_workspace, n=40, repetitions=1, batches="[1, 8]"), tmp_path / "out")
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row in rows:
        trial = tmp_path / "out" / "trials" / row["trial_id"]
        pass_s, gpu_s = float(row["pass_s"]), float(row["gpu_pass_s"])
        assert 0 < gpu_s <= pass_s  # device time of the forwards, inside the pass
        assert float(row["device_busy_share"]) == pytest.approx(gpu_s / pass_s)
        assert 0 < int(row["peak_allocated_bytes"]) <= int(row["peak_reserved_bytes"])
        assert int(row["device_used_max_bytes"]) >= int(row["peak_reserved_bytes"])  # whole device ⊇ this process
        records = [json.loads(line) for line in (trial / "batches.jsonl").read_text().splitlines()]
        assert sum(r["n_inputs"] for r in records) == 40
        assert sum(r["device_s"] for r in records) == pytest.approx(gpu_s)
        status = json.loads((trial / "status.json").read_text())
        assert (status["gpu_energy_j"] is None) != (status["gpu_energy_reason"] == "")
        if status["gpu_energy_j"] is not None:
            assert status["gpu_energy_j"] > 0
        manifest = json.loads((trial / "manifest.json").read_text())
        device = manifest["device"]
        assert device["backend"] == STACK and device["gpu_name"]
        if STACK == "cuda":
            props = torch.cuda.get_device_properties(0)
            if getattr(props, "uuid", None) is not None:
                assert str(props.uuid) in device["gpu_uuid"]  # the card torch used, not "NVML device 0"
        assert manifest["attention_ops"], manifest["empty_reasons"].get("attention_ops")
        assert manifest["numerics"]["applies_to"] == "GPU kernels"


def test_half_precisions_agree_with_fp32(make_workspace, tmp_path):
    study = gpu_workspace(make_workspace, n=40, repetitions=1, batches="[8]",
                          extra='\n[[series]]\nname = "precision"\nfield = "precision"\n'
                                'values = ["fp32", "fp16", "bf16"]\n')
    rows = run(study, tmp_path / "out")
    assert {r["precision"]: r["status"] for r in rows} == {"fp32": "ok", "fp16": "ok", "bf16": "ok"}
    labels = {}
    for row in rows:
        lines = (tmp_path / "out" / row["predictions_path"]).read_text().splitlines()
        labels[row["precision"]] = {p["id"]: p["label"] for p in map(json.loads, lines)}
    for precision in ("fp16", "bf16"):
        same = sum(labels[precision][i] == labels["fp32"][i] for i in labels["fp32"])
        assert same / len(labels["fp32"]) >= 0.95, precision


def test_compiled_variant_does_not_recompile_inside_the_pass(make_workspace, tmp_path):
    pytest.importorskip("triton")
    study = gpu_workspace(make_workspace, n=30, repetitions=1, batches="[4]",
                          replace={"compile = false": "compile = true"})
    [row] = run(study, tmp_path / "out")
    assert row["status"] == "ok"
    assert row["pass_compilations"] == "0", row["notes"]  # the warm-up ran the pass's shapes
