"""Train the demo classifier: the torch/transformers half of ``isocost demo prepare``.

Run as a fresh process by ``runner.demo.training`` (the host side never imports torch
or transformers)::

    python -m runner.trial.demo_train REQUEST.json HEAD.json

``REQUEST.json`` holds ``model_src``, ``model_out``, ``seed``, ``labels``, the
``rows`` (``id``, ``text``, ``label``, ``length_bucket``: the training split, then the tuning split), the
``heldout`` ids (the tuning split's) and ``heldout_split`` (what they are); the head is trained on the other rows
only, so its held-out score is the score ``isocost tune`` measures on the tuning split. The head record (what
was trained, held-out accuracy, the checkpoint check) is written to ``HEAD.json``. Progress lines go to stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.io.jsonio import write_json_atomic

BUCKETS = ("short", "medium", "long")
MAX_LENGTH = 256
FEATURE_BATCH = 32
HEAD_STEPS = 300
HEAD_LEARNING_RATE = 1e-3
HEAD_WEIGHT_DECAY = 1e-2
TORCH_THREADS = 2
CHECKPOINT_CHECK_TEXTS = 16
CHECKPOINT_CHECK_ATOL = 1e-4


@dataclass(frozen=True)
class TuningRow:
    id: str
    text: str
    label: str
    length_bucket: str


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m runner.trial.demo_train REQUEST.json HEAD.json", file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    rows = [TuningRow(**row) for row in request["rows"]]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(TORCH_THREADS)
    with _quiet_transformers():
        head = train_classifier(
            Path(request["model_src"]),
            rows,
            request["labels"],
            set(request["heldout"]),
            Path(request["model_out"]),
            request["seed"],
            request["heldout_split"],
            lambda line: print(line, flush=True),
        )
    write_json_atomic(Path(argv[1]), head)
    return 0


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load reports and progress bars; restore them afterwards."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


@dataclass(frozen=True)
class _Encoded:
    """The tuning texts as the head sees them: frozen [CLS] features, label ids, the held-out mask."""

    features: Any  # float tensor, one row per tuning text
    targets: Any  # long tensor of label ids
    heldout: Any  # bool tensor: True for a held-out text


def train_classifier(
    model_src: Path,
    tuning: Sequence[TuningRow],
    labels: Sequence[str],
    heldout_ids: set[str],
    model_out: Path,
    seed: int,
    heldout_split: str,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Train the pooler and classifier of MiniLM on frozen [CLS] features; save the checkpoint.

    The checkpoint computes ``classifier(tanh(pooler.dense(h_cls)))`` at inference (dropout is off in eval mode); the
    head is trained on exactly that function of the frozen encoder's ``last_hidden_state[:, 0]``, on the rows that are
    not held out (the training split), and scored on the held-out rows (the tuning split): the saved head is the one
    scored. Same seed, same head.
    """
    model, tokenizer = _load_base_model(model_src, labels, seed)
    encoded = _encode_tuning(model, tokenizer, tuning, labels, heldout_ids, progress)
    init = _pooler_init(model)
    final = _fit_head(encoded.features[~encoded.heldout], encoded.targets[~encoded.heldout], init, len(labels), seed)
    heldout = _score_heldout(encoded, tuning, final)
    train_accuracy = _install_head(model, final, encoded)
    _save_checkpoint(model, model_src, model_out)
    check = _check_checkpoint(model_out, tuning, encoded.features, final)
    return {
        "architecture": "BertForSequenceClassification",
        "trained_parameters": ["bert.pooler.dense", "classifier"],
        "frozen": "all other parameters, as in the MiniLM package",
        "features": "encoder last_hidden_state[:, 0] ([CLS]), frozen, computed once",
        "max_length": MAX_LENGTH,
        "truncation": True,
        "labels": list(labels),
        "optimizer": "AdamW, full batch",
        "learning_rate": HEAD_LEARNING_RATE,
        "weight_decay": HEAD_WEIGHT_DECAY,
        "steps": HEAD_STEPS,
        "seed": seed,
        "init": "pooler.dense from the MiniLM checkpoint; classifier N(0, 0.02), bias 0",
        "heldout": {"split": heldout_split, **heldout},
        "final_fit": {"texts": int((~encoded.heldout).sum()), "train_accuracy": train_accuracy},
        "checkpoint_check": check,
    }


