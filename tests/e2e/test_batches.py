"""End-to-end: the per-batch record and the energy fields, from a real trial of the real model."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from runner.campaign_dir.layout import read_raw
from runner.cli import main

pytestmark = pytest.mark.e2e


def test_batches_jsonl_accounts_for_every_input_and_token(make_workspace, tmp_path):
    study = make_workspace(n=11, repetitions=1, batches="[4]")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    [row] = read_raw(out / "raw.csv")
    trial = out / "trials" / row["trial_id"]
    with open(out / "corpus_index.csv", newline="") as handle:
        index = list(csv.DictReader(handle))
    max_length = int(row["max_length"])

    records = [json.loads(line) for line in (trial / "batches.jsonl").read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1, 2]
    assert [r["n_inputs"] for r in records] == [4, 4, 3]
    by_bucket: dict[str, int] = {}
    for entry in index:
        by_bucket[entry["length_bucket"]] = by_bucket.get(entry["length_bucket"], 0) + 1
    seen: dict[str, int] = {}
    for r in records:
        for bucket, count in r["inputs_by_bucket"].items():
            seen[bucket] = seen.get(bucket, 0) + count
        assert sum(r["tokens_by_bucket"].values()) == r["n_tokens"]
        assert r["device_s"] is None  # CPU trial
        assert r["batch_s"] > 0
    assert seen == by_bucket  # the same buckets as corpus_index.csv (quality subgroups)
    # tokens fed to the model: each input's token count, truncated at max_length
    assert sum(r["n_tokens"] for r in records) == sum(min(int(e["n_tokens"]), max_length) for e in index)
    assert sum(r["batch_s"] for r in records) <= float(row["pass_s"])

    status = json.loads((trial / "status.json").read_text())
    for kind in ("gpu", "cpu"):
        joules, reason = status[f"{kind}_energy_j"], status[f"{kind}_energy_reason"]
        assert (joules is None) != (reason == ""), (kind, joules, reason)
    assert status["gpu_energy_reason"] == "CPU trial: no GPU energy counter"
    manifest = json.loads((trial / "manifest.json").read_text())
    # the real MiniLM with attention "sdpa" dispatches a scaled-dot-product operator, recorded by name
    assert any("scaled_dot_product" in op for op in manifest["attention_ops"]), manifest["attention_ops"]
    assert manifest["numerics"]["float32_matmul_precision"] in ("highest", "high", "medium")
    assert manifest["warmup_shapes"]  # the pass's own shapes were warmed up
    assert row["device_used_max_bytes"] == "" and "device_used_max_bytes: CPU trial" in row["empty_reasons"]
    assert row["device_busy_share"] == "" and "device_busy_share: CPU trial" in row["empty_reasons"]
    assert row["pass_compilations"] == ""
    assert "pass_compilations: not counted: the variant does not use torch.compile" in row["empty_reasons"]


def _installed_build() -> str:
    torch = pytest.importorskip("torch")
    if getattr(torch.version, "hip", None):
        return "rocm"
    return "cuda" if torch.version.cuda else "cpu"


def _refused_campaign(make_workspace, tmp_path, stack: str) -> tuple[str, list[dict[str, str]]]:
    study = make_workspace(n=4, repetitions=2, batches="[1, 2]",
                           replace={'stack = "cpu"\ndevice = "cpu"': f'stack = "{stack}"\ndevice = "cuda"'})
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 2, result.output
    assert "Error: every trial so far (2 of 4) found no GPU" in result.output
    assert "isocost hosts check" in result.output and "Traceback" not in result.output
    rows = read_raw(out / "raw.csv")
    assert [r["status"] for r in rows] == ["refused", "refused"]
    return result.output, rows


def test_gpu_campaign_on_the_wrong_torch_build_is_refused_by_check_and_run_before_any_trial(make_workspace, tmp_path):
    # A GPU stack this machine's torch is NOT built for, whichever build it is (CPU, CUDA with or without a GPU,
    # ROCm): refused on the build, never on what the machine happens to have, and before a trial starts (issue 48:
    # check said "isocost run would start", and run then refused trial after trial).
    stack = "rocm" if _installed_build() == "cuda" else "cuda"
    study = make_workspace(n=4, repetitions=2, batches="[1, 2]",
                           replace={'stack = "cpu"\ndevice = "cpu"': f'stack = "{stack}"\ndevice = "cuda"'})
    out = tmp_path / "out"
    for args in (["check", str(study), "--launcher", "process"],
                 ["run", str(study), "--out", str(out), "--launcher", "process"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code != 0 and "Traceback" not in result.output, result.output
        assert f"the study's stack is '{stack}', and the torch of" in result.output, result.output
        assert "every trial would be refused (torch build does not match the study's stack)" in result.output
        assert "isocost run would start" not in result.output
    assert not (out / "trials").exists() or not any((out / "trials").iterdir())


def test_gpu_campaign_whose_build_sees_no_gpu_stops_after_two_refused_trials(make_workspace, tmp_path, monkeypatch):
    build = _installed_build()
    if build == "cpu":
        pytest.skip("needs a CUDA or ROCm torch build (with a CPU build the refusal is the build's: the test above; "
                    "tests/unit/test_trial_gpu_fake.py fakes a CUDA build without a GPU)")
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.setenv(name, "")  # the process launcher passes them on: the trials see no GPU
    _, rows = _refused_campaign(make_workspace, tmp_path, build)
    assert "no GPU visible to the trial" in rows[0]["notes"]
