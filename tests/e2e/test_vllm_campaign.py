"""End-to-end: a text-generation campaign over ``engine = ["transformers", "vllm"]`` on the demo's SmolLM2 (fp32), and
vLLM in bf16 beside them, the isocost CLI in its own process and each trial in a fresh process: the transformers
trial with the host's interpreter, the vLLM trials with ``.venv-vllm``'s (the process launcher asks the engine).
The fp32 rows are accepted, the vLLM rows and manifests record the engine, its version and its settings as the
engine runs them, vLLM's fp32 outputs are the reference's token for token, bf16's identity and near-tie shares
are reported, and no process of the engine outlives its trial. Then a vLLM trial killed mid-pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from generation_workspace import write_generation_workspace
from vllm_env import describe, engine_processes, session_processes, vllm_python
from workspace import series_toml

from runner.campaign_dir.layout import read_raw

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SERIES = '[[series]]\nname = "engine"\nfield = "engine"\nvalues = ["transformers", "vllm"]\n'
PRECISION_SERIES = '\n[[series]]\nname = "precision"\nfield = "precision"\nvalues = ["fp32", "bf16"]\n'
SETTINGS = "\n[engines.vllm]\nmax_model_len = 512\nmax_num_seqs = 8\n"


@pytest.fixture(scope="module", autouse=True)
def _vllm_environment() -> None:
    """Skip (or fail, with ISOCOST_REQUIRE_VLLM=1) before any model is loaded when .venv-vllm is missing."""
    vllm_python()


def _isocost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ISOCOST_VLLM_PYTHON": str(vllm_python())}
    proc = subprocess.Popen([sys.executable, "-m", "runner.cli", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    stdout, stderr = proc.communicate(timeout=1500)
    assert session_processes(proc.pid) == [], "a process of the campaign outlived it"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_transformers_and_vllm_in_one_campaign_give_the_same_accepted_tokens(smollm2: Any, tmp_path: Path) -> None:
    vllm_python()
    # [base] runs vllm in fp32: one series swaps the engine (transformers, the reference), one the precision (bf16).
    study = write_generation_workspace(tmp_path / "ws", smollm2, n=6, max_new_tokens=12, replace={
        series_toml("[1, 3]"): ENGINE_SERIES + PRECISION_SERIES, "batch_size = 1\n": "batch_size = 3\n",
        "deterministic = true\n": 'deterministic = true\nengine = "vllm"\n',
        'reference_variant = "batch_size=1"': 'reference_variant = "engine=transformers"'}, extra=SETTINGS)
    out = tmp_path / "out"
    run = _isocost("run", str(study), "--out", str(out), "--launcher", "process")
    assert run.returncode == 0, run.stdout + run.stderr
    left = engine_processes(str(out))
    assert left == [], "a trial or engine process outlived the campaign:\n" + describe(left)
    assert "engine vllm runs its trials with" in run.stdout + run.stderr
    rows = {row["variant_id"]: row for row in read_raw(out / "raw.csv")}
    assert sorted(rows) == ["engine=transformers", "engine=vllm", "precision=bf16"]
    bf16 = rows.pop("precision=bf16")
    assert (bf16["status"], bf16["engine"]) == ("ok", "vllm"), bf16
    outputs = {}
    for variant_id, row in rows.items():
        engine = variant_id.split("=")[1]
        assert (row["status"], row["corpus_accepted"], row["engine"]) == ("ok", "true", engine), row
        trial = out / "trials" / row["trial_id"]
        outputs[engine] = _lines(trial / "generations.jsonl")
        batches = _lines(trial / "batches.jsonl")
        assert sum(b["generated_tokens"] for b in batches) == sum(o["n_tokens"] for o in outputs[engine])
        launcher = json.loads((trial / "launcher.json").read_text())
        assert (launcher["command"][0] == str(vllm_python())) == (engine == "vllm")
        # What peak_rss_bytes leaves out: the engine's own processes, each one's peak RSS, read at the pass's end.
        processes = json.loads((trial / "manifest.json").read_text())["engine"]["processes"]
        assert (processes["count"] >= 1 and processes["peak_rss_bytes_sum"] > 10**8) == (engine == "vllm"), processes
    manifest = json.loads((out / "trials" / rows["engine=vllm"]["trial_id"] / "manifest.json").read_text())
    assert manifest["engine"]["name"] == "vllm" and manifest["engine"]["version"] == "0.32.0"
    assert manifest["engine"]["dtype"] == "float32"
    assert manifest["engine"]["settings"] == {"enforce_eager": True, "max_model_len": 512, "max_num_seqs": 8,
                                              "kv_cache_gib": 1.0, "block_size": 128, "enable_prefix_caching": False,
                                              "server": False}
    assert [o["tokens"] for o in outputs["vllm"]] == [o["tokens"] for o in outputs["transformers"]]
    assert [o["top_ids"] for o in outputs["vllm"]] == [o["top_ids"] for o in outputs["transformers"]]
    for ours, theirs in zip(outputs["vllm"], outputs["transformers"], strict=True):
        assert ours["text"] == theirs["text"]
        assert max(abs(x - y) for a, b in zip(ours["top_logprobs"], theirs["top_logprobs"], strict=True)
                   for x, y in zip(a, b, strict=True)) < 1e-3
    bf16_manifest = json.loads((out / "trials" / bf16["trial_id"] / "manifest.json").read_text())
    assert bf16_manifest["engine"]["dtype"] == "bfloat16"
    validated = _isocost("validate", str(out))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["engine=vllm"]["agreement_details"]["identical_share"] == 1.0
    shares = verdicts["precision=bf16"]["agreement_details"]
    print(f"vllm bf16 against transformers fp32: identical {shares['identical_share']}, "
          f"near tie {shares['near_tie_share']}")
    assert shares["near_tie_share"] >= shares["identical_share"]
    summary = _isocost("summarize", str(out))
    assert summary.returncode == 0 and "engine=vllm" in summary.stdout, summary.stdout + summary.stderr
    assert "precision=bf16" in summary.stdout


def test_a_vllm_trial_killed_mid_pass_keeps_its_row_and_leaves_no_process(smollm2: Any, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial hangs after its first batch (test fault) and is killed at the trial time limit: its row is kept
    with the batch it completed, and neither the trial nor vLLM's engine core or worker outlives it."""
    vllm_python()
    # The time limit counts from the trial's start: vLLM's load (about 35 s quiet) and the first batch must fit
    # within it, and the test waits it out. At 100 s a loaded CI machine (4 workers on 2 cores) once got
    # completed 0, so 150 s (it was 180 s before).
    study = write_generation_workspace(tmp_path / "ws", smollm2, n=6, batches="[3]", timeout=150, replace={
        "deterministic = true\n": 'deterministic = true\nengine = "vllm"\n'}, extra=SETTINGS)
    out = tmp_path / "out"
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "hang-at-batch:1")
    _isocost("run", str(study), "--out", str(out), "--launcher", "process")
    rows = read_raw(out / "raw.csv")
    assert len(rows) == 1 and rows[0]["engine"] == "vllm", rows
    assert (rows[0]["status"], rows[0]["completed"]) == ("timeout", "3"), rows[0]
    left = engine_processes(str(out))
    assert left == [], "a trial or engine process outlived the killed trial:\n" + describe(left)
    trial = out / "trials" / rows[0]["trial_id"]
    assert len(_lines(trial / "generations.jsonl")) == 3
    # The engine closed within the launcher's grace: the trial wrote its own status before the SIGKILL.
    assert json.loads((trial / "status.json").read_text())["status"] == "interrupted"
