"""The decision memo (decision.md): the answer first, then the evidence, one function per section.

:func:`render_memo` takes the :class:`~protocol.decision.rank.Decision` record and writes Markdown: the answer
and why, the declared job (:mod:`runner.decision.offline.job`), what is uncertain, the configurations table, the
plans against each measured period, the periods themselves, the deadline, the counting rule, other project
expenses and the inputs. Money is written as decision.json writes it (two decimals).

Example: ``render_memo(decide([evidence], study, catalog), catalog_source="--catalog plans.csv")`` starts with
``# Decision: <study name>``.
"""

from __future__ import annotations

from protocol.costing.plans import format_usd
from protocol.costing.timeline import iso_utc
from protocol.decision.rank import CampaignResult, Configuration, Decision, Ledger
from protocol.decision.records import CostResult, PassRecord
from protocol.io.names import markdown_text
from protocol.records import codec
from runner.decision.market.memo import market_lines
from runner.decision.offline.job import job_lines
from runner.decision.offline.unanswered import nothing_fits_lines
from runner.decision.render.matrix import reference_lines
from runner.decision.render.text_format import cell, hours, seconds, usd

_QUALITY = {True: "equivalent", False: "NOT equivalent", None: "unknown"}
_DEADLINE = {True: "fits", False: "does NOT fit", None: "—"}


def render_memo(decision: Decision, catalog_source: str = "given", task_line: str = "") -> str:
    """The whole memo for ``decision``; ``catalog_source`` says where the catalog came from (Inputs section),
    ``task_line`` what the study's task yields and how it is compared (``protocol.tasks.describe_task``)."""
    lines = [f"# Decision: {decision.study_name}", "", f"Question: {markdown_text(decision.question)}", ""]
    lines += [task_line, ""] if task_line else []
    lines += nothing_fits_lines(decision.job)
    lines += answer_lines(decision)
    if decision.market is not None:
        lines += ["", *market_lines(decision.market)]
    if decision.job is not None:
        lines += ["", *job_lines(decision.job, decision.catalog_dates)]
    lines += ["", "## What is uncertain", ""]
    lines += [f"- {line}" for line in decision.uncertain] or ["- nothing flagged"]
    lines += ["", *configuration_lines(decision.configurations)]
    lines += ["", *reference_lines(decision.agreement, decision.configurations)]
    lines += ["", *plan_lines(decision)]
    lines += ["## Campaign period (measured)", ""]
    for campaign in decision.campaigns:
        lines += period_lines(campaign)
    lines += deadline_lines(decision)
    lines += ["## Counting rule for accepted artifacts", "", decision.artifact_rule, ""]
    lines += ledger_lines(decision.ledger)
    lines += input_lines(decision, catalog_source)
    return "\n".join(lines) + "\n"


def answer_lines(decision: Decision) -> list[str]:
    """``## Answer``: the chosen configuration with its plan and cost (or that none is chosen), why, the deadline."""
    lines = ["## Answer", ""]
    if decision.chosen:
        cost = decision.configuration(decision.chosen).cost
        lines += [
            f"**Chosen: {decision.chosen}**: {_plan_text(cost)}; cost per validated corpus {_per_corpus(cost)}.",
            "",
            f"Target load: {decision.target_load}.",
            "",
            "Why:",
            "",
        ]
    else:
        lines += ["**No configuration is chosen.**", "", f"Target load: {decision.target_load}.", "", "Why not:", ""]
    lines += [f"- {line}" for line in decision.why]
    if decision.deadline_note:
        lines += ["", f"**Deadline:** {decision.deadline_note}."]
    return lines


