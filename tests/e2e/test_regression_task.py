"""End-to-end: a fourth task added by its own files alone (tests/fixtures/tasks/regression/), found by name
through ``ISOCOST_TASKS_PATH`` and run as a real campaign: the isocost CLI in its own process, each trial in a
fresh process, with the real tiny MiniLM checkpoint; then validate and summarize read it like any task's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workspace import (
    HEADER,
    base_toml,
    copy_model,
    fingerprints,
    inputs_toml,
    length_buckets_toml,
    quality_toml,
    runs_toml,
    sections,
    series_toml,
    write_corpus,
    write_jsonl,
    write_study,
)

from runner.campaign_dir.layout import read_raw

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tests" / "fixtures" / "tasks"

TEMPLATE = sections(
    HEADER + 'task = "text-regression"\n',
    inputs_toml("model"),
    length_buckets_toml(16),
    quality_toml("pearson", "0.01", "0.99", '["length_bucket"]',
                 more="max_abs_diff = 0.001\nmax_mean_abs_diff = 0.0005\n"),
    '[regression]\nlabel = "y"\n',
    runs_toml(2),
    base_toml(32),
    series_toml(),
)


def _scores(model: Path, texts: list[str]) -> list[float]:
    """Each text's probability of label y, computed here without isocost (one text at a time, fp32)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    net = AutoModelForSequenceClassification.from_pretrained(str(model)).eval()
    with torch.inference_mode():
        return [float(torch.softmax(net(**tokenizer(t, truncation=True, max_length=32, return_tensors="pt"))
                                    .logits.float(), dim=-1)[0, 1]) for t in texts]


def _regression_workspace(root: Path, model: Path) -> tuple[Path, dict[str, float]]:
    """Corpus and tuning split with numeric targets (the model's own scores, shifted: a correlation of 1)."""
    root.mkdir()
    copy_model(model, root / "model")
    expected: dict[str, float] = {}
    for name, prefix, n, seed in (("corpus.jsonl", "c", 8, 1), ("tuning.jsonl", "t", 6, 2)):
        write_corpus(root / name, prefix, n, seed)
        rows = [json.loads(line) for line in (root / name).read_text().splitlines()]
        scores = _scores(root / "model", [row["text"] for row in rows])
        write_jsonl(root / name, [{"id": r["id"], "text": r["text"], "target": round(0.5 + s, 6)}
                                  for r, s in zip(rows, scores, strict=True)])
        expected.update({r["id"]: s for r, s in zip(rows, scores, strict=True)})
    values = fingerprints(root, {"corpus_fp": "corpus.jsonl", "tuning_fp": "tuning.jsonl", "model_fp": "model"})
    values.update(minimum=0.9, repetitions=1, batches="[1, 4]", timeout=300)
    return write_study(root, TEMPLATE, values), expected


def _isocost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ISOCOST_TASKS_PATH": str(TASKS)}
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900, check=False)


def test_a_fourth_task_from_its_own_folder_runs_a_real_campaign(tiny_model: Path, tmp_path: Path) -> None:
    study, expected = _regression_workspace(tmp_path / "ws", tiny_model)
    out = tmp_path / "out"
    run = _isocost("run", str(study), "--out", str(out), "--launcher", "process")
    assert run.returncode == 0, run.stdout + run.stderr
    rows = read_raw(out / "raw.csv")
    assert [r["variant_id"] for r in rows] == ["batch_size=1", "batch_size=4"]
    for row in rows:
        assert (row["status"], row["ids_match"], row["corpus_accepted"], row["metric"]) == ("ok", "true", "true",
                                                                                            "pearson")
        assert float(row["metric_value"]) > 0.999  # the targets are the model's scores, shifted
        assert row["outputs_sha256"].startswith("scores.jsonl=")
        lines = [json.loads(line) for line in (out / "trials" / row["trial_id"] / "scores.jsonl").read_text()
                 .splitlines()]
        assert [line["id"] for line in lines] == [f"c-{i:03d}" for i in range(8)]
        assert all(line["score"] == pytest.approx(expected[line["id"]], abs=1e-4) for line in lines)
    assert "target" in (out / "corpus_index.csv").read_text().splitlines()[0]

    validated = _isocost("validate", str(out))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    verdicts = json.loads((out / "verdicts.json").read_text())["verdicts"]
    assert all(v["agreement_details"]["mean_abs_diff"] < 0.0005 for v in verdicts if v["agreement_details"])
    summary = _isocost("summarize", str(out))
    assert summary.returncode == 0 and "| batch_size=4 |" in summary.stdout, summary.stdout + summary.stderr


def test_without_its_folder_the_task_is_unknown_naming_the_variable(tiny_model: Path, tmp_path: Path) -> None:
    study, _ = _regression_workspace(tmp_path / "ws", tiny_model)
    env = {k: v for k, v in os.environ.items() if k != "ISOCOST_TASKS_PATH"}
    found = subprocess.run([sys.executable, "-m", "runner.cli", "check", str(study)], cwd=ROOT,
                           env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
                           check=False)
    assert found.returncode != 0 and "unknown task 'text-regression'" in found.stdout + found.stderr
    assert "ISOCOST_TASKS_PATH" in found.stdout + found.stderr


def test_init_writes_a_study_of_the_fourth_task_from_its_own_init(tiny_model: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    study, _ = _regression_workspace(tmp_path / "ws", tiny_model)
    out = tmp_path / "init.toml"
    made = _isocost("init", str(study.parent / "corpus.jsonl"), str(study.parent / "model"), "--tuning",
                    str(study.parent / "tuning.jsonl"), "--task", "text-regression", "--score-label", "y",
                    "--out", str(out))
    assert made.returncode == 0, made.stdout + made.stderr
    assert "text-regression: each score is the probability of label 'y'" in made.stdout
    monkeypatch.setenv("ISOCOST_TASKS_PATH", str(TASKS))
    from protocol.study.load import load_study

    loaded = load_study(out)
    assert (loaded.task, loaded.task_options, loaded.quality.metric) == ("text-regression", {"label": "y"}, "pearson")
    assert loaded.quality.extra == {"max_abs_diff": 0.01, "max_mean_abs_diff": 0.005}
    refused = _isocost("init", str(study.parent / "corpus.jsonl"), str(study.parent / "model"), "--score-label",
                       "y", "--out", str(tmp_path / "other.toml"))
    assert refused.returncode != 0 and "--score-label is for --task text-regression" in refused.stdout + refused.stderr
