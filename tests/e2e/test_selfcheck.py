"""End-to-end: ``isocost selfcheck --device cpu`` in real processes (the check process, its trials), on this
machine's torch, whichever build it is: the GPU checks SKIP with their reasons, the trial checks PASS."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from protocol.selfcheck import CHECK_NAMES
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
    assert "bf16 agrees with fp32 on 12/12 ids" in result.output and "fp16 not run: GPU-only" in result.output
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
