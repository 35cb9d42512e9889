"""The carry for a GPU machine without network (runner/selfcheck/carry.py): fp16 weights, studies re-pointed at
them, every file hashed, refused when too large or changed in transit."""

from __future__ import annotations

import json
import tomllib

import pytest

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from runner.selfcheck import carry

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")


def fake_demo(root, big=False):
    model = root / "model"
    model.mkdir(parents=True)
    weights = {"w": np.linspace(-2, 2, 1000, dtype=np.float32).reshape(10, 100), "ids": np.arange(5, dtype=np.int64)}
    if big:
        weights["w"][0, 0] = 1e6
    safetensors_numpy.save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    (model / "config.json").write_text('{"architectures": ["BertForSequenceClassification"]}')
    (model / "tokenizer.json").write_text("{}")
    (root / "corpus-quick.jsonl").write_text('{"id": "a", "text": "x", "label": "y"}\n')
    (root / "quick-cuda.toml").write_text('[model]\npath = "model"\nfingerprint = "sha256:old"  # demo\n')
    return root


def test_prepare_writes_fp16_weights_hashes_and_studies_for_the_copy(tmp_path):
    demo = fake_demo(tmp_path / "demo")
    info = carry.prepare(demo, tmp_path / "carry", wheel=False)
    stored = safetensors_numpy.load_file(str(tmp_path / "carry" / "model" / "model.safetensors"))
    assert stored["w"].dtype == np.float16 and stored["ids"].dtype == np.int64  # integers kept as they are
    assert 0 < info["fp16"]["max_abs_rounding_error"] < 1e-3
    assert info["model_fingerprint"] == fingerprint_path(tmp_path / "carry" / "model") != info[
        "original_model_fingerprint"]
    study = tomllib.loads((tmp_path / "carry" / "quick-cuda.toml").read_text())
    assert study["model"]["fingerprint"] == info["model_fingerprint"]
    assert set(info["files"]) == {"model/model.safetensors", "model/config.json", "model/tokenizer.json",
                                  "corpus-quick.jsonl", "quick-cuda.toml"}
    assert json.loads((tmp_path / "carry" / "carry.json").read_text())["files"] == info["files"]
    assert carry.verify(tmp_path / "carry")["model_fingerprint"] == info["model_fingerprint"]


def test_a_carry_changed_in_transit_is_refused(tmp_path):
    carry.prepare(fake_demo(tmp_path / "demo"), tmp_path / "carry", wheel=False)
    (tmp_path / "carry" / "corpus-quick.jsonl").write_text("cut")
    with pytest.raises(UserError, match=r"changed in transit: \['corpus-quick.jsonl'\]"):
        carry.verify(tmp_path / "carry")


def test_weights_beyond_fp16_and_a_carry_over_the_limit_are_refused(tmp_path):
    with pytest.raises(UserError, match="beyond the fp16 range"):
        carry.prepare(fake_demo(tmp_path / "big", big=True), tmp_path / "carry-big", wheel=False)
    with pytest.raises(UserError, match=r"exceed 0.001 MiB"):
        carry.prepare(fake_demo(tmp_path / "demo"), tmp_path / "carry", limit_mib=0.001, wheel=False)


def test_prepare_never_empties_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    with pytest.raises(UserError, match="was not made by this command"):
        carry.prepare(fake_demo(tmp_path / "demo"), tmp_path / "mine", wheel=False)
    assert (tmp_path / "mine" / "keep.txt").exists()
