"""The decision → report.html: one self-contained page a person would rather look at than read.

Everything is inline: CSS in a ``<style>`` element and plots as SVG drawn
here. No script, font, image or stylesheet is fetched from anywhere, so the
page opens offline and makes no network request.

Plots:

1. every repetition's pass time per configuration (dots; the median of the
   accepted passes marked; completed-but-rejected passes hollow; failed
   attempts as a cross in their own lane, with the status);
2. memory peaks against the capacity that bounds them (host RSS against host
   RAM, GPU counters against device memory; "capacity not recorded" is
   written in the plot when it was not);
3. cost per validated corpus per configuration (an empty dashed bar with the
   reason when it is undefined or unknown);
4. with a declared ``[job]``: the Pareto view, projected job hours against the
   job's cost per validated corpus, quality written beside each point, the
   non-dominated configurations filled and joined (cost, hours and quality
   together: none of the others is better on all three).

The charts are drawn by :mod:`runner.decision.offline.charts`; this module writes the page around them: the answer,
the tables, the period, the ledger and the inputs.

Example: ``render_report(decide([evidence], study, catalog))`` returns the HTML text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from protocol.costing.job_cost import JobDecision
from protocol.costing.plans import format_usd
from protocol.decision.rank import CampaignResult, Configuration, Decision, Ledger
from protocol.decision.records import CostResult
from runner.decision.market.report import market_html
from runner.decision.offline.charts import cost_svg, memory_svg, pareto_svg, pass_time_svg
from runner.decision.render.matrix import heat_map
from runner.decision.render.text_format import usd

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222;
       margin: 24px auto; max-width: 1020px; padding: 0 16px; line-height: 1.45; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table.heat td { text-align: center; min-width: 4em; }
.answer { border-left: 6px solid #009E73; background: #f1faf6; padding: 10px 16px; }
.answer.none { border-color: #D55E00; background: #fdf3ee; }
.muted { color: #666; font-size: 0.92em; }
table { border-collapse: collapse; font-size: 0.86em; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 12px 0 24px 0; }
figcaption { font-size: 0.9em; color: #444; margin-top: 4px; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
code { font-size: 0.9em; }
"""


