"""The padded batch shapes a measured pass will see, so the warm-up can run exactly those.

Pure arithmetic on token counts (no torch): the host computes them from ``corpus_index.csv``
(token counts with special tokens, untruncated) and puts them in the trial spec. The trial
truncates at ``max_length``, orders inputs as the variant says (``length_grouping``: ``none`` =
corpus order, ``sort`` = by truncated length, ties by corpus position), cuts batches of
``batch_size`` and pads each to its longest input (``padding = "longest"``) or to ``max_length``.
"""

from __future__ import annotations

Shape = tuple[int, int]  # (rows, padded sequence length)


def pass_order(token_counts: list[int], max_length: int, grouping: str) -> list[int]:
    """Input positions in the order the pass runs them."""
    order = list(range(len(token_counts)))
    if grouping == "sort":
        order.sort(key=lambda i: (min(token_counts[i], max_length), i))
    return order


def pass_shapes(token_counts: list[int], batch_size: int, padding: str, max_length: int, grouping: str) -> list[Shape]:
    """Every batch's padded shape, in pass order."""
    order = pass_order(token_counts, max_length, grouping)
    shapes = []
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        longest = max(min(token_counts[i], max_length) for i in batch)
        shapes.append((len(batch), longest if padding == "longest" else max_length))
    return shapes


def warmup_shapes(token_counts: list[int], batch_size: int, padding: str, max_length: int,
                  grouping: str) -> tuple[Shape, ...]:
    """The pass's longest and shortest padded shapes and its last (possibly partial) batch, longest
    first so the allocator reaches its peak during the warm-up; duplicates removed."""
    shapes = pass_shapes(token_counts, batch_size, padding, max_length, grouping)
    if not shapes:
        return ()
    picked = [max(shapes, key=lambda s: (s[1], s[0])), min(shapes, key=lambda s: (s[1], -s[0])), shapes[-1]]
    return tuple(dict.fromkeys(picked))