def configuration_lines(configs: tuple[Configuration, ...]) -> list[str]:
    """``## Configurations``: one table row per configuration in rank order, then the ones not ranked and why."""
    lines = [
        "## Configurations",
        "",
        "A configuration is one variant on one campaign's hardware. Pass times are seconds per full pass, in run "
        "order (✗ = no pass time, with the status; (r) = completed but rejected). Cost is the whole contracted plan "
        "price, never prorated.",
        "",
        "| rank | configuration | quality | pass times (s) | median (s) | accepted / attempts | failures "
        "| accepted artifacts | needed period (h) | contracted plan | cost (USD) | per validated corpus (USD) "
        "| deadline |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in sorted(configs, key=lambda c: (c.rank is None, c.rank or 0)):
        failures = ", ".join(f"{k} {n}" for k, n in sorted(c.statuses.items()) if k != "ok") or "0"
        if c.failures and failures == "0":
            failures = f"{c.failures} rejected"
        plan = c.cost.contracted
        plan_text = f"{plan.plan.plan_days}-day × {plan.lots}" if plan else "—"
        lines.append(
            f"| {c.rank or '—'} | {c.configuration_id} | {_QUALITY[c.equivalent]} | {_times(c.passes)} "
            f"| {seconds(c.median_pass_s)} | {c.accepted_passes} / {c.attempts} | {failures} "
            f"| {c.accepted_artifacts} of {c.expected_artifacts} | {hours(c.campaign_needed_h)} | {plan_text} "
            f"| {usd(c.cost.total_usd) or '—'} | {_per_corpus_cell(c.cost)} | {_DEADLINE[c.deadline_fits]} |"
        )
    excluded = [c for c in configs if not c.acceptable]
    if excluded:
        lines += ["", "Not ranked:", ""]
        lines += [f"- {c.configuration_id}: {'; '.join(c.exclusions)}" for c in excluded]
    return lines


def plan_lines(decision: Decision) -> list[str]:
    """``## Plans against the measured period``: per campaign, every plan length, whether it covers, its price."""
    lines = ["## Plans against the measured period", ""]
    for campaign in decision.campaigns:
        cost = campaign.cost
        lines += [f"### {campaign.hardware} ({campaign.label})", ""]
        if not cost.options:
            lines += [f"No plan priced: {cost.empty_reason}", ""]
            continue
        lines += [f"Needed period: {hours(cost.needed_h)} h. Catalog dated {decision.catalog_dates} "
                  f"({decision.catalog_path}).", "",
                  "| plan | hours | covers | price per lot (USD) | lots | total (USD) | note |",
                  "|---|---|---|---|---|---|---|"]
        for option in cost.options:
            lines.append(
                f"| {option.plan_days} days | {option.plan_hours} | {'yes' if option.covers else 'no'} "
                f"| {usd(option.price_usd_per_lot) or '—'} | {cost.lots} | {usd(option.total_usd) or '—'} "
                f"| {cell(option.reason)} |"
            )
        contracted = cost.contracted
        lines += ["", (f"Contracted: the {contracted.plan.plan_days}-day plan, {format_usd(contracted.total_usd)} USD."
                       if contracted else f"No contracted plan: {cost.empty_reason}"), ""]
    return lines


def period_lines(campaign: CampaignResult) -> list[str]:
    """One campaign's measured period: used, idle, waiting and needed hours, then each component and its source."""
    period = campaign.period
    head = f"### {campaign.hardware} ({campaign.label})" if campaign.hardware else campaign.label
    lines = [head, ""]
    if period.used_s is None:
        reasons = "; ".join(sorted(set(period.empty_reasons.values())))
        return lines + [f"Period unknown: {reasons}.", ""]
    lines += [
        f"From {iso_utc(period.start)} to {iso_utc(period.end)}: used {hours(period.used_h)} h "
        f"({period.sessions} session(s), {period.resumes} resume(s)), idle between sessions "
        f"{hours(period.idle_h)} h, declared waiting {hours(period.waiting_h)} h; needed period "
        f"**{hours(period.needed_h)} h** (used + waiting; overlaps counted once).",
        "",
        "| component | hours | seconds | counted | where it comes from |",
        "|---|---|---|---|---|",
    ]
    for c in period.components:
        shown = "—" if c.seconds is None else f"{c.seconds:.1f}"
        lines.append(f"| {c.name} | {hours(c.hours)} | {shown} | {'yes' if c.counted else 'no'} "
                     f"| {cell(c.source)} |")
    lines += [""] + [f"- {note}" for note in period.notes] + ([""] if period.notes else [])
    return lines


def deadline_lines(decision: Decision) -> list[str]:
    """``## Deadline``: the window measured on a real calendar, or why there is none."""
    lines = ["## Deadline", ""]
    window = decision.deadline
    if window is None:
        return lines + [decision.deadline_reason + ".", ""]
    written = codec.to_dict(window)
    dst = "a UTC offset change inside the window" if window.dst_change else "no DST change"
    return lines + [f"Window {written['start']} → {written['end']} ({window.tz}): {hours(window.elapsed_h)} h real "
                    f"elapsed, {dst}. A configuration fits when its campaign's needed period (used + declared "
                    "waiting) is no longer than the window.", ""]


def ledger_lines(ledger: Ledger | None) -> list[str]:
    """``## Other project expenses``: the ledger, shown apart from every configuration's cost."""
    lines = ["## Other project expenses", ""]
    if ledger is None:
        return lines + ["None given (pass a ledger with --expenses FILE). They are never part of a configuration's "
                        "cost.", ""]
    lines += [f"From {ledger.path}; shown apart, never added to a configuration's cost.", "",
              "| date | description | amount (USD) | evidence |", "|---|---|---|---|"]
    # Description and evidence shown as written: no link, tag or table break.
    lines += [f"| {e.day.isoformat()} | {markdown_text(e.description)} | {format_usd(e.amount_usd)} "
              f"| {markdown_text(e.evidence)} |" for e in ledger.expenses]
    return lines + [f"| | total | {format_usd(ledger.total_usd)} | |", ""]


def input_lines(decision: Decision, catalog_source: str) -> list[str]:
    """``## Inputs``: the study, corpus, model and catalog weighed, and each campaign with its notes."""
    lines = ["## Inputs", "",
             f"- study `{decision.study_name}`, sha256 `{decision.study_sha256}`; reference variant "
             f"`{decision.reference_variant}`",
             f"- corpus `{decision.corpus_fingerprint}` ({decision.corpus_inputs} inputs); model "
             f"`{decision.model_fingerprint}`",
             f"- catalog {decision.catalog_path} dated {decision.catalog_dates} ({catalog_source})"]
    for campaign in decision.campaigns:
        lines.append(f"- campaign `{campaign.campaign_id}` in {campaign.label}: {campaign.hardware}, "
                     f"launcher {campaign.launcher}, {campaign.attempts} attempted passes")
        lines += [f"  - note: {note}" for note in campaign.notes]
    return lines


def _plan_text(cost: CostResult) -> str:
    contracted = cost.contracted
    assert contracted is not None  # the chosen configuration always has a contracted plan
    plan = contracted.plan
    return (f"{plan.gpu} {plan.plan_days}-day plan, {contracted.lots} lot(s) × {format_usd(plan.price_usd_per_lot)} "
            f"USD = {format_usd(contracted.total_usd)} USD")


def _per_corpus(cost: CostResult) -> str:
    if cost.per_result_state == "defined" and cost.contracted is not None:
        return (f"{usd(cost.cost_per_validated_corpus_usd)} USD ({format_usd(cost.contracted.total_usd)} USD / "
                f"{cost.contracted.accepted_results})")
    if cost.per_result_state == "undefined":
        return f"undefined (no accepted corpus; the spend of {usd(cost.total_usd)} USD still stands)"
    return f"unknown ({cost.empty_reason})"


def _per_corpus_cell(cost: CostResult) -> str:
    if cost.per_result_state == "defined":
        return str(usd(cost.cost_per_validated_corpus_usd))
    if cost.per_result_state == "undefined":
        return "undefined (0 accepted)"
    return "unknown"


def _times(passes: tuple[PassRecord, ...]) -> str:
    parts = []
    for p in passes:
        if p.pass_s is None:
            parts.append(f"✗{p.status}")
        elif p.accepted:
            parts.append(f"{p.pass_s:.2f}")
        else:
            parts.append(f"{p.pass_s:.2f}(r)")
    return " ".join(parts) or "—"
