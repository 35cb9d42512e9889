"""The summarize stage: raw table + verdicts → summary.json and summary.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.jsonio import write_json_atomic, write_text_atomic
from protocol.stats import Summary, VariantSummary, summarize
from protocol.study import load_study
from runner.campaign import CampaignPaths, load_campaign, read_raw
from runner.verdicts import validate_campaign


def summarize_campaign(root: Path) -> Summary:
    paths = CampaignPaths(root)
    description = load_campaign(root)
    study = load_study(paths.study)
    verdicts = {v["trial_id"]: v for v in validate_campaign(root)}
    rows = read_raw(paths.raw)
    summary = summarize(rows, verdicts, description["variants"], study.quality)
    data = summary.to_dict()
    data["campaign_id"] = description["campaign_id"]
    data["study_sha256"] = description["study_sha256"]
    data["slots_planned"] = len(description["variants"]) * description["repetitions"]
    write_json_atomic(root / "summary.json", data)
    write_text_atomic(root / "summary.md", render_markdown(summary, description))
    return summary


def _seconds(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "—"


def _bytes(value: int | None) -> str:
    return f"{value / 2**20:.0f} MiB" if value is not None else "—"


def _times(v: VariantSummary) -> str:
    parts = []
    for t, _label in zip(v.pass_s, v.pass_s_labels, strict=False):
        parts.append(f"{t:.2f}" if t is not None else "✗")
    return " ".join(parts) if parts else "—"


def render_markdown(summary: Summary, description: dict[str, Any]) -> str:
    lines = [
        f"# Summary: {description['study_name']}",
        "",
        f"Question: {description['question']}",
        "",
        f"Campaign `{description['campaign_id']}`, study sha256 `{description['study_sha256']}`, "
        f"{description['corpus']['inputs']} inputs, {description['repetitions']} passes per variant "
        f"in rotated order, launcher `{description['launcher']['kind']}`.",
        "",
        "Pass times are seconds per full pass over the corpus (✗ = attempt without an accepted pass). "
        "Median, min and max are over accepted passes only; no percentile is computed from a handful of runs.",
        "",
        "| variant | pass times (s), in run order | median | min | max | accepted / attempts | failures "
        f"| {summary.variants[0].metric if summary.variants else 'metric'} | equivalent to "
        f"{summary.reference_variant} | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in summary.variants:
        failures = ", ".join(f"{k} {n}" for k, n in sorted(v.statuses.items()) if k != "ok") or "0"
        equivalent = {True: "yes", False: "NO", None: "unknown"}[v.equivalent]
        metric = f"{v.median_metric:.4f}" if v.median_metric is not None else "—"
        lines.append(
            f"| {v.variant_id} | {_times(v)} | {_seconds(v.median_pass_s)} | {_seconds(v.min_pass_s)} | "
            f"{_seconds(v.max_pass_s)} | {v.accepted} / {v.attempts} | {failures} | {metric} | {equivalent} | "
            f"{_bytes(v.peak_rss_bytes)} |"
        )
    lines += ["", "## Quality by subgroup (median over accepted passes)", ""]
    for v in summary.variants:
        for group, values in v.subgroups.items():
            shown = ", ".join(f"{k} {score:.3f}" for k, score in values.items())
            lines.append(f"- {v.variant_id}, {group}: {shown}")
    lines += ["", "## Equivalence with the reference variant", ""]
    for v in summary.variants:
        lines.append(f"- {v.variant_id}: {v.equivalence_reason}")
    lines += ["", "## Memory", ""]
    for v in summary.variants:
        gpu = (f"allocated {_bytes(v.peak_allocated_bytes)}, reserved {_bytes(v.peak_reserved_bytes)}"
               if v.peak_allocated_bytes is not None
               else f"GPU counters empty: {v.empty_reasons.get('peak_allocated_bytes', 'not measured')}")
        lines.append(f"- {v.variant_id}: host peak RSS {_bytes(v.peak_rss_bytes)}; {gpu}")
    lines += ["", "## Warnings", ""]
    lines += [f"- {w}" for w in summary.warnings] or ["- none"]
    return "\n".join(lines) + "\n"
