"""Loading a sequence-classification checkpoint the way the variant declares it."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.records import Variant

_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass
class Classifier:
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
        model.eval()
        dtype = getattr(torch, _DTYPES[variant.precision])
        model.to(dtype=dtype)
        if variant.quantization == "int8-dynamic":
            if variant.device != "cpu":
                raise ValueError("int8-dynamic quantization (torch.ao) runs on CPU only")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        device = torch.device(variant.device)
        model.to(device)
        if variant.compile:
            model = torch.compile(model)
        labels = {int(k): str(v) for k, v in model.config.id2label.items()}
        return cls(tokenizer=tokenizer, model=model, variant=variant, torch=torch, labels=labels, device=device)

    def describe(self) -> dict[str, Any]:
        config = self.model.config
        return {
            "architecture": list(getattr(config, "architectures", None) or []),
            "model_type": getattr(config, "model_type", None),
            "num_labels": len(self.labels),
            "labels": [self.labels[i] for i in sorted(self.labels)],
            "parameters": int(sum(p.numel() for p in self.model.parameters())),
            "dtype": _DTYPES[self.variant.precision],
            "quantization": self.variant.quantization,
            "compiled": self.variant.compile,
            "attention": getattr(config, "_attn_implementation", self.variant.attention),
            "tokenizer_class": type(self.tokenizer).__name__,
            "padding": self.variant.padding,
            "max_length": self.variant.max_length,
        }

    def tokenize(self, texts: list[str]) -> list[dict[str, list[int]]]:
        """Token ids per text, truncated at ``max_length``, not padded yet."""
        encoded = self.tokenizer(texts, truncation=True, max_length=self.variant.max_length, padding=False)
        keys = list(encoded.keys())
        return [{key: encoded[key][i] for key in keys} for i in range(len(texts))]

    def untruncated_lengths(self, texts: list[str]) -> list[int]:
        encoded = self.tokenizer(texts, truncation=False, padding=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> tuple[list[str], list[float]]:
        """Pad one batch per the padding policy, run it, bring labels and scores to the host."""
        torch = self.torch
        padding = "longest" if self.variant.padding == "longest" else "max_length"
        batch = self.tokenizer.pad(
            features, padding=padding, max_length=self.variant.max_length, return_tensors="pt"
        )
        batch = {key: value.to(self.device) for key, value in batch.items()}
        with torch.inference_mode():
            if self.forward_events is not None:
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                start.record()
                logits = self.model(**batch).logits
                stop.record()
                self.forward_events.append((start, stop))
            else:
                logits = self.model(**batch).logits
            probs = torch.softmax(logits.float(), dim=-1)
            scores, indices = probs.max(dim=-1)
        return [self.labels[int(i)] for i in indices.tolist()], [float(s) for s in scores.tolist()]

    def predict(self, texts: list[str]) -> tuple[list[str], list[float]]:
        return self.predict_encoded(self.tokenize(texts))


def attention_ops(classifier: Classifier, features: list[dict[str, list[int]]]) -> tuple[list[str], str]:
    """The attention operators one forward really dispatches (torch profiler, CPU-side op names, which also
    name the CUDA/ROCm kernels' entry points: flash, efficient, cudnn, math). Returns (ops, reason-if-none)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            classifier.predict_encoded(features)
        names = {event.key for event in prof.key_averages()}
    except Exception as exc:  # the profiler is optional machinery  # noqa: BLE001
        return [], f"profiler unavailable: {type(exc).__name__}: {exc}"
    ops = sorted(n for n in names if "scaled_dot_product" in n or "attention" in n.lower())
    return ops, "" if ops else "no fused attention operator dispatched (eager attention: matmul + softmax)"
