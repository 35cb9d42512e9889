"""The demo builder, end to end: a small real corpus and a real checkpoint from installed packages.

Builds once per module (about 30 s here): corpora of 21 and 42 texts, 60 tuning texts, the classifier head's own 60
training texts, and the embedding demo (12 bodies and their headlines, 12 tuning articles, tuned in a fresh process).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import tomllib
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from runner.demo.build import DemoResult, build_demo
from runner.demo.reuse import reusable_record
from runner.demo.selection import DemoText, largest_remainder
from runner.demo.source import normalise
from runner.demo.training import quality_minimum, train_classifier
from runner.own.tune import tune_study

pytestmark = pytest.mark.e2e

SIZES = {"quick": (12, 6, 3), "classify-1000": (24, 12, 6)}
TUNING_SIZE = 60
TRAINING_SIZE = 60
EMBEDDING_SIZES = (12, 12)
BUILD = {"sizes": SIZES, "tuning_size": TUNING_SIZE, "training_size": TRAINING_SIZE,
         "embedding_sizes": EMBEDDING_SIZES, "tune": tune_study}
FIELDS = {"id", "text", "label", "length_bucket"}
ID_PATTERN = re.compile(
    r"^bbc-(?P<label>[a-z]+)-(?P<number>\d{3})-(?P<part>title|title-lead|full)$"
)
BUCKET_RANGES = {"short": (1, 32), "medium": (33, 128), "long": (129, 10**9)}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[DemoResult, list[str]]:
    os.environ["HF_HUB_OFFLINE"] = "1"
    out = tmp_path_factory.mktemp("demo")
    lines: list[str] = []
    result = build_demo(out, progress=lines.append, **BUILD)  # type: ignore[arg-type]
    return result, lines


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def article_of(text_id: str) -> str:
    match = ID_PATTERN.match(text_id)
    assert match, text_id
    return f"{match['label']}-{match['number']}"


def test_files_and_fields(built: tuple[DemoResult, list[str]]) -> None:
    result, lines = built
    assert not result.reused
    assert result.study_paths == (
        result.out_dir / "classify-1000.toml",
        result.out_dir / "embed.toml",
        result.out_dir / "quick.toml",
    )
    corpus = read_jsonl(result.out_dir / "corpus-quick.jsonl")
    tuning = read_jsonl(result.tuning_path)
    assert len(corpus) == 21
    assert len(tuning) == TUNING_SIZE
    for row in corpus + tuning:
        assert set(row) == FIELDS
        assert all(isinstance(row[key], str) and row[key] for key in FIELDS)
        match = ID_PATTERN.match(row["id"])
        assert match and match["label"] == row["label"]
    counts = {b: sum(r["length_bucket"] == b for r in corpus) for b in BUCKET_RANGES}
    assert counts == {"short": 12, "medium": 6, "long": 3}
    tuning_counts = {b: sum(r["length_bucket"] == b for r in tuning) for b in BUCKET_RANGES}
    # Same proportions as the corpus: 60 x 12/21, 6/21, 3/21 by largest remainder.
    assert tuning_counts == {"short": 34, "medium": 17, "long": 9}
    assert any("Built the demo" in line for line in lines)


def test_ids_unique_texts_unique_articles_disjoint(built: tuple[DemoResult, list[str]]) -> None:
    result, _ = built
    corpus = read_jsonl(result.out_dir / "corpus-quick.jsonl")
    tuning = read_jsonl(result.tuning_path)
    rows = corpus + tuning
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({normalise(r["text"]) for r in rows}) == len(rows)
    articles = [article_of(r["id"]) for r in rows]
    assert len(set(articles)) == len(articles), "an article gave more than one text"
    by_bucket = {
        b: {article_of(r["id"]) for r in corpus if r["length_bucket"] == b} for b in BUCKET_RANGES
    }
    tuning_articles = {article_of(r["id"]) for r in tuning}
    assert not (by_bucket["short"] & by_bucket["medium"])
    assert not (by_bucket["short"] & by_bucket["long"])
    assert not (by_bucket["medium"] & by_bucket["long"])
    assert not (tuning_articles & set().union(*by_bucket.values()))
    larger = read_jsonl(result.out_dir / "corpus-classify-1000.jsonl")
    assert len(larger) == 42
    assert {r["id"] for r in corpus} < {r["id"] for r in larger}
    assert not ({article_of(r["id"]) for r in larger} & tuning_articles)


def test_buckets_in_model_tokens(built: tuple[DemoResult, list[str]]) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    result, _ = built
    rows = read_jsonl(result.out_dir / "corpus-quick.jsonl") + read_jsonl(result.tuning_path)
    tokenizer = AutoTokenizer.from_pretrained(str(result.model_dir))
    encoded = tokenizer([r["text"] for r in rows], truncation=False, verbose=False)
    # The bare tokenizers library must agree once its stored truncation/padding is switched off.
    raw = Tokenizer.from_file(str(result.model_dir / "tokenizer.json"))
    raw.no_truncation()
    raw.no_padding()
    for row, ids in zip(rows, encoded["input_ids"], strict=True):
        low, high = BUCKET_RANGES[row["length_bucket"]]
        assert low <= len(ids) <= high, (row["id"], len(ids))
        assert len(raw.encode(row["text"]).ids) == len(ids)
    parts = {"short": "title", "medium": "title-lead", "long": "full"}
    for row in rows:
        assert row["id"].endswith("-" + parts[row["length_bucket"]])


def test_class_distribution_follows_the_source(built: tuple[DemoResult, list[str]]) -> None:
    result, _ = built
    record = json.loads(result.demo_json.read_text(encoding="utf-8"))
    weights = record["source"]["unique_articles"]
    assert sum(weights.values()) > 2000
    corpus = read_jsonl(result.out_dir / "corpus-quick.jsonl")
    for bucket, size in zip(("short", "medium", "long"), SIZES["quick"], strict=True):
        expected = {k: v for k, v in largest_remainder(size, weights).items() if v}
        observed: dict[str, int] = {}
        for row in corpus:
            if row["length_bucket"] == bucket:
                observed[row["label"]] = observed.get(row["label"], 0) + 1
        assert observed == expected
        assert record["selection"]["corpora"]["quick"][bucket] == dict(sorted(observed.items()))


def test_buckets_are_interleaved(built: tuple[DemoResult, list[str]]) -> None:
    result, _ = built
    buckets = [r["length_bucket"] for r in read_jsonl(result.out_dir / "corpus-quick.jsonl")]
    runs = 1 + sum(1 for a, b in itertools.pairwise(buckets) if a != b)
    assert runs > 3


@pytest.mark.parametrize(
    ("name", "texts", "series"),
    [
        ("quick", 21, [[1, 4, 8]]),
        ("classify-1000", 42, [[1, 4, 8], ["none", "sort"], ["fp32", "bf16"], ["none", "int8-dynamic"]]),
    ],
)
def test_study_file_matches_the_files(
    built: tuple[DemoResult, list[str]], name: str, texts: int, series: list[list[Any]]
) -> None:
    result, _ = built
    study_path = result.out_dir / f"{name}.toml"
    text = study_path.read_text(encoding="utf-8")
    assert "@" not in text
    study = tomllib.loads(text)
    assert study["schema_version"] == 1
    assert study["name"] == name
    assert f"all {texts} demo texts" in study["question"]
    assert study["corpus"]["path"] == f"corpus-{name}.jsonl"
    for section in ("corpus", "tuning", "model"):
        target = study_path.parent / study[section]["path"]
        assert study[section]["fingerprint"] == fingerprint_path(target)
    record = json.loads(result.demo_json.read_text(encoding="utf-8"))
    minimum = record["quality"]["minimum"]
    assert study["quality"]["minimum"] == float(minimum) == float(result.minimum)
    heldout = record["head"]["heldout"]
    assert quality_minimum(Fraction(heldout["correct"], heldout["texts"])) == minimum
    assert study["quality"]["reference_variant"] == "batch_size=1"
    assert [s["values"] for s in study["series"]] == series
    assert record["files"][f"{name}.toml"] == fingerprint_path(study_path)


def test_model_loads_like_a_users_checkpoint(built: tuple[DemoResult, list[str]]) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    result, _ = built
    corpus = read_jsonl(result.out_dir / "corpus-quick.jsonl")
    labels = {r["label"] for r in corpus}
    tokenizer = AutoTokenizer.from_pretrained(str(result.model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(result.model_dir))
    model.eval()
    assert set(model.config.id2label.values()) == labels | {
        r["label"] for r in read_jsonl(result.tuning_path)
    }
    batch = tokenizer(
        [r["text"] for r in corpus],
        padding=True,
        truncation=True,
        max_length=256,
        return_tensors="pt",
    )
    with torch.inference_mode():
        predicted = model(**batch).logits.argmax(dim=1).tolist()
    assert {model.config.id2label[i] for i in predicted} <= labels
    assert (result.model_dir / "model.safetensors").is_file()


def test_second_call_reuses_and_tampering_is_noticed(
    built: tuple[DemoResult, list[str]],
) -> None:
    result, _ = built
    lines: list[str] = []
    again = build_demo(result.out_dir, progress=lines.append, **BUILD)  # type: ignore[arg-type]
    assert again.reused
    assert again.heldout_accuracy == result.heldout_accuracy
    assert again.study_paths == result.study_paths
    assert any(line.startswith("Reused the demo") for line in lines)

    record = json.loads(result.demo_json.read_text(encoding="utf-8"))
    parameters, packages = record["parameters"], record["packages"]
    other = {**parameters, "seed": 1}
    assert reusable_record(result.out_dir, other, packages) is None
    study = result.out_dir / "quick.toml"
    original = study.read_bytes()
    try:
        study.write_bytes(original + b"\n")
        assert reusable_record(result.out_dir, parameters, packages) is None
    finally:
        study.write_bytes(original)
    assert reusable_record(result.out_dir, parameters, packages) is not None


def test_cli_prepare_prints_the_study_paths(
    built: tuple[DemoResult, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.cli import demo as demo_cli

    result, _ = built
    small = functools.partial(build_demo, **BUILD)
    monkeypatch.setattr(demo_cli, "build_demo", small)
    outcome = CliRunner().invoke(demo_cli.demo, ["prepare", "--out", str(result.out_dir), "--no-generation"])
    assert outcome.exit_code == 0, outcome.output
    assert "Reused the demo" in outcome.output
    assert outcome.output.rstrip().endswith(
        f"{result.out_dir / 'classify-1000.toml'}\n  {result.out_dir / 'embed.toml'}\n  {result.out_dir / 'quick.toml'}"
        f"\n  {result.out_dir / 'engines.toml'}\n  {result.out_dir / 'serve.toml'}"  # derived from quick.toml
        f"\n  {result.out_dir / 'serve-gpu.toml'}"
    )


def test_unknown_study_name_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no demo study template for nope"):
        build_demo(tmp_path / "x", sizes={"nope": (1, 1, 1)})
    assert not (tmp_path / "x").exists()


def test_largest_remainder_and_minimum() -> None:
    weights = {"a": 503, "b": 369, "c": 403, "d": 502, "e": 347}
    assert sum(largest_remainder(600, weights).values()) == 600
    assert largest_remainder(3, {"x": 1, "y": 1, "z": 1}) == {"x": 1, "y": 1, "z": 1}
    assert largest_remainder(2, {"x": 1, "y": 1, "z": 1}) == {"x": 1, "y": 1, "z": 0}
    assert quality_minimum(Fraction(98, 120)) == "0.76"
    assert quality_minimum(Fraction(1, 1)) == "0.95"
    assert quality_minimum(Fraction(1, 100)) == "0.00"


@pytest.mark.parametrize("stack", ["cuda", "rocm"])
def test_gpu_demo_study_exercises_a_gpu(built: tuple[DemoResult, list[str]], stack: str) -> None:
    from protocol.study.load import load_study

    result, _ = built
    study_path = result.out_dir / f"gpu-{stack}.toml"
    text = study_path.read_text(encoding="utf-8")
    assert "@" not in text
    study = load_study(study_path)
    assert study.corpus.path == result.out_dir / "corpus-classify-1000.jsonl"  # the 1,000-text corpus
    assert study.corpus.fingerprint == fingerprint_path(study.corpus.path)
    variants = study.variants()
    assert {v.stack for v in variants} == {stack} and {v.device for v in variants} == {"cuda"}
    assert max(v.batch_size for v in variants) >= 256
    assert {v.precision for v in variants} == {"fp32", "fp16", "bf16"}
    assert any(v.length_grouping == "sort" for v in variants)
    record = json.loads(result.demo_json.read_text(encoding="utf-8"))
    assert record["files"][f"gpu-{stack}.toml"] == fingerprint_path(study_path)
    # the quick GPU study stays the CPU quick study with only stack and device changed
    quick = (result.out_dir / "quick.toml").read_text(encoding="utf-8")
    assert (result.out_dir / f"quick-{stack}.toml").read_text(encoding="utf-8") == quick.replace(
        'stack = "cpu"\ndevice = "cpu"', f'stack = "{stack}"\ndevice = "cuda"')


def test_a_failed_training_process_is_a_user_error(tmp_path: Path) -> None:
    """The classifier is trained in a fresh process; its failure is one `Error:` line, not a traceback."""
    rows = [DemoText(id=f"t{i}", text="a text", label="sport", length_bucket="short", n_tokens=4)
            for i in range(5)]
    with pytest.raises(UserError) as caught:
        train_classifier(tmp_path / "no-model", rows, rows[:1], ["sport"], tmp_path / "model", 0, lambda s: None)
    assert "training the demo classifier failed (exit 1)" in str(caught.value)
    assert not (tmp_path / "model").exists()


def test_the_head_has_its_own_training_split_and_tune_measures_it_held_out(
    built: tuple[DemoResult, list[str]], tmp_path: Path
) -> None:
    """Issue 22: the head never saw the tuning split, so `isocost tune` measures what demo.json calls held out."""
    result, _ = built
    training = read_jsonl(result.training_path)
    tuning = read_jsonl(result.tuning_path)
    corpus = read_jsonl(result.out_dir / "corpus-classify-1000.jsonl")
    assert len(training) == TRAINING_SIZE
    articles = {name: {article_of(r["id"]) for r in rows} for name, rows in
                (("training", training), ("tuning", tuning), ("corpus", corpus))}
    assert not articles["training"] & articles["tuning"] and not articles["training"] & articles["corpus"]
    record = json.loads(result.demo_json.read_text(encoding="utf-8"))
    assert record["head"]["heldout"]["texts"] == TUNING_SIZE and record["head"]["final_fit"]["texts"] == TRAINING_SIZE
    tuned = tune_study(result.out_dir / "quick.toml", ledger_dir=tmp_path, write=False)
    assert abs(tuned.proposal.metric_value - result.heldout_accuracy) <= 1 / TUNING_SIZE + 1e-9
    assert tuned.proposal.metric_value < 1.0  # no longer the split the head was fitted on


def test_the_embedding_demo_study(built: tuple[DemoResult, list[str]]) -> None:
    from protocol.study.load import load_study

    result, lines = built
    study = load_study(result.out_dir / "embed.toml")
    assert study.task == "sentence-embedding" and study.task_options["pooling"] == "mean"
    corpus = read_jsonl(study.corpus.path)
    queries = read_jsonl(Path(study.task_options["queries"]["path"]))
    tuning = read_jsonl(study.tuning.path)
    assert len(corpus) == len(queries) == EMBEDDING_SIZES[0] and len(tuning) == EMBEDDING_SIZES[1]
    for document, query in zip(corpus, queries, strict=True):  # each headline's relevant document: its own article
        assert query["relevant"] == [document["id"]] and query["text"] not in document["text"].split("\n\n")[0:1]
    assert not {r["id"] for r in corpus} & {r["id"] for r in tuning}
    assert study.quality.tuned_on == "tuning" and 0 < study.quality.minimum < 1  # written by isocost tune
    assert any(line.startswith("Tuned embed.toml on its tuning split: ndcg@10") for line in lines)
    assert (result.out_dir / "encoder" / "config.json").is_file()
    assert not (result.out_dir / "encoder" / "modules.json").exists()  # a plain AutoModel directory


def test_prepare_study_engines_writes_a_valid_engine_study(
    built: tuple[DemoResult, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``isocost demo prepare --study engines``: the quick study's inputs and minimum, transformers against ONNX
    Runtime, a study ``isocost check`` accepts."""
    from protocol.study.load import load_study
    from runner.cli import demo as demo_cli
    from runner.cli import main

    result, _ = built
    monkeypatch.setattr(demo_cli, "build_demo", functools.partial(build_demo, **BUILD))
    outcome = CliRunner().invoke(demo_cli.demo, ["prepare", "--out", str(result.out_dir), "--study", "engines"])
    assert outcome.exit_code == 0, outcome.output
    path = result.out_dir / "engines.toml"
    assert str(path) in outcome.output
    study, quick = load_study(path), load_study(result.out_dir / "quick.toml")
    assert [v.variant_id for v in study.variants()] == ["engine=transformers", "engine=onnxruntime"]
    assert [v.engine for v in study.variants()] == ["transformers", "onnxruntime"]
    assert (study.corpus.fingerprint, study.tuning.fingerprint, study.model.fingerprint) == (
        quick.corpus.fingerprint, quick.tuning.fingerprint, quick.model.fingerprint)
    assert study.quality.minimum == quick.quality.minimum
    assert study.quality.reference_variant == "engine=transformers"
    assert f"all {len(read_jsonl(result.out_dir / 'corpus-quick.jsonl'))} demo texts" in study.question
    checked = CliRunner().invoke(main, ["check", str(path)])
    assert checked.exit_code == 0, checked.output
    assert "engines: onnxruntime, transformers" in checked.output
