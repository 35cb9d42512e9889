"""A text-generation campaign in real containers: the SmolLM2 checkpoint mounted read-only, generations sealed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.docker


def test_generation_campaign_in_containers(cpu_image: Any, images_lock: Path, make_generation_workspace: Any,
                                           files: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.cli import main

    study = make_generation_workspace(batches="[3]", max_new_tokens=3)
    out = tmp_path / "out"
    monkeypatch.setenv("ISOCOST_IMAGES_LOCK", str(images_lock))
    monkeypatch.delenv("ISOCOST_FAULT_INJECT", raising=False)
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"launcher: docker, image {cpu_image.image_id}" in result.output
    (row,) = files.rows(out)
    assert (row["status"], row["corpus_accepted"], row["launcher"]) == ("ok", "true", "docker"), row["notes"]
    assert row["image_id"] == cpu_image.image_id
    trial = files.trials(out)[0]
    lines = [json.loads(line) for line in (trial / "generations.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == ["c0", "c1", "c2"]
    assert all(1 <= line["n_tokens"] <= 3 for line in lines)
    manifest = json.loads((trial / "manifest.json").read_text())
    assert manifest["image_id"] == cpu_image.image_id and manifest["model"]["vocab_size"] == 49152
    validated = CliRunner().invoke(main, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output
