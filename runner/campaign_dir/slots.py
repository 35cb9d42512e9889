"""A campaign's planned passes (slots) and which of them the raw table has finished.

The plan is the study's rotated schedule over the variants and repetitions frozen in
campaign.json; a trial id names its slot, with ``-aN`` for the N-th attempt (N ≥ 2).

Example::

    slots = planned_slots(load_record(root))
    slot, attempt = slot_of("0003-r1-batch_size=4-a2", {s.trial_id: s for s in slots})
    unfinished_slots(read_rows(root), slots)       # slot trial ids without a final row
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignRecord
from protocol.study.schedule import Slot, rotated_schedule
from runner.campaign_dir.raw_table import is_host_stopped


def planned_slots(campaign: CampaignRecord) -> tuple[Slot, ...]:
    """Every planned pass, in run order."""
    return rotated_schedule(campaign.variants, campaign.repetitions)


def slot_of(trial_id: str, slots_by_id: dict[str, Slot]) -> tuple[Slot | None, int]:
    """The slot a trial id belongs to and its attempt number; (None, 0) for an id no slot plans."""
    if trial_id in slots_by_id:
        return slots_by_id[trial_id], 1
    base, sep, number = trial_id.rpartition("-a")
    if sep and number.isdigit() and base in slots_by_id and int(number) >= 2:
        return slots_by_id[base], int(number)
    return None, 0


def unfinished_slots(rows: Sequence[RawRecord | Mapping[str, str]], slots: tuple[Slot, ...]) -> list[str]:
    """Planned passes without a final row (the campaign stopped before them), by slot trial id."""
    slots_by_id = {slot.trial_id: slot for slot in slots}
    finished = set()
    for row in rows:
        trial_id = row.trial_id if isinstance(row, RawRecord) else row.get("trial_id", "")
        slot, _ = slot_of(trial_id, slots_by_id)
        if slot is not None and not is_host_stopped(row):
            finished.add(slot.trial_id)
    return [slot.trial_id for slot in slots if slot.trial_id not in finished]
