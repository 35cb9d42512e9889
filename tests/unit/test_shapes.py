"""The measured pass's padded shapes, computed on the host for the warm-up (hand-checked)."""

from __future__ import annotations

from protocol.study.shapes import pass_order, pass_shapes, warmup_shapes

COUNTS = [5, 40, 7, 3, 12, 9, 2]  # token counts with special tokens, untruncated


def test_pass_shapes_pad_each_batch_to_its_longest_truncated_input():
    assert pass_shapes(COUNTS, 3, "longest", 32, "none") == [(3, 32), (3, 12), (1, 2)]


def test_sorted_grouping_orders_by_truncated_length_then_position():
    assert pass_order([9, 40, 33, 2], 32, "sort") == [3, 0, 1, 2]  # 40, 33 → 32, 32: position breaks the tie
    assert pass_shapes(COUNTS, 3, "longest", 32, "sort") == [(3, 5), (3, 12), (1, 32)]


def test_max_length_padding_has_one_length():
    assert pass_shapes(COUNTS, 3, "max_length", 32, "none") == [(3, 32), (3, 32), (1, 32)]


def test_warmup_shapes_are_longest_shortest_and_last_without_duplicates():
    assert warmup_shapes(COUNTS, 3, "longest", 32, "none") == ((3, 32), (1, 2))  # shortest is the last batch
    assert warmup_shapes(COUNTS, 3, "longest", 32, "sort") == ((1, 32), (3, 5))
    assert pass_shapes(COUNTS, 2, "longest", 32, "none") == [(2, 32), (2, 7), (2, 12), (1, 2)]
    assert warmup_shapes(COUNTS, 2, "longest", 32, "none") == ((2, 32), (1, 2))
    assert warmup_shapes(COUNTS, 3, "max_length", 32, "none") == ((3, 32), (1, 32))
    assert warmup_shapes([], 3, "longest", 32, "none") == ()