def render_report(decision: Decision) -> str:
    """The whole report page for one decision."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>isocost decision: {escape(decision.study_name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Decision: {escape(decision.study_name)}</h1>",
        f"<p class=\"muted\">{escape(decision.question)}</p>",
        *(f"<p class=\"warn\"><strong>{escape(flag)}</strong></p>"
          for flag in (*(decision.test_hooks or ()), *(decision.inconsistent or ()))),
        _answer_html(decision),
    ]
    if decision.deadline_note:
        parts.append(f"<p><strong>Deadline:</strong> {escape(decision.deadline_note)}.</p>")
    if decision.job is not None:
        parts += _job_html(decision.job)
    if decision.market is not None:
        parts += market_html(decision.market)
    parts += _figures(decision.configurations, decision.chosen)
    parts += [
        "<h2>What is uncertain</h2>",
        _ul(decision.uncertain or ["nothing flagged"]),
        "<h2>Configurations</h2>",
        _config_table(decision.configurations),
        heat_map(decision.agreement),
        "<h2>Campaign period (measured)</h2>",
        _period_tables(decision.campaigns),
        "<h2>Counting rule for accepted artifacts</h2>",
        f"<p>{escape(decision.artifact_rule)}</p>",
        "<h2>Other project expenses</h2>",
        _ledger_html(decision.ledger),
        "<h2>Inputs</h2>",
        _ul([
            f"study {decision.study_name}, sha256 {decision.study_sha256}; reference variant "
            f"{decision.reference_variant}",
            f"corpus {decision.corpus_fingerprint} ({decision.corpus_inputs} inputs); model "
            f"{decision.model_fingerprint}",
            f"catalog {decision.catalog_path} dated {decision.catalog_dates}",
            *(f"campaign {c.campaign_id} in {c.label}: {c.hardware}, launcher {c.launcher}"
              for c in decision.campaigns),
        ]),
        "<p class=\"muted\">Generated by isocost decide. Self-contained: no script, no external resource.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _answer_html(decision: Decision) -> str:
    if not decision.chosen:
        return ("<div class=\"answer none\"><p><strong>No configuration is chosen.</strong></p>"
                + _ul(decision.why) + "</div>")
    cost = decision.configuration(decision.chosen).cost
    return (f"<div class=\"answer\"><p><strong>Chosen: {escape(decision.chosen)}</strong>. Contracted plan "
            f"{escape(_plan_short(cost))}; cost per validated corpus {escape(_per_corpus_text(cost))}.</p>"
            f"<p>Target load: {escape(decision.target_load)}.</p>"
            + _ul(decision.why) + "</div>")


def _figures(configs: Sequence[Configuration], chosen: str | None) -> list[str]:
    return [
        "<h2>Pass time of every repetition</h2>",
        f"<figure>{pass_time_svg(configs)}<figcaption>One dot per attempted pass over the whole corpus "
        "(seconds). The black bar is the median of the accepted passes; failed attempts have no pass time and sit "
        "in the right-hand lane with their status. Five passes describe a small series: look at the spread, "
        "not only the median.</figcaption></figure>",
        "<h2>Memory peaks against capacity</h2>",
        f"<figure>{memory_svg(configs)}<figcaption>Bars: the highest peak over all passes; dots: each pass. "
        "Allocated and reserved GPU memory are separate counters, never summed. The dashed line is the capacity "
        "recorded by the trials; when none was recorded the plot says so.</figcaption></figure>",
        "<h2>Cost per validated corpus</h2>",
        f"<figure>{cost_svg(configs, chosen)}<figcaption>Whole contracted plan price ÷ accepted artifacts "
        "(each distinct corpus counted once). An empty dashed bar means undefined (no accepted corpus: the spend "
        "still stands) or unknown (no rental or no price: nothing is guessed).</figcaption></figure>",
    ]


def _job_html(job: JobDecision) -> list[str]:
    spec = job.job
    chosen = next((c for c in job.configurations if c.configuration_id == job.chosen), None)
    if chosen is not None and chosen.projection is not None:
        p = chosen.projection
        answer = (f"<div class=\"answer\"><p><strong>Cheapest for the job ({spec.inputs:,} inputs × "
                  f"{spec.corpora} corpus/corpora): {escape(chosen.configuration_id)}</strong>: projected "
                  f"{p.job_h:.1f} h (interval {p.low_h:.1f}–{p.high_h:.1f} h), {escape(str(chosen.chosen_option))} "
                  f"billing, expected {usd(chosen.expected_usd)} USD; per validated corpus "
                  f"{usd(chosen.per_corpus_usd)} USD.</p>" + _ul(job.why) + "</div>")
    elif job.nothing_fits is not None:  # the memo's words, and what would cover it
        short = job.nothing_fits
        answer = (f"<div class=\"answer none\"><p><strong>Nothing fits: no plan covers the declared job on any "
                  f"configuration.</strong> {escape(short.configuration_id)} needs up to {short.needs_h:.1f} h; "
                  f"{escape(short.plan)} ({short.plan_hours:g} h) is short by {short.short_h:.1f} h. What would "
                  "cover it:</p>" + _ul(short.remedies) + "</div>")
    else:
        answer = "<div class=\"answer none\"><p><strong>No configuration can do the declared job.</strong></p>" \
                 + _ul(job.why) + "</div>"
    rows = []
    for c in sorted(job.configurations, key=lambda c: (c.rank is None, c.rank or 0)):
        q = c.projection
        hours = "—" if q is None else f"{q.job_h:.1f} ({q.low_h:.1f}–{q.high_h:.1f})"
        fits = "—" if c.p_fits_deadline is None else f"{c.p_fits_deadline:.1%}"
        rows.append(f"<tr><td>{c.rank or '—'}</td><td>{escape(c.configuration_id)}</td><td class=\"num\">"
                    f"{hours}</td><td>{escape(c.chosen_option or '—')}</td><td class=\"num\">"
                    f"{usd(c.per_corpus_usd) or '—'}</td><td class=\"num\">{fits}</td><td>"
                    f"{'non-dominated' if c.pareto else ''}</td><td>{escape('; '.join(c.exclusions))}</td></tr>")
    comparisons = [f"{c.a} vs {c.b}: P(cheaper) {c.p_a_cheaper:.1%}, P(same) {c.p_tie:.1%}: "
                   f"{c.verdict}; {c.note}" for c in job.comparisons]
    return [
        "<h2>The declared job</h2>", answer,
        f"<figure>{pareto_svg(job.configurations)}<figcaption>Each configuration the job could be projected for: "
        "projected job hours (bootstrap interval as a bar) against the job's expected cost per validated corpus under "
        "its cheapest fitting billing option; quality beside the point. Filled and joined: the non-dominated ones "
        "(no other configuration is cheaper, faster and at least as good at once).</figcaption></figure>",
        "<table><tr><th>rank</th><th>configuration</th><th>job hours (interval)</th><th>billing</th>"
        "<th>per validated corpus (USD)</th><th>P(fits deadline)</th><th>Pareto</th><th>not ranked because</th></tr>"
        + "".join(rows) + "</table>",
        "<h3>How sure</h3>", _ul(comparisons or ["fewer than two ranked configurations: nothing to compare"]),
    ]


# -- HTML helpers ---------------------------------------------------------------------------


def _ul(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"


def _plan_short(cost: CostResult) -> str:
    contracted = cost.contracted
    assert contracted is not None  # the chosen configuration always has a contracted plan
    plan = contracted.plan
    return (f"{plan.gpu} {plan.plan_days}-day, {contracted.lots} lot(s) × {format_usd(plan.price_usd_per_lot)} USD "
            f"= {format_usd(contracted.total_usd)} USD")


def _per_corpus_text(cost: CostResult) -> str:
    if cost.per_result_state == "defined":
        return f"{usd(cost.cost_per_validated_corpus_usd)} USD"
    if cost.per_result_state == "undefined":
        return "undefined (no accepted corpus)"
    return "unknown"


def _config_table(configs: Sequence[Configuration]) -> str:
    head = ("<table><tr><th>rank</th><th>configuration</th><th>quality</th><th>pass times (s)</th>"
            "<th>median (s)</th><th>accepted / attempts</th><th>accepted artifacts</th><th>needed period (h)</th>"
            "<th>cost (USD)</th><th>per validated corpus (USD)</th><th>deadline</th><th>not ranked because</th></tr>")
    rows = []
    for c in sorted(configs, key=lambda c: (c.rank is None, c.rank or 0)):
        quality = {True: "equivalent", False: "NOT equivalent", None: "unknown"}[c.equivalent]
        times = " ".join(
            (f"{p.pass_s:.2f}" if p.accepted else f"{p.pass_s:.2f}(r)") if p.pass_s is not None
            else f"✗{p.status}" for p in c.passes)
        deadline = {True: "fits", False: "does NOT fit", None: "—"}[c.deadline_fits]
        per = usd(c.cost.cost_per_validated_corpus_usd) or (
            "undefined" if c.cost.per_result_state == "undefined" else "unknown")
        needed = "—" if c.campaign_needed_h is None else f"{c.campaign_needed_h:.2f}"
        median = "—" if c.median_pass_s is None else f"{c.median_pass_s:.2f}"
        rows.append(
            f"<tr><td>{c.rank or '—'}</td><td>{escape(c.configuration_id)}</td>"
            f"<td title=\"{escape(c.quality_reason)}\">{quality}</td><td>{escape(times)}</td>"
            f"<td class=\"num\">{median}</td><td class=\"num\">{c.accepted_passes} / {c.attempts}</td>"
            f"<td class=\"num\">{c.accepted_artifacts} of {c.expected_artifacts}</td>"
            f"<td class=\"num\">{needed}</td><td class=\"num\">{usd(c.cost.total_usd) or '—'}</td>"
            f"<td class=\"num\">{escape(per)}</td><td>{deadline}</td>"
            f"<td>{escape('; '.join(c.exclusions))}</td></tr>"
        )
    return head + "".join(rows) + "</table>"


def _period_tables(campaigns: Sequence[CampaignResult]) -> str:
    out = []
    for campaign in campaigns:
        period = campaign.period
        out.append(f"<h3>{escape(campaign.hardware)} "
                   f"<span class=\"muted\">({escape(campaign.label)})</span></h3>")
        if period.used_s is None:
            out.append(f"<p>Period unknown: {escape('; '.join(sorted(set(period.empty_reasons.values()))))}.</p>")
            continue
        out.append(f"<p>Needed period <strong>{period.needed_h:.2f} h</strong> = used {period.used_h:.2f} h "
                   f"(overlaps counted once) + declared waiting {period.waiting_h:.2f} h. Idle between sessions: "
                   f"{period.idle_h:.2f} h.</p>")
        out.append("<table><tr><th>component</th><th>hours</th><th>counted</th><th>where it comes from</th></tr>")
        for c in period.components:
            hours = "—" if c.hours is None else f"{c.hours:.4f}"
            out.append(f"<tr><td>{escape(c.name)}</td><td class=\"num\">{hours}</td>"
                       f"<td>{'yes' if c.counted else 'no'}</td><td>{escape(c.source)}</td></tr>")
        out.append("</table>")
        if period.notes:
            out.append(_ul(period.notes))
    return "".join(out)


def _ledger_html(ledger: Ledger | None) -> str:
    if ledger is None:
        return "<p>None given (<code>--expenses FILE</code>). Never part of a configuration's cost.</p>"
    rows = "".join(
        f"<tr><td>{escape(e.day.isoformat())}</td><td>{escape(e.description)}</td>"
        f"<td class=\"num\">{format_usd(e.amount_usd)}</td><td>{escape(e.evidence)}</td></tr>" for e in ledger.expenses)
    return (f"<p>From {escape(ledger.path)}; shown apart, never added to a configuration's cost.</p>"
            "<table><tr><th>date</th><th>description</th><th>amount (USD)</th><th>evidence</th></tr>"
            f"{rows}<tr><td></td><td><strong>total</strong></td><td class=\"num\">{format_usd(ledger.total_usd)}</td>"
            "<td></td></tr></table>")
