"""How busy the device was during each variant's accepted measured passes, for summary.json and summary.md.

raw.csv's ``device_busy_share`` is ``gpu_pass_s / pass_s`` for one trial: the share of the measured pass the
device spent in the forwards (CUDA events), the first thing a GPU user needs to see: a share well below 1
says the pass waited on the host (tokenizing, copying, Python), and a faster card would not shorten it. A
CPU trial has no device time; its reason comes from the row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

COLUMN = "device_busy_share"


def device_use(frame: pd.DataFrame, verdicts: Mapping[str, Mapping[str, Any]],
               variant_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per variant (in ``variant_ids``' order): median, min and max share over its accepted passes that have
    one, how many had one, and why it is empty when none had. ``frame``: the raw table's frame."""
    accepted = frame.loc[[bool((verdicts.get(trial_id) or {}).get("corpus_accepted"))
                          for trial_id in frame["trial_id"].tolist()], ["variant_id", COLUMN, "empty_reasons"]]
    shares = accepted.groupby("variant_id", sort=False)[COLUMN].agg(["median", "min", "max", "count"])
    reasons: dict[str, list[str]] = {}
    for variant, text in zip(accepted["variant_id"].tolist(), accepted["empty_reasons"].tolist(), strict=True):
        reasons.setdefault(variant, []).append(text)
    return {variant: _figures(shares.loc[variant] if variant in shares.index else None, reasons.get(variant, []))
            for variant in variant_ids}


def _figures(shares: pd.Series | None, reasons: list[str]) -> dict[str, Any]:
    if shares is None or not shares["count"]:
        reason = next((found for found in map(_reason, reasons) if found), "")
        return {"median": None, "min": None, "max": None, "passes": 0,
                "reason": reason or ("no accepted pass" if not reasons else "not measured")}
    return {"median": float(shares["median"]), "min": float(shares["min"]), "max": float(shares["max"]),
            "passes": int(shares["count"]), "reason": ""}


def _reason(empty_reasons: str) -> str:
    for part in empty_reasons.split("; "):
        key, _, reason = part.partition(": ")
        if key == COLUMN:
            return reason
    return ""


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
