"""The shares a task always reports against its reference variant, per variant, in the summary.

A text-generation pass is compared with its reference variant's token by token
(:func:`protocol.tasks.generation.compare_generations`): the share of inputs whose token sequences are identical
and the share that are identical or first diverge at a near tie. The rule promises both in every summary, so they
are reported for every variant over its compared passes (median and lowest), and a variant with no compared pass
says so. A task lists the shares it reports in ``reported_shares`` (key in the verdict's ``agreement_details``,
words); a task without them has no such section.

Example::

    shares = shares_by_variant(task, rows, verdicts)   # {"batch_size=1": {"identical_share": {...}, ...}}
    text = share_lines(task, shares)                   # "## Agreement with the reference variant ..."
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any


def reported_shares(task: Any) -> tuple[tuple[str, str], ...]:
    """(key in ``agreement_details``, words) of each share the task always reports."""
    return tuple(getattr(task, "reported_shares", ()))


def shares_by_variant(task: Any, rows: Sequence[Any], verdicts: Mapping[str, Mapping[str, Any]]
                      ) -> dict[str, dict[str, dict[str, Any]]]:
    """Per variant (in the order of ``rows``), each reported share's median and lowest over the passes compared
    with the reference, and how many were compared."""
    shares = reported_shares(task)
    if not shares:
        return {}
    found: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        details = (verdicts.get(row.trial_id) or {}).get("agreement_details") or {}
        values = found.setdefault(row.variant_id, {key: [] for key, _ in shares})
        for key, _ in shares:
            if isinstance(details.get(key), (int, float)):
                values[key].append(float(details[key]))
    return {variant: {key: {"median": statistics.median(v) if v else None, "min": min(v) if v else None,
                            "passes": len(v)} for key, v in values.items()}
            for variant, values in found.items()}


def share_lines(task: Any, shares: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """The summary's section: one row per variant, each share as median / lowest over the compared passes."""
    reported = reported_shares(task)
    if not reported or not shares:
        return ""
    lines = ["", "## Agreement with the reference variant (every compared pass; median / lowest)", "",
             "| variant | " + " | ".join(words for _, words in reported) + " | passes compared |",
             "|---|" + "---|" * len(reported) + "---|"]
    for variant, by_key in shares.items():
        cells = [_cell(by_key[key]) for key, _ in reported]
        count = max(entry["passes"] for entry in by_key.values())
        lines.append(f"| {variant} | " + " | ".join(cells)
                     + f" | {count if count else '0 (no pass compared with the reference)'} |")
    return "\n".join(lines) + "\n"


def _cell(entry: Mapping[str, Any]) -> str:
    if entry["median"] is None:
        return "—"
    return f"{entry['median']:.4f} / {entry['min']:.4f}"
