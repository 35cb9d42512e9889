"""End-to-end: a text-generation server study over ``engine = ["transformers", "vllm"]`` on the demo's SmolLM2 in
fp32, the isocost CLI in its own process and each trial in a fresh one (the vLLM trial with ``.venv-vllm``'s
interpreter, which holds LoadGen too). Under MLPerf LoadGen's Server scenario the vLLM trial's system under test is
vLLM's engine behind the declared dynamic batcher, each request's first token taken at the engine step that gave
it; every answer is judged against the transformers reference (identical tokens and top-k in fp32), LoadGen's TTFT
and TPOT against their bounds are in the manifest's ``serving`` block, and no process of the engine outlives its
trial. About two minutes here (vLLM's start-up is most of it). vLLM's HTTP server as the served engine
(``server = true``) is served in a container by tests/docker/test_vllm_in_containers.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from generation_workspace import write_generation_workspace
from serving_study import GENERATION_TRAFFIC
from vllm_env import describe, engine_processes, session_processes, vllm_python
from workspace import series_toml

from runner.campaign_dir.layout import read_raw

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SERIES = '[[series]]\nname = "engine"\nfield = "engine"\nvalues = ["transformers", "vllm"]\n'
SETTINGS = "\n[engines.vllm]\nmax_model_len = 512\nmax_num_seqs = 8\n"
TRAFFIC = GENERATION_TRAFFIC


@pytest.fixture(scope="module", autouse=True)
def _vllm_environment() -> None:
    """Skip (or fail, with ISOCOST_REQUIRE_VLLM=1) before any model is loaded when .venv-vllm is missing."""
    vllm_python()
    found = subprocess.run([str(vllm_python()), "-c", "import mlperf_loadgen"], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.skip(".venv-vllm has no mlcommons-loadgen (make vllm installs it)")


def _isocost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ISOCOST_VLLM_PYTHON": str(vllm_python())}
    proc = subprocess.Popen([sys.executable, "-m", "runner.cli", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    stdout, stderr = proc.communicate(timeout=1500)
    assert session_processes(proc.pid) == [], "a process of the campaign outlived it"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_vllm_serves_the_transformers_answers_with_ttft_and_tpot(smollm2: Any, tmp_path: Path) -> None:
    study = write_generation_workspace(tmp_path / "ws", smollm2, n=6, max_new_tokens=6, replace={
        series_toml("[1, 3]"): ENGINE_SERIES, "batch_size = 1\n": "batch_size = 3\n",
        'scenario = "offline"': 'scenario = "server"',
        'reference_variant = "batch_size=1"': 'reference_variant = "engine=transformers"'}, extra=SETTINGS + TRAFFIC)
    out = tmp_path / "out"
    run = _isocost("run", str(study), "--out", str(out), "--launcher", "process")
    assert run.returncode == 0, run.stdout + run.stderr
    left = engine_processes(str(out))
    assert left == [], "a trial or engine process outlived the campaign:\n" + describe(left)
    rows = {row["variant_id"]: row for row in read_raw(out / "raw.csv")}
    assert sorted(rows) == ["engine=transformers", "engine=vllm"]
    outputs, serving = {}, {}
    for variant_id, row in rows.items():
        engine = variant_id.split("=")[1]
        assert (row["status"], row["corpus_accepted"], row["engine"]) == ("ok", "true", engine), row
        trial = out / "trials" / row["trial_id"]
        outputs[engine] = _lines(trial / "generations.jsonl")
        serving[engine] = json.loads((trial / "manifest.json").read_text())["serving"]
        queries = _lines(trial / "queries.jsonl")
        assert len(queries) == serving[engine]["queries"] == 12 and serving[engine]["answers"]["written"] == 6
        assert all(q["started_ns"] < q["first_token_ns"] < q["completed_ns"] for q in queries), queries
        assert serving[engine]["output_tokens"] == sum(q["n_tokens"] for q in queries)
        for name in ("ttft", "tpot"):
            assert serving[engine][f"{name}_at_percentile_ms"] is not None, serving[engine]
            assert serving[engine][f"{name}_within_bound"] in (True, False)
        print(f"{engine}: LoadGen {serving[engine]['result']}, p50 TTFT {serving[engine]['ttft_at_percentile_ms']:.0f}"
              f" ms, p50 TPOT {serving[engine]['tpot_at_percentile_ms']:.0f} ms, "
              f"{serving[engine]['completed_qps']:.2f} of 4 qps")
    assert serving["vllm"]["result"] in ("VALID", "INVALID") and serving["vllm"]["max_batch"] == 3
    vllm_manifest = json.loads((out / "trials" / rows["engine=vllm"]["trial_id"] / "manifest.json").read_text())
    assert vllm_manifest["engine"]["settings"]["server"] is False and "server" not in vllm_manifest["engine"]
    assert [o["tokens"] for o in outputs["vllm"]] == [o["tokens"] for o in outputs["transformers"]]
    assert [o["top_ids"] for o in outputs["vllm"]] == [o["top_ids"] for o in outputs["transformers"]]
    validated = _isocost("validate", str(out))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["engine=vllm"]["agreement_details"]["identical_share"] == 1.0
    summary = _isocost("summarize", str(out))
    assert summary.returncode == 0, summary.stdout + summary.stderr
    section = (out / "summary.md").read_text().split("## Serving", 1)[1]
    assert "- engine=vllm: LoadGen " in section, section
