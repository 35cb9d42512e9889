"""The memo's section on the declared ``[job]``: the answer, the ranking, billing options, how sure, method, energy.

:func:`job_lines` takes the :class:`~protocol.costing.job_cost.JobDecision` record and returns Markdown lines, one
function per sub-section. Hours come from the projection (:mod:`protocol.costing.projection`), money from the
billing options priced for the job (:mod:`protocol.costing.job_cost`).

Example: ``job_lines(decision.job, decision.catalog_dates)[0] == "## The declared job"``.
"""

from __future__ import annotations

from typing import Any

from protocol.costing.job_cost import JobConfiguration, JobDecision
from protocol.costing.projection import Projection
from runner.decision.render.text_format import cell, hours, joules, pct, usd


def job_lines(job: JobDecision, catalog_dates: str) -> list[str]:
    """The whole ``## The declared job`` section."""
    lines = answer_lines(job, catalog_dates)
    lines += ranking_lines(job.configurations)
    lines += ["", "### Billing options for the job", ""]
    for c in job.configurations:
        lines += billing_lines(c)
    lines += comparison_lines(job)
    lines += method_lines(job)
    lines += energy_lines(job.configurations)
    return lines


def answer_lines(job: JobDecision, catalog_dates: str) -> list[str]:
    """The job's size and length mix, how it is ranked, the cheapest configuration for it and why."""
    spec = job.job
    size = f"{spec.inputs:,} inputs"
    if spec.inputs_per_day:
        size += f" ({spec.inputs_per_day:,} a day × {spec.days} days)"
    mix = ", ".join(f"{b} {v:g}" for b, v in spec.mix) if spec.mix else spec.mix_source
    lines = ["## The declared job", "",
             f"Job: {size} × {spec.corpora} accepted corpus/corpora; length mix: {mix}. Every billing option the "
             f"catalog (dated {catalog_dates}) has for each GPU is priced; ranked by expected cost among the "
             f"configurations that fit the deadline with P >= {job.level:g}.", ""]
    chosen = next((c for c in job.configurations if c.configuration_id == job.chosen), None)
    if chosen is not None and chosen.projection is not None:
        p = chosen.projection
        lines += [f"**Cheapest for the job: {job.chosen}**: projected {hours(p.job_h)} h (interval "
                  f"{hours(p.low_h)}–{hours(p.high_h)} h), {chosen.chosen_option} billing, expected "
                  f"{usd(chosen.expected_usd)} USD; cost per validated corpus {usd(chosen.per_corpus_usd)} USD"
                  f"{per_million(chosen.per_million_tokens_usd, '; ')}; "
                  f"P(fits plan) {pct(chosen.p_fits_plan)}; P(fits deadline) {pct(chosen.p_fits_deadline)}.", ""]
    else:
        lines += ["**No configuration can do the declared job.**", ""]
    return lines + [f"- {line}" for line in job.why]


