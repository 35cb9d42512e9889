"""Your own data, end to end: a corpus and checkpoint isocost never saw → init, tune, check, run, rental, decide.

The checkpoint is trained here on made-up labels (tests/ownmodel.py): nothing comes from the demo.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from ownmodel import build_own_model, write_reports

from runner.cli import main

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def own_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("own")
    write_reports(root / "train.jsonl", "tr", 90, seed=0)
    write_reports(root / "reports.jsonl", "r", 24, seed=1)
    write_reports(root / "reports-tuning.jsonl", "t", 12, seed=2)
    build_own_model(root / "weather-model", root / "train.jsonl")
    return root


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_own_corpus_and_checkpoint_to_a_decision(own_data: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ISOCOST_HOME", raising=False)  # the ledger goes next to the study
    work = tmp_path / "proj"
    work.mkdir()
    for name in ("reports.jsonl", "reports-tuning.jsonl"):
        (work / name).write_bytes((own_data / name).read_bytes())
    import shutil

    shutil.copytree(own_data / "weather-model", work / "weather-model")
    study = work / "study.toml"

    code, out = cli("init", str(work / "reports.jsonl"), str(work / "weather-model"), "--tuning",
                    str(work / "reports-tuning.jsonl"), "--out", str(study))
    assert code == 0, out
    assert "labels: rainy, sunny, windy" in out and "length buckets (model tokenizer):" in out
    text = study.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    assert data["quality"]["reference_variant"] == "precision=fp32"
    assert data["campaign"]["repetitions"] == 5
    assert "NOT TUNED YET" in text

    code, out = cli("tune", str(study))
    assert code == 0, out
    tuned = tomllib.loads(study.read_text(encoding="utf-8"))["quality"]
    assert tuned["tuned_on"] == "tuning" and 0 < tuned["minimum"] <= 1
    assert "# the metric" not in out and "rule: minimum = m − 2·se" in out
    assert '# "accuracy" or "macro_f1"' in study.read_text(encoding="utf-8")  # comments kept

    # A tiny slice: one repetition, the precision series only (2 trials).
    text = study.read_text(encoding="utf-8").replace("repetitions = 5", "repetitions = 1")
    text = text.replace("values = [1, 8, 32]", "values = [1]")
    study.write_text(text, encoding="utf-8")

    code, out = cli("check", str(study), "--launcher", "process")  # the launcher the run below uses
    assert code == 0, out
    assert "isocost run would start." in out and "2 trials" in out

    results = tmp_path / "results"
    code, out = cli("run", str(study), "--out", str(results), "--launcher", "process")
    assert code == 0, out
    assert (work / ".isocost" / "evaluations.jsonl").is_file()
    manifest = json.loads(next((results / "trials").glob("*/manifest.json")).read_text(encoding="utf-8"))
    import torch

    expected_build = "cpu" if not (torch.version.cuda or getattr(torch.version, "hip", None)) else ""
    assert manifest["software"]["torch_build"].startswith(expected_build)  # which torch build ran

    # Without a rental, decide still ranks by time and quality and says what is missing; it chooses nothing (exit 3).
    code, out = cli("decide", str(results))
    assert code == 3, out
    assert "isocost rental" in out and "by measured time and quality" in out

    code, out = cli("rental", str(results), "--gpu", "rtx-4090", "--lots", "1")
    assert code == 0, out
    line = json.loads((results / "rentals.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert (line["schema_version"], line["gpu"], line["lots"]) == (2, "rtx-4090", 1)
    assert line["recorded_at"].endswith("Z")

    code, out = cli("decide", str(results), "--json", "--out", str(tmp_path / "decision"))
    assert code == 0, out
    decision = json.loads(out[: out.rindex("}") + 1])
    assert decision["chosen"] is not None, decision["why"]
    memo = (tmp_path / "decision" / "decision.md").read_text(encoding="utf-8")
    assert f"recorded at {line['recorded_at']}" in memo

    # The rental travels with the bundle, so the decision can be re-derived from it.
    code, out = cli("bundle", str(results), "-o", str(tmp_path / "mine.tar.gz"))
    assert code == 0, out
    import tarfile

    with tarfile.open(tmp_path / "mine.tar.gz") as archive:
        assert any(name.endswith("campaign/rentals.jsonl") for name in archive.getnames())

    # The final corpus is now seen: tune refuses.
    code, out = cli("tune", str(study))
    assert code == 2 and "already been evaluated" in out
