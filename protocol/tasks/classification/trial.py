"""Text classification in the trial: an ``AutoModelForSequenceClassification`` checkpoint, one label per input.

:class:`Classifier` loads the checkpoint under the variant's settings and runs one padded batch; its
outputs are written one line per input into ``predictions.jsonl`` (``{"id", "label", "score"}``, flushed per
batch: a crash keeps what was completed). The host side of the task is ``protocol.tasks.classification``.

Example::

    classifier = Classifier.load(Path("model"), variant, torch)
    labels, scores = classifier.predict(["a text"])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.records.stages import Variant
from runner.trial.model import (
    describe_common,
    encode_truncated,
    padded_batch,
    prepare_model,
    timed_forward,
    untruncated_lengths,
)
from runner.trial.tasks.base import PassFile, TaskModel, TrialTask

OUTPUT_FILE = "predictions.jsonl"


@dataclass
class Classifier(TaskModel):
    """A tokenizer + ``AutoModelForSequenceClassification`` under one variant's settings."""

    tokenizer: Any
    model: Any
    variant: Variant
    torch: Any
    labels: dict[int, str]
    device: Any
    #: When a list (CUDA/ROCm trials during the measured pass), each forward appends its (start, stop)
    #: CUDA events: device time of the forward alone, not of padding, transfers or host work.
    forward_events: list[tuple[Any, Any]] | None = None

    @classmethod
    def load(cls, path: Path, variant: Variant, torch: Any) -> Classifier:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if variant.precision == "fp16" and variant.device == "cpu":
            raise ValueError("fp16 is GPU-only; the study should have refused this variant")
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModelForSequenceClassification.from_pretrained(
            str(path), local_files_only=True, attn_implementation=variant.attention
        )
        model, device = prepare_model(model, variant, torch)
        labels = {int(k): str(v) for k, v in model.config.id2label.items()}
        return cls(tokenizer=tokenizer, model=model, variant=variant, torch=torch, labels=labels, device=device)

    def describe(self) -> dict[str, Any]:
        described = describe_common(self.model, self.tokenizer, self.variant)
        return {**described, "num_labels": len(self.labels), "labels": [self.labels[i] for i in sorted(self.labels)]}

    def tokenize(self, texts: list[str]) -> list[dict[str, list[int]]]:
        """Token ids per text, truncated at ``max_length``, not padded yet."""
        return encode_truncated(self.tokenizer, texts, self.variant.max_length)

    def untruncated_lengths(self, texts: list[str]) -> list[int]:
        return untruncated_lengths(self.tokenizer, texts)

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> tuple[list[str], list[float]]:
        """Pad one batch per the padding policy, run it, bring labels and scores to the host."""
        torch = self.torch
        batch = padded_batch(self.tokenizer, features, self.variant, self.device)
        with torch.inference_mode():
            logits = timed_forward(self.model, batch, torch, self.forward_events).logits
            probs = torch.softmax(logits.float(), dim=-1)
            scores, indices = probs.max(dim=-1)
        return [self.labels[int(i)] for i in indices.tolist()], [float(s) for s in scores.tolist()]


class ClassificationTrial(TrialTask):
    """The text-classification task as the trial runs it (``runner.trial.tasks``)."""

    name = "text-classification"
    pass_files = (PassFile(OUTPUT_FILE),)

    def load(self, path: Path, variant: Variant, torch: Any, options: dict[str, Any]) -> Classifier:
        return Classifier.load(path, variant, torch)  # a classifier takes no task options

    def lines(self, ids: Sequence[str], outputs: tuple[list[str], list[float]]) -> str:
        labels, scores = outputs
        return "".join(json.dumps({"id": ident, "label": label, "score": score}) + "\n"
                       for ident, label, score in zip(ids, labels, scores, strict=True))

    def perturb(self, ids: Sequence[str], outputs: tuple[list[str], list[float]], model: Any,
                picked: set[str]) -> tuple[list[str], list[float]]:
        """Test fault ``disagree:SHARE``: each picked id gets the next label of the model's label set."""
        labels, scores = outputs
        names = sorted(set(model.labels.values()))
        changed = [names[(names.index(label) + 1) % len(names)] if ident in picked else label
                   for ident, label in zip(ids, labels, strict=True)]
        return changed, scores


TRIAL_TASK = ClassificationTrial()
