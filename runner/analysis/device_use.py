"""How busy the device was during each variant's accepted measured passes, for summary.json and summary.md.

raw.csv's ``device_busy_share`` is ``gpu_pass_s / pass_s`` for one trial: the share of the measured pass the
device spent in the forwards (CUDA events), the first thing a GPU user needs to see: a share well below 1
says the pass waited on the host (tokenizing, copying, Python), and a faster card would not shorten it. A
CPU trial has no device time; its reason comes from the row.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from protocol.rawrecord import RawRecord

COLUMN = "device_busy_share"


def device_use(rows: Sequence[RawRecord], verdicts: Mapping[str, Mapping[str, Any]],
               variant_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per variant (in ``variant_ids``' order): median, min and max share over its accepted passes that have
    one, how many had one, and why it is empty when none had."""
    accepted: dict[str, list[RawRecord]] = {variant: [] for variant in variant_ids}
    for row in rows:
        if (verdicts.get(row.trial_id) or {}).get("corpus_accepted") and row.variant_id in accepted:
            accepted[row.variant_id].append(row)
    return {variant: _figures(found) for variant, found in accepted.items()}


def _figures(rows: list[RawRecord]) -> dict[str, Any]:
    shares = [row.device_busy_share for row in rows if row.device_busy_share is not None]
    if not shares:
        reason = next((row.empty_reason(COLUMN) for row in rows if row.empty_reason(COLUMN)), "")
        return {"median": None, "min": None, "max": None, "passes": 0,
                "reason": reason or ("no accepted pass" if not rows else "not measured")}
    return {"median": statistics.median(shares), "min": min(shares), "max": max(shares), "passes": len(shares),
            "reason": ""}


def device_use_lines(figures: Mapping[str, Mapping[str, Any]]) -> str:
    """The summary.md section: one line per variant."""
    lines = ["", "## Device use in the measured pass (share of it the device was busy: gpu_pass_s / pass_s)", ""]
    for variant, f in figures.items():
        if f["median"] is None:
            lines.append(f"- {variant}: empty ({f['reason']})")
        else:
            lines.append(f"- {variant}: median {f['median']:.0%} over {f['passes']} accepted pass(es) "
                         f"(min {f['min']:.0%}, max {f['max']:.0%})")
    if not figures:
        lines.append("- no variant")
    return "\n".join(lines) + "\n"