def _load_base_model(model_src: Path, labels: Sequence[str], seed: int) -> tuple[Any, Any]:
    """The MiniLM classifier (eval mode) with ``labels`` as its id2label, and its fast tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(str(model_src), local_files_only=True)
    if not tokenizer.is_fast:
        raise RuntimeError("the MiniLM tokenizer did not load as a fast tokenizer")
    torch.manual_seed(seed)
    id2label = dict(enumerate(labels))
    model = BertForSequenceClassification.from_pretrained(
        str(model_src),
        num_labels=len(labels),
        id2label=id2label,
        label2id={label: i for i, label in id2label.items()},
        local_files_only=True,
    )
    model.eval()
    return model, tokenizer


def _encode_tuning(
    model: Any,
    tokenizer: Any,
    tuning: Sequence[TuningRow],
    labels: Sequence[str],
    heldout_ids: set[str],
    progress: Callable[[str], None],
) -> _Encoded:
    """Encode every tuning text once with the frozen encoder."""
    import torch

    texts = [row.text for row in tuning]
    started = time.monotonic()
    features = _cls_features(model, tokenizer, texts)
    progress(f"Encoded {len(texts)} training and tuning texts in {time.monotonic() - started:.1f} s.")
    label2id = {label: i for i, label in enumerate(labels)}
    targets = torch.tensor([label2id[row.label] for row in tuning], dtype=torch.long)
    mask = torch.tensor([row.id in heldout_ids for row in tuning], dtype=torch.bool)
    return _Encoded(features=features, targets=targets, heldout=mask)


def _pooler_init(model: Any) -> dict[str, Any]:
    """The checkpoint's pooler weights: where every fit of the head starts."""
    pooler = model.bert.pooler
    if pooler is None:
        raise RuntimeError("the MiniLM classifier was built without its pooler")
    return {"dense_weight": pooler.dense.weight.detach().clone(), "dense_bias": pooler.dense.bias.detach().clone()}


def _score_heldout(encoded: _Encoded, tuning: Sequence[TuningRow], fit: Mapping[str, Any]) -> dict[str, Any]:
    """Score the fitted head on the held-out texts, overall and per length bucket."""
    import torch

    mask = encoded.heldout
    with torch.no_grad():
        predicted = _head_logits(fit, encoded.features[mask]).argmax(dim=1)
    expected = encoded.targets[mask]
    correct = int((predicted == expected).sum())
    heldout_rows = [row for row, m in zip(tuning, mask.tolist(), strict=True) if m]
    per_bucket = {}
    for bucket in BUCKETS:
        sel = torch.tensor([row.length_bucket == bucket for row in heldout_rows], dtype=torch.bool)
        per_bucket[bucket] = {"texts": int(sel.sum()), "correct": int((predicted[sel] == expected[sel]).sum())}
    texts = int(mask.sum())
    return {
        "texts": texts,
        "correct": correct,
        "accuracy": correct / texts if texts else None,
        "per_bucket": per_bucket,
        "trained_on": int((~mask).sum()),
    }


def _install_head(model: Any, head: Mapping[str, Any], encoded: _Encoded) -> float:
    """Copy the fitted head into the model's pooler and classifier; its accuracy on the texts it was fitted on."""
    import torch

    pooler = model.bert.pooler
    with torch.no_grad():
        pooler.dense.weight.copy_(head["dense_weight"])
        pooler.dense.bias.copy_(head["dense_bias"])
        model.classifier.weight.copy_(head["classifier_weight"])
        model.classifier.bias.copy_(head["classifier_bias"])
        fitted = ~encoded.heldout
        predicted = _head_logits(head, encoded.features[fitted]).argmax(dim=1)
        return float((predicted == encoded.targets[fitted]).float().mean())


