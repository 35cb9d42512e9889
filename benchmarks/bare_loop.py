"""The bare loop: what a careful engineer writes by hand to classify a corpus, nothing more.

Same work as the runner's measured pass (runner/trial/run.py, runner/trial/model.py): read the
JSONL corpus, tokenize every text once (truncation at max_length, no padding), then per batch pad
to the longest input, move to the device, run the model under ``torch.inference_mode``, softmax
in fp32, take the arg-max and bring labels and scores to the host. No isocost code is imported;
no file is written; no per-batch bookkeeping.
"""

from __future__ import annotations

import json
import time
from typing import Any

_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class BareLoop:
    """Read the corpus, tokenize every text once, classify it batch by batch (``_predict``); shared by the bare
    torch loop here and the bare ONNX Runtime loop (benchmarks/onnxruntime_pass.py)."""

    tokenizer: Any
    max_length: int

    def _predict(self, encoded: Any, start: int, stop: int) -> tuple[list[str], list[float]]:
        raise NotImplementedError

    def warm_up(self, texts: list[str], runs: int, batch_size: int) -> None:
        for _ in range(runs):
            for start in range(0, len(texts), batch_size):
                chunk = texts[start:start + batch_size]
                encoded = self.tokenizer(chunk, truncation=True, max_length=self.max_length, padding=False)
                self._predict(encoded, 0, len(chunk))

    def timed_pass(self, corpus_path: str, batch_size: int, sync: Any = None,
                   clock: Any = time.perf_counter) -> tuple[float, list[Any]]:
        """Seconds for one pass (host clock, the device synchronised at both ends), and the outputs."""
        if sync is not None:
            sync()
        start = clock()
        ids, texts = [], []
        with open(corpus_path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    item = json.loads(line)
                    ids.append(item["id"])
                    texts.append(item["text"])
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length, padding=False)
        labels: list[str] = []
        scores: list[float] = []
        for first in range(0, len(texts), batch_size):
            batch_labels, batch_scores = self._predict(encoded, first, first + batch_size)
            labels += batch_labels
            scores += batch_scores
        if sync is not None:
            sync()
        elapsed = clock() - start
        return elapsed, list(zip(ids, labels, scores, strict=True))


class BareClassifier(BareLoop):
    def __init__(self, model_path: str, device: str, precision: str, attention: str, max_length: int,
                 torch: Any) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.max_length = max_length
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        model = AutoModelForSequenceClassification.from_pretrained(model_path, local_files_only=True,
                                                                   attn_implementation=attention)
        model.eval()
        model.to(dtype=getattr(torch, _DTYPES[precision]))
        self.model = model.to(self.device)
        self.id2label = {int(k): v for k, v in model.config.id2label.items()}

    def _predict(self, encoded: Any, start: int, stop: int) -> tuple[list[str], list[float]]:
        torch = self.torch
        padded = self.tokenizer.pad({key: values[start:stop] for key, values in encoded.items()},
                                    padding="longest", return_tensors="pt")
        batch = {key: value.to(self.device) for key, value in padded.items()}
        with torch.inference_mode():
            probs = torch.softmax(self.model(**batch).logits.float(), dim=-1)
            scores, indices = probs.max(dim=-1)
        return [self.id2label[i] for i in indices.tolist()], scores.tolist()
