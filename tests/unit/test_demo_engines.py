"""The engine demo studies (``runner/demo/engines.py``): written from their templates and the demo study they
derive from, whose inputs, fingerprints and rule they take unchanged; only the engine varies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.study.load import load_study
from runner.demo.engines import ENGINE_STUDIES, MIN_TRIAL_TIMEOUT_S, engine_studies_of, write_engine_study
from runner.demo.generation import _render
from runner.demo.parts import part_of
from runner.demo.study_files import render_study

FINGERPRINTS = {"@CORPUS_FINGERPRINT@": "sha256:" + "1" * 64, "@TUNING_FINGERPRINT@": "sha256:" + "2" * 64,
                "@MODEL_FINGERPRINT@": "sha256:" + "3" * 64}


def _generate_demo(root: Path) -> Path:
    """A built generate study's files (fingerprints are not checked when a study is read)."""
    rows = [{"id": f"s{i}", "text": f"Story {i}.", "reference": f"Headline {i}"} for i in range(3)]
    for name in ("corpus-generate.jsonl", "tuning-generate.jsonl"):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (root / "smollm2").mkdir()
    text = _render("generate", {**FINGERPRINTS, "@TEXT_COUNT@": "3"}).replace("minimum = 0.0 ", "minimum = 0.25 ")
    (root / "generate.toml").write_text(text, encoding="utf-8")
    return root / "generate.toml"


def test_engines_generate_takes_the_generate_studys_inputs_and_rule(tmp_path: Path) -> None:
    base = load_study(_generate_demo(tmp_path))
    study = load_study(write_engine_study(tmp_path, "engines-generate"))
    variants = {v.variant_id: (v.engine, v.precision) for v in study.variants()}
    assert variants == {"engine=transformers": ("transformers", "fp32"), "engine=vllm": ("vllm", "fp32"),
                        "precision=bf16": ("vllm", "bf16")}
    assert study.quality.reference_variant == "engine=transformers"
    assert (study.corpus.fingerprint, study.tuning.fingerprint, study.model.fingerprint) == (
        base.corpus.fingerprint, base.tuning.fingerprint, base.model.fingerprint)
    assert (study.quality.minimum, study.quality.max_metric_drop, study.quality.min_agreement) == (
        0.25, base.quality.max_metric_drop, base.quality.min_agreement)
    assert study.task_options == base.task_options
    assert study.campaign.trial_timeout_s >= MIN_TRIAL_TIMEOUT_S  # vLLM's start-up is load time inside it
    assert "all 3 demo news stories" in study.question


def test_an_engine_study_needs_its_base_study_built(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="quick.toml that engines.toml derives from is not built"):
        write_engine_study(tmp_path, "engines")
    assert not (tmp_path / "engines.toml").exists()


def test_each_engine_study_belongs_to_the_part_of_its_base() -> None:
    assert {name: part_of(name) for name in ENGINE_STUDIES} == {"engines": "classification",
                                                                 "engines-generate": "generation"}
    assert engine_studies_of(("quick", "classify-1000")) == ("engines", "serve", "serve-gpu")
    assert engine_studies_of(("generate", "generate-gpu-cuda")) == ("engines-generate",)
    assert engine_studies_of(("embed",)) == ()


def _quick_demo(root: Path) -> Path:
    """A built quick study's files (fingerprints are not checked when a study is read)."""
    rows = [{"id": f"t{i}", "text": f"Text {i}.", "label": "a" if i % 2 else "b"} for i in range(4)]
    for name in ("corpus-quick.jsonl", "tuning.jsonl"):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (root / "model").mkdir()
    text = render_study("quick", text_count=4, corpus_fingerprint=FINGERPRINTS["@CORPUS_FINGERPRINT@"],
                        tuning_fingerprint=FINGERPRINTS["@TUNING_FINGERPRINT@"],
                        model_fingerprint=FINGERPRINTS["@MODEL_FINGERPRINT@"], minimum="0.8")
    (root / "quick.toml").write_text(text, encoding="utf-8")
    return root / "quick.toml"


def test_serve_serves_the_quick_studys_classifier_at_three_rates_with_a_decidable_p99(tmp_path: Path) -> None:
    base = load_study(_quick_demo(tmp_path))
    study = load_study(write_engine_study(tmp_path, "serve"))
    assert study.scenario == "server" and study.traffic is not None
    assert study.traffic.rates_qps == (10.0, 40.0, 120.0)
    assert study.traffic.min_query_count >= study.traffic.queries_needed  # a p99 LoadGen can decide
    variants = {v.variant_id: (v.batch_size, v.rate_qps) for v in study.rated_variants()}
    assert len(variants) == 6 and variants["batch_size=8@rate_qps=120"] == (8, 120.0)
    assert study.quality.reference_variant == "batch_size=1" and study.quality.minimum == base.quality.minimum
    assert (study.corpus.fingerprint, study.model.fingerprint) == (base.corpus.fingerprint, base.model.fingerprint)


def test_serve_gpu_serves_the_quick_studys_classifier_on_a_cuda_card_with_a_decidable_p99(tmp_path: Path) -> None:
    """Written for a real card (never run here): CUDA, batches 1/8/32 in fp32 and batch 8 in fp16 (one factor at a
    time, as every study's series), three rates, p99 in 50 ms."""
    base = load_study(_quick_demo(tmp_path))
    study = load_study(write_engine_study(tmp_path, "serve-gpu"))
    assert study.scenario == "server" and study.traffic is not None
    assert study.traffic.rates_qps == (200.0, 800.0, 3200.0)
    assert study.traffic.min_query_count >= study.traffic.queries_needed
    variants = study.rated_variants()
    assert {(v.stack, v.device) for v in variants} == {("cuda", "cuda")}
    assert {(v.batch_size, v.precision) for v in variants} == {(1, "fp32"), (8, "fp32"), (32, "fp32"), (8, "fp16")}
    assert len(variants) == 12 and study.quality.reference_variant in {v.variant_id for v in study.series_variants()}
    assert (study.corpus.fingerprint, study.model.fingerprint) == (base.corpus.fingerprint, base.model.fingerprint)
