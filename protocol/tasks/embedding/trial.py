"""Sentence embeddings in the trial: any ``AutoModel`` encoder, pooled as the study declares, one vector per input.

:class:`Embedder` loads the checkpoint under the variant's settings, runs one padded batch and pools its last
hidden states in float32 (``mean`` over the attention mask, or ``cls``: the first token), L2-normalised when
``[embedding] normalize`` is true. The measured pass writes the vectors per batch (the one
:class:`~runner.trial.tasks.sink.OutputSink`: ``vectors.f32`` then ``vector_ids.jsonl``, each flushed, so a
crash keeps every completed row). After the
measured pass, outside ``pass_s`` (its time is in ``write_s`` and in the manifest's ``queries.embed_s``),
:meth:`Embedder.finish_pass` embeds the study's queries with the same model, batch size and padding into
``query_vectors.f32`` + ``query_ids.jsonl``. The host side is ``protocol.tasks.embedding``.

Example::

    embedder = Embedder.load(Path("encoder"), variant, torch, {"pooling": "mean", "normalize": True, …})
    vectors = embedder.predict(["a text"])          # float32 numpy array, 1 × 384
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.records.stages import Variant
from protocol.tasks.embedding import QUERY_IDS, QUERY_VECTORS, VECTOR_IDS, VECTORS
from protocol.tasks.embedding.vector_file import header, id_lines
from runner.trial.model import (
    describe_common,
    encode_truncated,
    padded_batch,
    prepare_model,
    timed_forward,
    untruncated_lengths,
)
from runner.trial.tasks.base import PassFile, TaskModel, TrialTask
from runner.trial.tasks.sink import OutputSink


@dataclass
class Embedder(TaskModel):
    """A tokenizer + ``AutoModel`` under one variant's settings, pooling as the study declares."""

    tokenizer: Any
    model: Any
    variant: Variant
    torch: Any
    device: Any
    pooling: str
    normalize: bool
    dimension: int
    queries: list[tuple[str, str]] = field(default_factory=list)
    #: When a list (CUDA/ROCm trials during the measured pass), each forward appends its (start, stop) events.
    forward_events: list[tuple[Any, Any]] | None = None

    @classmethod
    def load(cls, path: Path, variant: Variant, torch: Any, options: dict[str, Any]) -> Embedder:
        from transformers import AutoModel, AutoTokenizer

        pooling = options.get("pooling")
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling {pooling!r} is not one this trial runner can do (mean, cls)")
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if pooling == "cls":
            _check_cls(tokenizer)
        model = AutoModel.from_pretrained(str(path), local_files_only=True, attn_implementation=variant.attention)
        dimension = int(options["dimension"])
        hidden = getattr(model.config, "hidden_size", dimension)
        if hidden != dimension:
            raise ValueError(f"the model's hidden size is {hidden}, the study declares dimension {dimension}")
        model, device = prepare_model(model, variant, torch)
        queries = [(str(item[0]), str(item[1])) for item in options.get("queries", {}).get("items", [])]
        return cls(tokenizer=tokenizer, model=model, variant=variant, torch=torch, device=device, pooling=pooling,
                   normalize=bool(options["normalize"]), dimension=dimension, queries=queries)

    def describe(self) -> dict[str, Any]:
        return {**describe_common(self.model, self.tokenizer, self.variant), "pooling": self.pooling,
                "normalize": self.normalize, "dimension": self.dimension, "pooled_in": "float32"}

    def tokenize(self, texts: list[str]) -> list[dict[str, list[int]]]:
        """Token ids per text, truncated at ``max_length``, not padded yet."""
        return encode_truncated(self.tokenizer, texts, self.variant.max_length)

    def untruncated_lengths(self, texts: list[str]) -> list[int]:
        return untruncated_lengths(self.tokenizer, texts)

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> Any:
        """Pad one batch per the padding policy, run it, pool in float32 and bring the vectors to the host."""
        torch = self.torch
        batch = padded_batch(self.tokenizer, features, self.variant, self.device)
        with torch.inference_mode():
            hidden = timed_forward(self.model, batch, torch, self.forward_events).last_hidden_state
            vectors = pool(torch, hidden, batch["attention_mask"], self.pooling, self.normalize)
        return vectors.cpu().numpy()

    def finish_pass(self, out: Path) -> dict[str, Any]:
        """Embed the study's queries (after the measured pass): the query files, and what the manifest records."""
        started = time.perf_counter()
        encoded = self.tokenize([text for _, text in self.queries])
        size = self.variant.batch_size
        with OutputSink(out, TRIAL_TASK, {VECTORS: QUERY_VECTORS, VECTOR_IDS: QUERY_IDS}) as sink:
            for start in range(0, len(self.queries), size):
                ids = [ident for ident, _ in self.queries[start:start + size]]
                vectors = self.predict_encoded(encoded[start:start + size])
                sink.write(sink.lines(ids, vectors), vectors)
        return {"queries": {"count": len(self.queries), "embed_s": time.perf_counter() - started,
                            "files": [QUERY_VECTORS, QUERY_IDS],
                            "measured": "after the measured pass, outside pass_s (in write_s)"}}


