"""Corpus labels against the model's id2label (issue 13: found before anything is timed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.tasks.classification.labels import check_labels, model_labels


def model(tmp_path: Path, id2label: object) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"id2label": id2label}), encoding="utf-8")
    return tmp_path


def test_labels_in_id_order(tmp_path):
    ids = {str(i): f"l{i}" for i in range(11)}  # written in reverse: "10" must come after "9", not after "1"
    assert model_labels(model(tmp_path, dict(reversed(ids.items())))) == tuple(f"l{i}" for i in range(11))


def test_id2label_ids_must_be_zero_to_n_minus_one(tmp_path):
    """A head with two outputs and ids 0 and 2 dies at the first prediction of id 1: refused before any trial."""
    with pytest.raises(UserError) as info:
        model_labels(model(tmp_path, {"0": "neg", "2": "pos"}))
    assert "ids must be 0 to 1" in info.value.what and "missing: 1; not allowed: 2" in info.value.what
    assert "config.json" in info.value.where and "dict(enumerate(labels))" in info.value.fix


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
