"""Corpus labels against the model's id2label (issue 13: found before anything is timed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.labels import check_labels, model_labels


def model(tmp_path: Path, id2label: object) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"id2label": id2label}), encoding="utf-8")
    return tmp_path


def test_labels_in_id_order(tmp_path):
    assert model_labels(model(tmp_path, {"1": "pos", "0": "neg", "10": "mixed"})) == ("neg", "pos", "mixed")


def test_unknown_corpus_label_names_it_and_the_models_labels(tmp_path):
    path = model(tmp_path, {"0": "neg", "1": "pos"})
    with pytest.raises(UserError) as info:
        check_labels(["neg", "positive"], path, "corpus.jsonl")
    message = info.value.message
    assert "'positive'" in message and "'neg', 'pos'" in message and "corpus.jsonl" in message


def test_model_labels_missing_from_the_corpus_are_returned(tmp_path):
    assert check_labels(["neg"], model(tmp_path, {"0": "neg", "1": "pos"}), "c") == ("pos",)
    assert check_labels(["neg", "pos"], model(tmp_path, {"0": "neg", "1": "pos"}), "c") == ()


def test_a_checkpoint_without_id2label_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(UserError, match="no id2label"):
        model_labels(tmp_path)
