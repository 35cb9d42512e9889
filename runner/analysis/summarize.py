"""The summarize stage: raw table + verdicts → summary.json and summary.md.

:func:`derive_summary` computes both in memory from an opened :class:`~runner.campaign_dir.campaign.Campaign`
and its re-derived verdicts (what ``decide``, ``memory`` and ``verify`` use: they write nothing into the
campaign); :func:`summarize_campaign` writes them (``summarize`` and ``run`` only).

Example::

    campaign = open_campaign(Path("results/quick"))
    record, markdown = derive_summary(campaign, derive_verdicts(campaign))
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol.costing.trial_files import TrialRecord, energy_fields, energy_figures
from protocol.errors import UserError
from protocol.hardware.memory import MemoryEstimate, ModelShape, estimate
from protocol.io.jsonio import write_text_atomic
from protocol.io.names import markdown_text
from protocol.records.codec import to_dict, write_record
from protocol.records.stages import DEFAULT_ENGINE, CampaignRecord, read_status
from protocol.records.summary import (
    OFFLINE_SUMMARY_VERSION,
    SUMMARY_SCHEMA_VERSION,
    Summary,
    SummaryRecord,
    VariantSummary,
)
from protocol.study.load import Study
from protocol.tasks import describe_task, study_task
from runner.analysis.agreement_shares import share_lines, shares_by_variant
from runner.analysis.device_use import device_use, device_use_lines
from runner.analysis.engine_outputs import engine_difference_lines
from runner.analysis.serving_lines import serving_lines
from runner.analysis.serving_record import serving_record
from runner.analysis.stats import summarize
from runner.analysis.verdicts import derive_verdicts, write_verdicts
from runner.campaign_dir.campaign import Campaign, open_campaign
from runner.campaign_dir.fault_hooks import fault_hook_banner
from runner.campaign_dir.integrity import refuse_less_evidence
from runner.campaign_dir.layout import CampaignPaths, log_event
from runner.campaign_dir.raw_frame import frame_rows


def summarize_campaign(root: Path, *, record_events: bool = False, allow_inconsistent: bool = False,
                       study: Study | None = None) -> SummaryRecord:
    """``isocost summarize`` (and the end of ``run``): open the campaign, re-derive its verdicts and summary, and
    write verdicts.* and summary.* into it. ``record_events``: log the evaluation in events.jsonl (the campaign's
    own evaluation on the rented host, as `isocost run` does; a later re-reading elsewhere is not rental time).
    ``study``: the caller's parse of the study (``run`` has it), used when the frozen copy hashes to it.

    The evidence checks run at the opening; with ``allow_inconsistent`` an inconsistent directory is read anyway
    and summary.md's first line says so.
    """
    campaign = open_campaign(root, allow_inconsistent=allow_inconsistent, study=study)
    paths = campaign.paths
    refuse_less_evidence(root / "summary.json", len(campaign.rows), "summary")
    if record_events:
        log_event(paths, "evaluation_start")
    verdicts = derive_verdicts(campaign)
    write_verdicts(campaign, verdicts)
    record, markdown = derive_summary(campaign, verdicts)
    write_record(root / "summary.json", record, root)
    write_text_atomic(root / "summary.md", markdown)
    if record_events:
        log_event(paths, "evaluation_end")
    return record


def derive_summary(campaign: Campaign, verdict_list: list[dict[str, Any]], *,
                   estimates: dict[str, MemoryEstimate | None] | None = None) -> tuple[SummaryRecord, str]:
    """The summary of an opened campaign and its re-derived verdicts, in memory: summary.json's record and
    summary.md's text (nothing is written). ``estimates``: the memory estimates to show (default: computed from
    the model at the path campaign.json recorded)."""
    record_, study, banner = campaign.record, campaign.study, campaign.banner
    frame = campaign.frame()
    verdicts = {v["trial_id"]: v for v in verdict_list}
    summary = summarize(frame, verdicts, record_.variants, study.quality, study.reference_for)
    reuse = record_.seen_corpus_reuse
    if reuse:
        summary = dataclasses.replace(summary, warnings=(
            f"this final corpus had already been evaluated by campaign {reuse['campaign_id']} under another "
            f"quality rule {reuse['quality_rule']}; the reuse was acknowledged, so these verdicts are not an "
            "independent evaluation", *summary.warnings))
    estimates = _estimates(study, record_) if estimates is None else estimates
    rows = frame_rows(frame, ("trial_id", "variant_id", "pass_s"))
    hooks = fault_hook_banner(campaign.root, [str(row.trial_id) for row in rows], f"campaign {record_.campaign_id}")
    if hooks:
        summary = dataclasses.replace(summary, warnings=(hooks, *summary.warnings))
    energy = _energy(campaign.paths, rows, verdicts, record_.corpus_inputs)
    busy = device_use(frame, verdicts, [v.variant_id for v in summary.variants])
    figures = _task_figures(campaign.paths, study, rows, verdicts)
    serving = serving_record(campaign.paths, study, rows, verdicts, summary)
    shares = shares_by_variant(study_task(study), rows, verdicts)
    for variant, entry in shares.items():  # the shares the task's rule always reports, beside its figures
        figures.setdefault(variant, {"passes": [], "median": {}})["agreement"] = entry
    record = SummaryRecord(
        variants=summary.variants, warnings=summary.warnings, reference_variant=summary.reference_variant,
        campaign_id=record_.campaign_id, study_sha256=record_.study_sha256, slots_planned=record_.slots_planned,
        rows_total=len(frame), memory_estimates=estimates, energy=energy, device_busy_share=busy,
        task_figures=figures or None, inconsistent=banner or None, serving=serving,
        schema_version=SUMMARY_SCHEMA_VERSION if serving is not None else OFFLINE_SUMMARY_VERSION)
    markdown = ("".join(f"{line}\n\n" for line in (hooks, banner) if line)
                + render_markdown(summary, record_, estimates, describe_task(study)) + device_use_lines(busy)
                + _energy_lines(energy) + _task_figure_lines(figures)
                + share_lines(study_task(study), shares)
                + engine_difference_lines(campaign.paths, study, rows, verdicts, record_.variants)
                + serving_lines(serving))
    return record, markdown


def _estimates(study: Study, campaign: CampaignRecord) -> dict[str, MemoryEstimate | None]:
    # The frozen study copy sits in the results directory, so its relative paths do not point at
    # the model: use the absolute path recorded when the campaign started.
    try:
        shape = ModelShape.read(Path((campaign.model.path if campaign.model else "") or study.model.path))
    except (UserError, OSError):
        return {v.variant_id: None for v in campaign.variants}
    return {
        v.variant_id: estimate(shape, v.precision, v.quantization, v.batch_size, v.max_length, v.attention)
        for v in campaign.variants
    }


def _energy(paths: CampaignPaths, rows: Sequence[Any], verdicts: dict[str, Any], inputs: int) -> \
        dict[str, dict[str, Any]]:
    """Per variant: joules per input and per validated corpus from the accepted trials' status.json."""
    by_variant: dict[str, list[TrialRecord]] = {}
    for row in rows:
        if not (verdicts.get(row.trial_id) or {}).get("corpus_accepted"):
            continue
        # A status.json that is there but not a status (a key named twice, an unknown key) is refused, never {}.
        status = read_status(paths.trial_dir(row.trial_id))
        fields = energy_fields(to_dict(status) if status is not None else {})
        by_variant.setdefault(row.variant_id, []).append(TrialRecord(batches=None, **fields))
    return {variant: energy_figures(records, inputs, None) for variant, records in sorted(by_variant.items())}


