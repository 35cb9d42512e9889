"""Retrieval over one pass's vectors, in float32 whatever precision the pass ran in: rankings, metrics, agreement.

Similarity is the cosine: query and document vectors are L2-normalised in float32 (a zero vector stays zero)
and multiplied in float32 blocks of queries. The top 10 of each query are its 10 most similar documents, ties
broken by corpus order. With R a query's relevant documents and r the rank (1-based) of a document in the top
10, binary relevance:

- ``recall@10`` = |top 10 ∩ R| / |R|;
- ``mrr@10`` = 1 / r of the first relevant document in the top 10 (0 if none);
- ``ndcg@10`` = Σ over relevant documents in the top 10 of 1 / log2(r + 1), divided by the same sum for the
  ideal ranking (min(|R|, 10) relevant documents first), as MTEB scores retrieval.

A pass's metric is the mean over queries. Two passes agree on an input when the cosine of their two vectors is
at least ``min_cosine``; the overlap of two passes' rankings is the mean over queries of |top 10 ∩ top 10'| / 10.
numpy is imported inside each function, so the module imports without it.

Example::

    top = top_k(normalised(queries), normalised(documents))
    per_query(metric="ndcg@10", top=top, relevant=[[3], [0, 7]]).mean()
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

K = 10
METRICS = ("ndcg@10", "mrr@10", "recall@10")
#: Queries per float32 block of similarities (block × documents × 4 bytes: 64 MiB for 250,000 documents).
QUERY_BLOCK = 64


def normalised(vectors: Any) -> Any:
    """Rows scaled to unit L2 norm in float32 (a zero row stays zero)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    norms[norms == 0] = 1.0
    result: Any = matrix / norms[:, None]
    return result


def top_k(queries: Any, documents: Any, k: int = K) -> Any:
    """Indices of each query's ``k`` most similar documents (rows already normalised), best first, ties by
    index; ``k`` is at most the number of documents."""
    import numpy as np

    k = min(k, documents.shape[0])
    result = np.empty((queries.shape[0], k), dtype=np.int64)
    for start in range(0, queries.shape[0], QUERY_BLOCK):
        scores = queries[start:start + QUERY_BLOCK] @ documents.T
        if k < documents.shape[0]:
            part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        else:
            part = np.broadcast_to(np.arange(k), (scores.shape[0], k))
        picked = np.take_along_axis(scores, part, axis=1)
        order = np.lexsort((part, -picked), axis=1)
        result[start:start + QUERY_BLOCK] = np.take_along_axis(part, order, axis=1)
    return result


def per_query(metric: str, top: Any, relevant: Sequence[Sequence[int]]) -> Any:
    """Each query's score (float64) from its top-k document indices and its relevant document indices."""
    import numpy as np

    discounts = 1.0 / np.log2(np.arange(2, top.shape[1] + 2))
    scores = np.zeros(top.shape[0], dtype=np.float64)
    for row, (ranked, wanted) in enumerate(zip(top.tolist(), relevant, strict=True)):
        wanted_set = set(wanted)
        hits = [rank for rank, doc in enumerate(ranked) if doc in wanted_set]
        if not hits:
            continue
        if metric == "recall@10":
            scores[row] = len(hits) / len(wanted_set)
        elif metric == "mrr@10":
            scores[row] = 1.0 / (hits[0] + 1)
        elif metric == "ndcg@10":
            ideal = discounts[: min(len(wanted_set), top.shape[1])].sum()
            scores[row] = discounts[hits].sum() / ideal
        else:
            raise ValueError(f"unknown retrieval metric {metric!r}")
    return scores


def mean(values: Any, indices: Sequence[int] | None = None) -> float:
    """The mean of ``values`` (over ``indices``, repeats counted, when given)."""
    import numpy as np

    chosen = values if indices is None else values[np.asarray(indices, dtype=np.int64)]
    return float(chosen.mean()) if len(chosen) else math.nan


def cosines(a: Any, b: Any) -> Any:
    """Row-wise cosine of two normalised float32 matrices of one shape."""
    import numpy as np

    return np.einsum("ij,ij->i", a, b)


def overlap(top_a: Any, top_b: Any) -> float:
    """Mean over queries of the share of ``top_b``'s documents also in ``top_a`` (same document indices)."""
    if top_a.shape[0] == 0:
        return math.nan
    shared = sum(len(set(a) & set(b)) for a, b in zip(top_a.tolist(), top_b.tolist(), strict=True))
    return shared / (top_a.shape[0] * top_b.shape[1])
