"""A corpus label the model does not know stops the campaign before any trial runs (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from workspace import STUDY_TEMPLATE, write_corpus

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from runner.campaign.run import run_campaign
from runner.launch.launcher import LauncherBase


class RecordingLauncher(LauncherBase):
    name = "recording"

    def __init__(self) -> None:
        self.runs = 0

    def describe(self) -> dict[str, str]:
        return {"kind": self.name}

    def run(self, paths, timeout_s):  # pragma: no cover - must never be reached
        self.runs += 1
        raise AssertionError("a trial ran although the labels do not match")


def test_unknown_label_is_refused_before_any_trial(tmp_path: Path):
    write_corpus(tmp_path / "corpus.jsonl", "c", 6, seed=1)  # labels x and y
    write_corpus(tmp_path / "tuning.jsonl", "t", 4, seed=2)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"id2label": {"0": "x", "1": "z"}}), encoding="utf-8")
    study = tmp_path / "study.toml"
    study.write_text(STUDY_TEMPLATE.format(
        corpus_fp=fingerprint_path(tmp_path / "corpus.jsonl"), tuning_fp=fingerprint_path(tmp_path / "tuning.jsonl"),
        model_fp=fingerprint_path(model), minimum=0.0, repetitions=1, batches="[1]", timeout=60, reference=1,
    ), encoding="utf-8")
    launcher = RecordingLauncher()
    with pytest.raises(UserError) as info:
        run_campaign(study, tmp_path / "out", launcher)  # type: ignore[arg-type]
    assert "'y'" in info.value.message and "'x', 'z'" in info.value.message
    assert launcher.runs == 0
    assert not (tmp_path / "out" / "raw.csv").exists()
