"""Shapes of the warm-up batches, and the per-batch record of the measured pass (``batches.jsonl``)."""

from __future__ import annotations

from typing import Any

#: Bucket name in ``batches.jsonl`` when the study declares no ``[[length_buckets]]``.
NO_BUCKETS = "all"
#: Bucket name for an input the spec's ``input_buckets`` does not list (should not happen).
UNBUCKETED = "unbucketed"


def shaped_batches(features: list[dict[str, list[int]]], shapes: tuple[tuple[int, int], ...]
                   ) -> list[list[dict[str, list[int]]]]:
    """One warm-up batch per (rows, length) shape, made of tuning tokens: each row keeps its input's first
    and last token (e.g. [CLS] … [SEP]) and repeats its inner tokens to exactly ``length`` ids."""
    if not features:
        return []
    batches = []
    for rows, length in shapes:
        batch = []
        for r in range(rows):
            source = features[r % len(features)]
            ids = source["input_ids"]
            inner = ids[1:-1] or ids[:1]
            body = (inner * (length // len(inner) + 1))[: max(length - 2, 0)]
            new_ids = ([ids[0], *body, ids[-1]] if length >= 2 else ids[:1])[:length]
            row = {key: [values[0]] * length for key, values in source.items() if key != "input_ids"}
            row["input_ids"] = new_ids
            batch.append(row)
        batches.append(batch)
    return batches


def batch_record(batch_no: int, index: list[int], encoded: list[dict[str, list[int]]], buckets: list[str],
                 batch_s: float, device_s: float | None) -> dict[str, Any]:
    """One line of ``batches.jsonl``: tokens are the ids fed to the model after truncation, before padding."""
    inputs_by_bucket: dict[str, int] = {}
    tokens_by_bucket: dict[str, int] = {}
    for i in index:
        n = len(encoded[i]["input_ids"])
        inputs_by_bucket[buckets[i]] = inputs_by_bucket.get(buckets[i], 0) + 1
        tokens_by_bucket[buckets[i]] = tokens_by_bucket.get(buckets[i], 0) + n
    return {
        "index": batch_no,
        "n_inputs": len(index),
        "n_tokens": sum(tokens_by_bucket.values()),
        "inputs_by_bucket": inputs_by_bucket,
        "tokens_by_bucket": tokens_by_bucket,
        "batch_s": batch_s,
        "device_s": device_s,
    }
