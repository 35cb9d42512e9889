"""End-to-end: ``isocost selfcheck --device cpu`` in real processes (the check process, its trials), on this
machine's torch, whichever build it is: the GPU checks SKIP with their reasons, the trial checks PASS."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from protocol.records.selfcheck import CHECK_NAMES
from runner.cli import main

pytestmark = pytest.mark.e2e


def test_selfcheck_on_cpu_passes_the_trial_checks_and_skips_the_gpu_ones_with_reasons(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "check"
    result = CliRunner().invoke(main, ["selfcheck", "--device", "cpu", "--demo", str(tmp_path / "no-demo"),
                                       "--out", str(out), "--texts", "12", "--budget-s", "240"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("isocost selfcheck: device cpu (asked: cpu), budget 240 s")
    assert lines[2].startswith("model: random: a randomly initialised BERT encoder built from a config (no download)")
    verdicts = {line.split()[1]: line.split()[0] for line in lines if line[:4] in ("PASS", "FAIL", "SKIP")}
    assert list(verdicts) == list(CHECK_NAMES)  # every check, in order
    assert verdicts["warmup"] == verdicts["numerics"] == "PASS", result.output
    for name in ("gpu", "async", "memory", "oom", "oom-trial", "compile"):
        assert verdicts[name] == "SKIP", name
    assert "why: --device cpu: no GPU is checked" in result.output
    assert "why: CPU: no CUDA events to compare the host timer with" in result.output
    assert re.search(r"bf16 agrees with fp32 on \d+/12 ids", result.output)
    assert "fp16 not run: GPU-only" in result.output
    assert "random weights: agreement reported, not judged" in result.output
    rapl = verdicts["energy"] == "PASS"  # RAPL counters readable here (root on bare metal), else a SKIP with why
    assert lines[-2].endswith("-> PASS") and lines[-2].startswith(f"{2 + rapl} PASS, 0 FAIL, {8 - rapl} SKIP")
    record = json.loads((out / "selfcheck.json").read_text())
    assert record["schema_version"] == 1 and record["device"] == "cpu"
    assert record["environment"]["software"]["torch"]
    assert (out / "selfcheck.txt").read_text() == "\n".join(lines[:-1]) + "\n"
    assert (out / "trials" / "fp32" / "predictions.jsonl").read_text().count("\n") == 12


def test_selfcheck_cuts_what_its_budget_cannot_hold_and_nothing_checked_is_no_success(tmp_path):
    pytest.importorskip("torch")
    result = CliRunner().invoke(main, ["selfcheck", "--device", "cpu", "--demo", str(tmp_path / "no-demo"),
                                       "--out", str(tmp_path / "check"), "--budget-s", "10"])
    rapl = "PASS  energy" in result.output  # the only CPU check that can pass in 10 s, where RAPL is readable
    assert result.exit_code == (0 if rapl else 3), result.output  # every check skipped: not a PASS
    assert "why: cut to fit --budget-s 10: needs about 15 s" in result.output
    assert result.output.splitlines()[-2].endswith("-> PASS" if rapl else "-> SKIP")


ROOT = Path(__file__).resolve().parents[2]


def test_make_gpu_carry_then_gpu_check_run_offline_from_the_carry(tmp_path):
    """The two make targets as a GPU session runs them, with --device cpu here: carry made, verified, checked,
    results copied flat to $OUT."""
    pytest.importorskip("torch")
    if shutil.which("make") is None:
        pytest.skip("needs make")
    from runner.trial.selfcheck_model import build_random_encoder, write_corpus

    demo = tmp_path / "demo"
    build_random_encoder(demo / "model", initializer_range=0.05)  # a stable agreement, judged as a given model
    write_corpus(demo / "corpus-quick.jsonl", None, 12)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    make = ["make", "--no-print-directory", f"BIN={Path(sys.executable).parent}", f"DEMO_DIR={demo}",
            f"GPU_CARRY={tmp_path / 'carry'}", f"RESULTS={tmp_path / 'results'}"]
    prepared = subprocess.run([*make, "-o", "demo", "gpu-carry"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    assert (tmp_path / "carry" / "carry.json").is_file()
    checked = subprocess.run([*make, "gpu-check", "GPU_DEVICE=cpu", "GPU_BUDGET_S=120", f"GPU_PYTHON={sys.executable}",
                              f"OUT={tmp_path / 'out'}"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=400, check=False)
    output = checked.stdout + checked.stderr
    assert checked.returncode == 0, output
    assert "carry intact: " in output and "PASS  warmup" in output and "PASS  numerics" in output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "selfcheck-trials.tar.gz", "selfcheck.json", "selfcheck.log", "selfcheck.txt"]
    record = json.loads((tmp_path / "out" / "selfcheck.json").read_text())
    assert record["model"]["source"] == "given" and record["model"]["path"].endswith("carry/model")
    assert "weights stored as F16" in record["model"]["description"]
