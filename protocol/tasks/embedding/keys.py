"""The sentence-embedding task's own study keys: the ``[embedding]`` table and ``[quality] min_cosine``.

Its ``quality.metric`` is ``ndcg@10``, ``mrr@10`` or ``recall@10`` over the queries (docs/tasks.md).

Example::

    STUDY_KEYS[0].key      # "embedding.pooling"
"""

from __future__ import annotations

from protocol.study.keys import Bounds, key_rows

STUDY_KEYS = key_rows(
    ("embedding.pooling", "string", "required", None,
     '"mean" (over the attention mask) or "cls" (the first token\'s state)'),
    ("embedding.normalize", "boolean", "required", None, "L2-normalise every vector in the trial: true or false"),
    ("embedding.dimension", "integer", "required", Bounds(1, 65536),
     "values per vector: the model's hidden size (config.json hidden_size)"),
    ("embedding.queries.path", "string", "required", None,
     "the final query set: JSONL id, text, relevant (ids of final corpus inputs), kept apart from the tuning split"),
    ("embedding.queries.fingerprint", "string", "required", None, "sha256 of the query file"),
    ("embedding.tuning_queries.path", "string", "required", None,
     "the tuning split's queries (relevant ids are tuning inputs): `isocost tune` measures the metric on them"),
    ("embedding.tuning_queries.fingerprint", "string", "required", None, "sha256 of the tuning query file"),
    ("quality.min_cosine", "number", "0.999", Bounds(0, 1, low_open=True),
     "cosine to the reference variant's vector an input needs to agree, in (0, 1]"),
)