def _save_checkpoint(model: Any, model_src: Path, model_out: Path) -> None:
    """Save the model (safetensors) and the source tokenizer to ``model_out``, replacing what is there."""
    from transformers import AutoTokenizer

    if model_out.exists():
        shutil.rmtree(model_out)
    model.save_pretrained(str(model_out), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(model_src), local_files_only=True).save_pretrained(str(model_out))


def _check_checkpoint(
    model_out: Path, tuning: Sequence[TuningRow], features: Any, head: Mapping[str, Any]
) -> dict[str, Any]:
    """The saved checkpoint, loaded the way a user's own is, must compute the trained head."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    check_rows = sorted(tuning, key=lambda r: r.id)[:CHECKPOINT_CHECK_TEXTS]
    loaded = AutoModelForSequenceClassification.from_pretrained(str(model_out), local_files_only=True)
    loaded.eval()
    loaded_tokenizer = AutoTokenizer.from_pretrained(str(model_out), local_files_only=True)
    position = {row.id: i for i, row in enumerate(tuning)}
    with torch.inference_mode():
        encoded = loaded_tokenizer(
            [row.text for row in check_rows],
            padding=True,
            truncation=True,
            max_length=MAX_LENGTH,
            return_tensors="pt",
        )
        logits = loaded(**encoded).logits
        expected = _head_logits(head, features[[position[r.id] for r in check_rows]])
    max_diff = float((logits - expected).abs().max())
    if max_diff > CHECKPOINT_CHECK_ATOL:
        raise RuntimeError(f"the saved checkpoint's logits differ from the trained head by {max_diff:.2e}")
    return {"texts": len(check_rows), "max_abs_logit_difference": max_diff, "tolerance": CHECKPOINT_CHECK_ATOL}


def _token_counts(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Token counts with the fast tokenizer: special tokens included, no truncation."""
    if not texts:
        return []
    encoded = tokenizer(list(texts), add_special_tokens=True, truncation=False, padding=False, verbose=False)
    return [len(ids) for ids in encoded["input_ids"]]


def _cls_features(model: Any, tokenizer: Any, texts: Sequence[str]) -> Any:
    """The frozen encoder's [CLS] hidden states, batched by sorted length."""
    import torch

    lengths = _token_counts(tokenizer, texts)
    order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(order), FEATURE_BATCH):
            batch = [texts[i] for i in order[start : start + FEATURE_BATCH]]
            encoded = tokenizer(batch, padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
            hidden = model.bert(**encoded).last_hidden_state
            chunks.append(hidden[:, 0])
        sorted_features = torch.cat(chunks)
    features = torch.empty_like(sorted_features)
    features[torch.tensor(order)] = sorted_features
    # A tensor made under inference_mode cannot take part in autograd; clone it outside.
    return features.clone()


def _fit_head(features: Any, targets: Any, init: Mapping[str, Any], n_labels: int, seed: int) -> Any:
    import torch

    generator = torch.Generator().manual_seed(seed)
    hidden = features.shape[1]
    dense_weight = init["dense_weight"].clone().requires_grad_(True)
    dense_bias = init["dense_bias"].clone().requires_grad_(True)
    classifier_weight = (torch.randn(n_labels, hidden, generator=generator) * 0.02).requires_grad_(True)
    classifier_bias = torch.zeros(n_labels, requires_grad=True)
    params = {
        "dense_weight": dense_weight,
        "dense_bias": dense_bias,
        "classifier_weight": classifier_weight,
        "classifier_bias": classifier_bias,
    }
    optimizer = torch.optim.AdamW(list(params.values()), lr=HEAD_LEARNING_RATE, weight_decay=HEAD_WEIGHT_DECAY)
    for _ in range(HEAD_STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(_head_logits(params, features), targets)
        loss.backward()
        optimizer.step()
    return {key: value.detach().clone() for key, value in params.items()}


def _head_logits(params: Mapping[str, Any], features: Any) -> Any:
    import torch

    pooled = torch.tanh(features @ params["dense_weight"].T + params["dense_bias"])
    return pooled @ params["classifier_weight"].T + params["classifier_bias"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
