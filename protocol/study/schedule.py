"""Variants → a rotated schedule of trials, so no variant is always first."""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocol.records.stages import Variant


@dataclass(frozen=True)
class Slot:
    """One planned pass: the ``repetition``-th pass of a variant, at ``order_index``."""

    order_index: int
    variant_id: str
    repetition: int

    @property
    def trial_id(self) -> str:
        return f"{self.order_index:03d}-r{self.repetition}-{slug(self.variant_id)}"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def rotated_schedule(variants: tuple[Variant, ...], repetitions: int) -> tuple[Slot, ...]:
    """Round r runs the variants rotated left by r: 1-4-8, 4-8-1, 8-1-4, 1-4-8, …"""
    ids = [v.variant_id for v in variants]
    slots: list[Slot] = []
    for repetition in range(1, repetitions + 1):
        shift = (repetition - 1) % len(ids)
        for variant_id in ids[shift:] + ids[:shift]:
            slots.append(Slot(order_index=len(slots) + 1, variant_id=variant_id, repetition=repetition))
    return tuple(slots)


def attempt_trial_id(slot: Slot, attempt: int) -> str:
    return slot.trial_id if attempt == 1 else f"{slot.trial_id}-a{attempt}"
