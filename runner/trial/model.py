"""What every encoder task does to its checkpoint the same way: precision, quantization, device, compile.

The tasks (``runner.trial.tasks``) load their model class; :func:`prepare_model` then applies the variant's
settings, and :func:`attention_ops` reads which attention operators a forward really dispatches.
"""

from __future__ import annotations

import warnings
from typing import Any

from protocol.records.stages import Variant

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def prepare_model(model: Any, variant: Variant, torch: Any) -> tuple[Any, Any]:
    """Eval mode, the variant's dtype, int8-dynamic quantization (CPU only), its device and torch.compile;
    returns (model, device)."""
    if variant.precision == "fp16" and variant.device == "cpu":
        raise ValueError("fp16 is GPU-only; the study should have refused this variant")
    model.eval()
    model.to(dtype=getattr(torch, DTYPES[variant.precision]))
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
    return model, device


def padded_batch(tokenizer: Any, features: list[dict[str, list[int]]], variant: Variant, device: Any) -> dict[str, Any]:
    """One batch padded per the variant's padding policy (longest in the batch, or max_length), on the device."""
    padding = "longest" if variant.padding == "longest" else "max_length"
    batch = tokenizer.pad(features, padding=padding, max_length=variant.max_length, return_tensors="pt")
    return {key: value.to(device) for key, value in batch.items()}


def timed_forward(model: Any, batch: dict[str, Any], torch: Any, events: list[tuple[Any, Any]] | None) -> Any:
    """``model(**batch)``; with ``events`` (a GPU trial's measured pass), between two CUDA events appended there:
    the device time of the forward alone."""
    if events is None:
        return model(**batch)
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    output = model(**batch)
    stop.record()
    events.append((start, stop))
    return output


def encode_truncated(tokenizer: Any, texts: list[str], max_length: int) -> list[dict[str, list[int]]]:
    """An encoder's token ids (and its other inputs) per text, truncated at ``max_length``, not padded yet."""
    encoded = tokenizer(texts, truncation=True, max_length=max_length, padding=False)
    keys = list(encoded.keys())
    return [{key: encoded[key][i] for key in keys} for i in range(len(texts))]


def untruncated_lengths(tokenizer: Any, texts: list[str]) -> list[int]:
    """How many tokens each text has before any truncation."""
    return [len(ids) for ids in tokenizer(texts, truncation=False, padding=False)["input_ids"]]


def describe_common(model: Any, tokenizer: Any, variant: Variant) -> dict[str, Any]:
    """What the manifest records of any loaded encoder."""
    config = model.config
    return {
        "architecture": list(getattr(config, "architectures", None) or []),
        "model_type": getattr(config, "model_type", None),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "dtype": DTYPES[variant.precision],
        "quantization": variant.quantization,
        "compiled": variant.compile,
        "attention": getattr(config, "_attn_implementation", variant.attention),
        "tokenizer_class": type(tokenizer).__name__,
        "padding": variant.padding,
        "max_length": variant.max_length,
    }


def attention_ops(model: Any, features: list[dict[str, list[int]]]) -> tuple[list[str], str]:
    """The attention operators one forward really dispatches (torch profiler, CPU-side op names, which also
    name the CUDA/ROCm kernels' entry points: flash, efficient, cudnn, math). Returns (ops, reason-if-none)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        probe = model.probe_encoded  # a generator: one token only
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            probe(features)
        names = {event.key for event in prof.key_averages()}
    except Exception as exc:  # the profiler is optional machinery  # noqa: BLE001
        return [], f"profiler unavailable: {type(exc).__name__}: {exc}"
    ops = sorted(n for n in names if "scaled_dot_product" in n or "attention" in n.lower())
    return ops, "" if ops else "no fused attention operator dispatched (eager attention: matmul + softmax)"
