from __future__ import annotations

from protocol.records.stages import Variant
from protocol.study.schedule import attempt_trial_id, rotated_schedule


def variant(vid: str) -> Variant:
    return Variant(variant_id=vid, stack="cpu", device="cpu", precision="fp32", quantization="none", compile=False,
                   attention="sdpa", batch_size=1, padding="longest", max_length=8, length_grouping="none",
                   resume="none", threads=1, seed=0, deterministic=True)


def test_rotation_matches_the_seed_example():
    slots = rotated_schedule((variant("1"), variant("4"), variant("8")), repetitions=5)
    rounds = [[s.variant_id for s in slots[i:i + 3]] for i in range(0, 15, 3)]
    assert rounds == [["1", "4", "8"], ["4", "8", "1"], ["8", "1", "4"], ["1", "4", "8"], ["4", "8", "1"]]
    assert [s.order_index for s in slots] == list(range(1, 16))
    assert [s.repetition for s in slots[:4]] == [1, 1, 1, 2]


def test_no_variant_is_always_first():
    slots = rotated_schedule((variant("a"), variant("b"), variant("c")), repetitions=3)
    firsts = {slots[i].variant_id for i in range(0, 9, 3)}
    assert firsts == {"a", "b", "c"}


def test_trial_ids_are_unique_and_path_safe():
    slots = rotated_schedule((variant("batch_size=1"), variant("precision=int8 dyn")), repetitions=2)
    ids = [s.trial_id for s in slots]
    assert len(set(ids)) == len(ids)
    assert ids[0] == "001-r1-batch_size-1"
    assert all("/" not in i and " " not in i and "=" not in i for i in ids)
    assert attempt_trial_id(slots[0], 1) == "001-r1-batch_size-1"
    assert attempt_trial_id(slots[0], 2) == "001-r1-batch_size-1-a2"