def ranking_lines(configs: tuple[JobConfiguration, ...]) -> list[str]:
    """One table row per configuration in job rank order, then the ones not ranked for the job and why."""
    lines = ["", "| rank | configuration | projected job hours (interval) | billing picked | expected cost (USD) "
                 "| per validated corpus (USD) | P(fits plan) | P(fits deadline) | quality | Pareto "
                 "| energy per input (J, GPU / CPU) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in sorted(configs, key=lambda c: (c.rank is None, c.rank or 0)):
        p = c.projection
        shown = "—" if p is None else f"{hours(p.job_h)} ({hours(p.low_h)}–{hours(p.high_h)})"
        quality = "—" if c.median_metric is None else f"{c.metric} {c.median_metric:.4f}"
        lines.append(
            f"| {c.rank or '—'} | {c.configuration_id} | {shown} | {c.chosen_option or '—'} "
            f"| {usd(c.expected_usd) or '—'} | {usd(c.per_corpus_usd) or '—'} | {pct(c.p_fits_plan)} "
            f"| {pct(c.p_fits_deadline)} | {quality} | {'yes' if c.pareto else ''} "
            f"| {joules(c.energy.get('gpu_j_per_input'))} / {joules(c.energy.get('cpu_j_per_input'))} |")
    excluded = [c for c in configs if c.rank is None]
    if excluded:
        lines += ["", "Not ranked for the job:", ""]
        lines += [f"- {c.configuration_id}: {'; '.join(c.exclusions)}" for c in excluded]
    return lines


def per_million(amount: Any, before: str = "") -> str:
    """``cost per million generated tokens X USD`` for a text-generation job ('' for any other task)."""
    return "" if amount is None else f"{before}cost per million generated tokens {usd(amount)} USD"


def billing_lines(c: JobConfiguration) -> list[str]:
    """Every billing option priced for one configuration, the one picked and why (nothing without options); a
    text-generation job also shows each option's cost per million generated tokens."""
    if not c.options:
        return []
    tokens = any(o.per_million_tokens_usd is not None for o in c.options)
    lines = [f"{c.configuration_id} ({c.lots} lot(s), {c.workers} worker(s)):", "",
             "| option | covers (share of resamples) | expected (USD) | interval (USD) | fits | note |"
             + (" per million generated tokens (USD) |" if tokens else ""),
             "|---|---|---|---|---|---|" + ("---|" if tokens else "")]
    for o in c.options:
        picked = " **picked**" if o.label == c.chosen_option else ""
        lines.append(f"| {o.label}{picked} | {pct(o.p_covers)} | {usd(o.expected_usd) or '—'} "
                     f"| {usd(o.low_usd) or '—'}–{usd(o.high_usd) or '—'} | {'yes' if o.fits else 'no'} "
                     f"| {cell(o.reason)} |" + (f" {usd(o.per_million_tokens_usd) or '—'} |" if tokens else ""))
    return lines + ["", f"Picked: {c.chosen_option or 'none'}: {c.choice_reason or '; '.join(c.exclusions)}", ""]


def comparison_lines(job: JobDecision) -> list[str]:
    """``### How sure``: the top configurations compared pairwise over the bootstrap."""
    lines = ["### How sure", ""]
    if not job.comparisons:
        return lines + ["- fewer than two ranked configurations: nothing to compare"]
    for comp in job.comparisons:
        extra = "" if comp.extra_passes in (None, 0) else f" (about {comp.extra_passes} more passes)"
        lines.append(f"- {comp.a} vs {comp.b}: P(cheaper) {pct(comp.p_a_cheaper)}, P(same cost) "
                     f"{pct(comp.p_tie)}, P(dearer) {pct(comp.p_b_cheaper)}: **{comp.verdict}**"
                     f"{extra}; {comp.note}")
    return lines


def method_lines(job: JobDecision) -> list[str]:
    """``### Projection method and check``: the method, each configuration's fit and check, the assumptions."""
    lines = ["", "### Projection method and check", ""]
    lines += [f"- {line}" for line in job.method]
    for c in job.configurations:
        if c.projection is None:
            lines.append(f"- {c.configuration_id}: not projected: {c.refused or '; '.join(c.exclusions)}")
        else:
            lines.append(f"- {c.configuration_id}: {_fit_text(c.projection)}")
    lines += ["", "Assumptions:", ""]
    return lines + [f"- {line}" for line in job.assumptions]


def energy_lines(configs: tuple[JobConfiguration, ...]) -> list[str]:
    """``### Energy``: GPU and CPU joules per input and per validated corpus, or why they are empty."""
    lines = ["", "### Energy (evidence beside the cost, never in it)", ""]
    for c in configs:
        e = c.energy
        parts = []
        for kind in ("gpu", "cpu"):
            if e.get(f"{kind}_j_per_input") is None:
                parts.append(f"{kind.upper()}: empty ({e.get(f'{kind}_reason') or 'not recorded'})")
            else:
                parts.append(f"{kind.upper()}: {joules(e[f'{kind}_j_per_input'])} J per input, "
                             f"{e[f'{kind}_j_per_validated_corpus']:.4g} J "
                             f"({e[f'{kind}_j_per_validated_corpus'] / 3.6e6:.4g} kWh) per validated corpus "
                             f"({e['per_corpus_inputs']:,} inputs)")
        lines.append(f"- {c.configuration_id}: " + "; ".join(parts))
    return lines


def _fit_text(p: Projection) -> str:
    fit = p.fit
    rates = ", ".join([f"{fit.s_per_batch * 1000:.4g} ms per batch"] * bool(fit.s_per_batch)
                      + [f"{b} {v * 1000:.4g} ms/token" for b, v in zip(fit.buckets, fit.s_per_token, strict=True)])
    worst = max((abs(check.relative_error) for check in p.checks), default=None)
    return (f"{fit.method}; {rates}; residual {fit.residual_rms_s:.4g} s RMS over "
            f"{fit.batches} batches (mean batch {fit.mean_batch_s:.4g} s); pass factor {p.pass_factor:.3f}; "
            f"whole-pass check: worst error {pct(worst)} over {len(p.checks)} passes; set-up "
            f"{p.setup_s:.1f} s per worker; bootstrap seed {p.seed!r}, "
            f"{p.resamples} resamples over {p.passes} accepted passes")