def pool(torch: Any, hidden: Any, mask: Any, pooling: str, normalize: bool) -> Any:
    """One batch's vectors in float32: the masked mean of the last hidden states, or the first token's."""
    states = hidden.float()
    if pooling == "cls":
        vectors = states[:, 0]
    else:
        weights = mask.to(states.dtype).unsqueeze(-1)
        vectors = (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
    if normalize:
        vectors = torch.nn.functional.normalize(vectors, p=2.0, dim=1)
    return vectors


def _check_cls(tokenizer: Any) -> None:
    """``cls`` pooling needs every input to start with the tokenizer's [CLS] token."""
    cls_id = getattr(tokenizer, "cls_token_id", None)
    first = tokenizer("a", truncation=True, max_length=8)["input_ids"][:1]
    if cls_id is None or first != [cls_id]:
        raise ValueError('pooling = "cls" needs a tokenizer that starts every input with a [CLS] token; this '
                         'one does not (use pooling = "mean")')


class EmbeddingTrial(TrialTask):
    """The sentence-embedding task as the trial runs it (``runner.trial.tasks``): per batch, the vectors'
    rows (``vectors.f32``, its header first) then their ids (``vector_ids.jsonl``)."""

    name = "sentence-embedding"
    pass_files = (PassFile(VECTORS, binary=True), PassFile(VECTOR_IDS))

    def load(self, path: Path, variant: Variant, torch: Any, options: dict[str, Any]) -> Embedder:
        return Embedder.load(path, variant, torch, options)

    def lines(self, ids: Sequence[str], outputs: Any) -> str:
        return id_lines(list(ids))

    def answer(self, ids: Sequence[str], outputs: Any) -> str:
        """A served answer keeps its vector (float32 values, written exactly: ``json`` prints the shortest decimal
        that reads back as the same number): ``{"id": …, "vector": […]}``."""
        return "".join(json.dumps({"id": ident, "vector": [float(v) for v in row]}) + "\n"
                       for ident, row in zip(ids, outputs, strict=True))

    def answer_outputs(self, answers: Sequence[dict[str, Any]]) -> Any:
        """The answers' vectors as one float32 array (rows in the answers' order), for ``vectors.f32``."""
        import numpy

        vectors = [answer["vector"] for answer in answers]
        if len({len(vector) for vector in vectors}) > 1:
            raise ValueError("the served vectors differ in dimension")
        return numpy.asarray(vectors, dtype="<f4")

    def chunk(self, name: str, outputs: Any, first: bool) -> bytes:
        rows = outputs.astype("<f4", copy=False).tobytes()
        return header(int(outputs.shape[1])) + rows if first else rows

    def perturb(self, ids: Sequence[str], outputs: Any, model: Any, picked: set[str]) -> Any:
        """Test fault ``disagree:SHARE``: each picked id's vector is reversed in order (cosine far below 0.999)."""
        changed = outputs.copy()
        for row, ident in enumerate(ids):
            if ident in picked:
                changed[row] = changed[row][::-1]
        return changed


TRIAL_TASK = EmbeddingTrial()