def _task_figures(paths: CampaignPaths, study: Study, rows: Sequence[Any], verdicts: dict[str, Any]) -> \
        dict[str, dict[str, Any]]:
    """Per variant, the task's own figures of each accepted pass (a generation's tokens per second…), in run
    order, and their medians; {} for a task that has none."""
    task = study_task(study)
    found: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if (verdicts.get(row.trial_id) or {}).get("corpus_accepted"):
            figures = task.pass_figures(paths.trial_dir(row.trial_id), row.pass_s)
            if figures:
                found.setdefault(row.variant_id, []).append({"trial_id": row.trial_id, **figures})
    return {variant: {"passes": passes, "median": _medians(passes)} for variant, passes in sorted(found.items())}


def _medians(passes: list[dict[str, Any]]) -> dict[str, float | None]:
    keys = [k for k in passes[0] if k != "trial_id"]
    medians: dict[str, float | None] = {}
    for key in keys:
        values = [p[key] for p in passes if p.get(key) is not None]
        medians[key] = statistics.median(values) if values else None
    return medians


def _task_figure_lines(figures: dict[str, dict[str, Any]]) -> str:
    """``## Generation per pass``: output tokens per second, time to first token, time per output token."""
    figures = {variant: entry for variant, entry in figures.items() if entry["passes"]}
    if not figures:
        return ""
    lines = ["", "## Generation per accepted pass (medians; from batches.jsonl and pass_s)", "",
             "| variant | generated tokens | output tokens/s | time to first token per batch (s, median / max) "
             "| time per output token (s) |", "|---|---|---|---|---|"]
    for variant, entry in figures.items():
        m = {key: "—" if value is None else f"{value:.4g}" for key, value in entry["median"].items()}
        lines.append(f"| {variant} | {m.get('generated_tokens', '—')} | {m.get('output_tokens_per_s', '—')} "
                     f"| {m.get('median_ttft_s', '—')} / {m.get('max_ttft_s', '—')} "
                     f"| {m.get('time_per_output_token_s', '—')} |")
    return "\n".join(lines) + "\n"


