"""Campaign files for tests, written through their records (never as dict literals), so a fixture is always a
file isocost itself would write and a strict reader reads it.

Example::

    write_status(trial_dir, trial_status("001-r1-a", completed=6, expected=6, pass_s=2.1))
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from protocol.codec import write_record
from protocol.records import CampaignRecord, MemoryPeaks, PhaseTimes, TrialStatus


def trial_status(trial_id: str, status: str = "ok", *, completed: int = 0, expected: int = 0,
                 pass_s: float | None = None, memory: MemoryPeaks | None = None, **fields: Any) -> TrialStatus:
    """A trial's status as the trial writes it (phases beyond ``pass_s`` not reached)."""
    return TrialStatus(trial_id=trial_id, status=status, completed=completed, expected=expected,
                       phases=PhaseTimes(pass_s=pass_s), memory=memory or MemoryPeaks(), truncated_count=0,
                       **fields)


def write_status(trial_dir: Path, status: TrialStatus) -> Path:
    path = trial_dir / "status.json"
    write_record(path, status)
    return path


def write_campaign_record(root: Path, record: CampaignRecord, **changes: Any) -> Path:
    """campaign.json of ``root`` from ``record`` (``changes`` replacing some of its fields)."""
    path = root / "campaign.json"
    write_record(path, dataclasses.replace(record, **changes) if changes else record)
    return path