def _energy_lines(energy: dict[str, dict[str, Any]]) -> str:
    lines = ["", "## Energy of the measured pass (evidence beside cost, never part of it)", ""]
    for variant, e in energy.items():
        parts = []
        for kind in ("gpu", "cpu"):
            if e[f"{kind}_j_per_input"] is None:
                parts.append(f"{kind.upper()} empty ({e[f'{kind}_reason']})")
            else:
                parts.append(f"{kind.upper()} {e[f'{kind}_j_per_input']:.4g} J per input, "
                             f"{e[f'{kind}_j_per_validated_corpus']:.4g} J per validated corpus")
        lines.append(f"- {variant}: " + "; ".join(parts))
    if not energy:
        lines.append("- no accepted pass: nothing to read")
    return "\n".join(lines) + "\n"


def _seconds(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "—"


def _bytes(value: int | None) -> str:
    return f"{value / 2**20:.0f} MiB" if value is not None else "—"


def _times(v: VariantSummary) -> str:
    parts = []
    for t, _label in zip(v.pass_s, v.pass_s_labels, strict=False):
        parts.append(f"{t:.2f}" if t is not None else "✗")
    return " ".join(parts) if parts else "—"


def render_markdown(
    summary: Summary, campaign: CampaignRecord, estimates: dict[str, MemoryEstimate | None] | None = None,
    task_line: str = "",
) -> str:
    estimates = estimates or {}
    lines = [
        f"# Summary: {campaign.study_name}",
        "",
        f"Question: {markdown_text(campaign.question)}",
        "",
        f"Campaign `{campaign.campaign_id}`, study sha256 `{campaign.study_sha256}`, "
        f"{campaign.corpus.inputs if campaign.corpus else None} inputs, {campaign.repetitions} passes per variant "
        f"in rotated order, launcher `{campaign.launcher['kind']}`.",
        "",
        "Pass times are seconds per full pass over the corpus (✗ = attempt without an accepted pass). "
        "Median, min and max are over accepted passes only; no percentile is computed from a handful of runs.",
        "",
        *([task_line, ""] if task_line else []),
        "| variant | pass times (s), in run order | median | min | max | accepted / attempts | failures "
        f"| {summary.variants[0].metric if summary.variants else 'metric'} | equivalent to "
        f"{summary.reference_variant} | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_table_line(v) for v in summary.variants]
    lines += ["", "## Quality by subgroup (median over accepted passes)", ""]
    for v in summary.variants:
        for group, values in v.subgroups.items():
            shown = ", ".join(f"{markdown_text(k)} {score:.3f}" for k, score in values.items())  # labels as written
            lines.append(f"- {v.variant_id}, {group}: {shown}")
    lines += ["", "## Equivalence with the reference variant", ""]
    for v in summary.variants:
        lines.append(f"- {v.variant_id}: {v.equivalence_reason}")
    lines += _engine_lines(summary)
    lines += ["", "## Feasibility (a variant must complete the whole corpus, long inputs included)", ""]
    for v in summary.variants:
        if v.accepted:
            extra = f"; {v.oom_events} out-of-memory retries absorbed by its resume rule" if v.oom_events else ""
            lines.append(f"- {v.variant_id}: feasible, completed and accepted in {v.accepted} of {v.attempts} "
                         f"attempts{extra}")
        else:
            statuses = ", ".join(f"{k} {n}" for k, n in sorted(v.statuses.items())) or "no attempt"
            lines.append(f"- {v.variant_id}: INFEASIBLE, no accepted pass ({statuses}); excluded from the cost "
                         "comparison")
    lines += ["", "## Memory (measured peaks; the estimate is shown beside them and never replaces them)", ""]
    lines += [_memory_line(v, estimates.get(v.variant_id)) for v in summary.variants]
    lines += ["", "## Warnings", ""]
    lines += [f"- {w}" for w in summary.warnings] or ["- none"]
    return "\n".join(lines) + "\n"


def _engine_lines(summary: Summary) -> list[str]:
    """``## Engines``, when a variant runs another engine than the default: per engine, whether its variants gave
    the reference's accepted result (by the task's own gate, unchanged for every engine) and why."""
    engines: dict[str, list[VariantSummary]] = {}
    for v in summary.variants:
        engines.setdefault(str(v.config.get("engine", DEFAULT_ENGINE)), []).append(v)
    if set(engines) == {DEFAULT_ENGINE}:
        return []  # a study without engines: its summary as before
    lines = ["", "## Engines (what runs the model; every engine's outputs are judged by the same gate)", ""]
    for engine, variants in engines.items():
        for v in variants:
            verdict = {True: "the same accepted result", False: "NOT the same result", None: "not decided"}
            lines.append(f"- {engine} ({v.variant_id}): {verdict[v.equivalent]} as {summary.reference_variant}; "
                         f"{v.equivalence_reason}")
    return lines


def _table_line(v: VariantSummary) -> str:
    """One variant's row of the summary table."""
    rejected = v.statuses.get("ok", 0) - v.accepted
    failures = ", ".join([f"{k} {n}" for k, n in sorted(v.statuses.items()) if k != "ok"]
                         + ([f"rejected {rejected}"] if rejected else [])) or "0"
    equivalent = {True: "yes", False: "NO", None: "unknown"}[v.equivalent]
    metric = f"{v.median_metric:.4f}" if v.median_metric is not None else "—"
    return (f"| {v.variant_id} | {_times(v)} | {_seconds(v.median_pass_s)} | {_seconds(v.min_pass_s)} | "
            f"{_seconds(v.max_pass_s)} | {v.accepted} / {v.attempts} | {failures} | {metric} | {equivalent} | "
            f"{_bytes(v.peak_rss_bytes)} |")


def _memory_line(v: VariantSummary, est: MemoryEstimate | None) -> str:
    gpu = (f"device allocated {_bytes(v.peak_allocated_bytes)}, reserved {_bytes(v.peak_reserved_bytes)} "
           "(separate counters, never summed)"
           if v.peak_allocated_bytes is not None
           else f"device counters empty: {v.empty_reasons.get('peak_allocated_bytes', 'not measured')}")
    shown = f"estimate {_bytes(est.total_bytes)} (weights + activations + scores)" if est else "no estimate"
    return f"- {v.variant_id}: host peak RSS {_bytes(v.peak_rss_bytes)}; {gpu}; {shown}"
