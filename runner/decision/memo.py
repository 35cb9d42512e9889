"""The decide stage: campaign directories → decision.json, decision.md and report.html.

Reads each results directory (campaign.json, raw.csv, events.jsonl, the
trials' status and manifest files), re-runs the validate and summarize stages
there (so every verdict is re-derived from the stored prediction files, as
``isocost summarize`` does), then calls :func:`protocol.decision.rank.decide` and
writes the memo, the JSON record and the HTML report into the first
directory, or ``out``.

Example: ``run_decide([Path("results/a"), Path("results/b")])`` writes
``results/a/decision.md``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from protocol.costing.calendar import format_hours
from protocol.costing.catalog_file import load_catalog
from protocol.costing.period import CampaignPeriod, measure_period
from protocol.costing.plans import Catalog, default_catalog_path
from protocol.costing.trial_files import trial_record
from protocol.decision.evidence import CampaignEvidence, TrialCapacity
from protocol.decision.ledger import parse_ledger
from protocol.decision.plan_fit import plan_cost
from protocol.decision.rank import decide
from protocol.decision.records import Decision, Ledger
from protocol.errors import UserError
from protocol.jsonio import read_json, write_json_atomic, write_text_atomic
from protocol.study import load_study
from protocol.study_records import Study
from runner.analysis.summary import summarize_campaign
from runner.campaign_dir.integrity import INCONSISTENT_BANNER, require_evidence
from runner.campaign_dir.layout import FROZEN_CATALOG, CampaignPaths, load_campaign, read_raw
from runner.campaign_dir.rentals import RENTALS_FILE, latest_rental, read_rentals
from runner.hosts.record import expand_campaign_dirs, hosts_without_campaign

DECISION_JSON = "decision.json"
DECISION_MD = "decision.md"
REPORT_HTML = "report.html"

#: Keys a trial manifest may use for the host's RAM (MemTotal from /proc/meminfo), first found wins.
HOST_MEMORY_KEYS = ("memory_total_bytes", "mem_total_bytes", "ram_total_bytes", "memory_bytes")


@dataclass(frozen=True)
class DecideOutcome:
    decision: Decision
    written: tuple[Path, ...]
    catalog_source: str


def read_events(path: Path) -> tuple[dict[str, Any], ...]:
    """The campaign's events.jsonl, one dict a line (empty when the file is absent)."""
    if not path.exists():
        return ()
    events = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UserError(f"line {number} is not JSON: {exc.msg}", str(path),
                                "Restore events.jsonl from the results bundle.") from None
    return tuple(events)


def trial_capacity(trial_dir: Path) -> TrialCapacity:
    """Device and host memory capacities recorded by one trial (status.json, manifest.json)."""
    device: int | None = None
    device_source = ""
    host: int | None = None
    host_source = ""
    status = _json_or_empty(trial_dir / "status.json")
    manifest = _json_or_empty(trial_dir / "manifest.json")
    total = (status.get("memory") or {}).get("device_total_bytes")
    if isinstance(total, int) and total > 0:
        device, device_source = total, "status.json memory.device_total_bytes"
    else:
        total = (manifest.get("device") or {}).get("gpu_memory_bytes")
        if isinstance(total, int) and total > 0:
            device, device_source = total, "manifest.json device.gpu_memory_bytes"
    host_facts = manifest.get("host") or {}
    for key in HOST_MEMORY_KEYS:
        value = host_facts.get(key)
        if isinstance(value, int) and value > 0:
            host, host_source = value, f"manifest.json host.{key}"
            break
    return TrialCapacity(device, device_source, host, host_source)


def load_evidence(root: Path, allow_inconsistent: bool = False) -> tuple[CampaignEvidence, Study, dict[str, Any]]:
    """Read one campaign directory into the evidence ``decide`` weighs (re-deriving its verdicts).

    The evidence checks run first (in summarize); ``allow_inconsistent`` reads an inconsistent directory anyway
    and puts the banner first among the campaign's notes.
    """
    paths = CampaignPaths(root)
    description = load_campaign(root)
    banner = require_evidence(root, allow_inconsistent)
    study = load_study(paths.study)  # the frozen copy: rules as they were at the start
    try:
        summary = summarize_campaign(root, allow_inconsistent=allow_inconsistent)
    except PermissionError as exc:
        raise UserError(
            f"cannot write the re-derived verdicts ({exc.strerror})",
            str(root),
            "decide re-runs validate and summarize in each results directory: copy it somewhere writable.",
        ) from None
    verdicts = read_json(root / "verdicts.json").get("verdicts", [])
    rows = read_raw(paths.raw, allow_inconsistent=allow_inconsistent)
    rental = description.get("rental")
    notes = [banner] if banner else []
    recorded = latest_rental(root)  # `isocost rental` facts win over the rental given to `run`
    if recorded is not None:
        rental = {"gpu": recorded.gpu, "lots": recorded.lots}
        notes.append(f"rental {recorded.gpu} ×{recorded.lots} lot(s) recorded at {recorded.recorded_at} with "
                     f"`isocost rental` ({RENTALS_FILE}, latest of {len(read_rentals(root))})")
    if description.get("study_sha256") != study.sha256:
        notes.append(f"study.toml in {root} hashes to {study.sha256}, not the {description.get('study_sha256')} "
                     "recorded at the start: the frozen copy was edited")
    corpus = description.get("corpus") or {}
    launcher = description.get("launcher") or {}
    host = description.get("host") or {}
    evidence = CampaignEvidence(
        label=str(root),
        campaign_id=str(description["campaign_id"]),
        study_name=str(description.get("study_name", study.name)),
        study_sha256=str(description["study_sha256"]),
        corpus_fingerprint=str(corpus.get("fingerprint", "")),
        corpus_content_fingerprint=str(corpus.get("content_fingerprint", "")),
        corpus_inputs=int(corpus.get("inputs", 0)),
        model_fingerprint=str((description.get("model") or {}).get("fingerprint", "")),
        rental_gpu=str(rental["gpu"]) if rental else None,
        rental_lots=int(rental.get("lots", 1)) if rental else None,
        rental_empty_reason="" if rental else str(
            (description.get("empty_reasons") or {}).get("rental")
            or "campaign.json records no rental (campaign started before `isocost run --gpu` existed)"
        ),
        # A multi-host campaign names the rented host; a local one, the machine that ran the CLI.
        host=str(launcher.get("host_name") or host.get("hostname", "unknown host")),
        launcher=str(launcher.get("kind", "unknown launcher")),
        rows=tuple(rows),
        events=read_events(paths.events),
        summary=summary,
        accepted_trials=frozenset(str(v["trial_id"]) for v in verdicts if v.get("corpus_accepted")),
        capacities={row["trial_id"]: trial_capacity(paths.trial_dir(row["trial_id"])) for row in rows},
        notes=tuple(notes),
        trials={row["trial_id"]: trial_record(paths.trial_dir(row["trial_id"]),
                                              _json_or_empty(paths.trial_dir(row["trial_id"]) / "status.json"))
                for row in rows},
    )
    return evidence, study, description


def choose_catalog(catalog_path: Path | None, study: Study, description: dict[str, Any]) -> tuple[Catalog, str]:
    """``--catalog`` wins; else the study's ``[costing] catalog``; else the shipped dated snapshot."""
    if catalog_path is not None:
        return load_catalog(catalog_path), f"--catalog {catalog_path}"
    frozen = study.path.parent / FROZEN_CATALOG  # copied into the campaign directory when it started
    if frozen.exists():
        origin = (description.get("catalog") or {}).get("source", "unknown origin")
        return load_catalog(frozen), f"the catalog frozen at campaign start ({frozen}, from {origin})"
    costing = getattr(study, "costing", None)
    declared = getattr(costing, "catalog", None) if costing is not None else None
    if declared is None:
        return load_catalog(default_catalog_path()), "the dated snapshot shipped with isocost"
    declared = Path(declared)
    candidates = [declared]
    # The frozen study.toml sits in the results directory; a relative catalog path was written
    # relative to the ORIGINAL study file, so look there too.
    frozen_dir = study.path.parent
    original = description.get("study_path")
    if original:
        candidates.append(Path(os.path.normpath(Path(original).parent / os.path.relpath(declared, frozen_dir))))
    for candidate in candidates:
        if candidate.exists():
            return load_catalog(candidate), f"the study's [costing] catalog ({candidate})"
    raise UserError(
        "the catalog named by the study's [costing] table is not found",
        ", ".join(str(c) for c in candidates),
        "Pass the dated catalog with --catalog FILE.",
    )


def read_ledger(path: Path) -> Ledger:
    """Read ``--expenses FILE``."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError("expenses ledger not found", str(path), "Check the path given with --expenses.") from None
    except UnicodeDecodeError:
        raise UserError("expenses ledger is not UTF-8 text", str(path), "Save it as UTF-8 CSV.") from None
    return parse_ledger(text, str(path))


def run_decide(
    roots: list[Path],
    *,
    catalog_path: Path | None = None,
    expenses_path: Path | None = None,
    out: Path | None = None,
    allow_inconsistent: bool = False,
) -> DecideOutcome:
    """Decide over ``roots`` (campaigns of one study) and write the memo, JSON and report."""
    from runner.decision.html_report import render_report  # keeps the CLI import light

    if not roots:
        raise UserError("no results directory given", "isocost decide", "Pass at least one DIR.")
    loaded = [load_evidence(root, allow_inconsistent) for root in expand_campaign_dirs(roots)]
    missing_hosts = [f"host {name}: {state or 'no campaign'}{f' ({reason})' if reason else ''}; no results to weigh"
                     for root in roots for name, state, reason in hosts_without_campaign(root)]
    if missing_hosts:
        first, study_, description_ = loaded[0]
        loaded[0] = (replace(first, notes=(*first.notes, *missing_hosts)), study_, description_)
    evidence = [item[0] for item in loaded]
    study, description = loaded[0][1], loaded[0][2]
    catalog, catalog_source = choose_catalog(catalog_path, study, description)
    ledger = read_ledger(expenses_path) if expenses_path is not None else None
    decision = decide(evidence, study, catalog, ledger)
    target = out if out is not None else roots[0]
    target.mkdir(parents=True, exist_ok=True)
    data = decision.to_dict()
    data["catalog_source"] = catalog_source
    banners = [note for item in evidence for note in item.notes if note.startswith(INCONSISTENT_BANNER)]
    if banners:
        data["inconsistent"] = banners
    written = (target / DECISION_JSON, target / DECISION_MD, target / REPORT_HTML)
    write_json_atomic(written[0], data)
    write_text_atomic(written[1], "".join(f"{b}\n" for b in banners) + ("\n" if banners else "") + render_memo(data))
    write_text_atomic(written[2], render_report(data))
    return DecideOutcome(decision=decision, written=written, catalog_source=catalog_source)


def campaign_period(root: Path, catalog_path: Path | None = None) -> tuple[CampaignPeriod, dict[str, Any]]:
    """The measured period of one campaign and the plans that cover it (for ``isocost period``)."""
    paths = CampaignPaths(root)
    description = load_campaign(root)
    require_evidence(root)
    study = load_study(paths.study)
    rows = read_raw(paths.raw)
    deadline = getattr(study, "deadline", None)
    period = measure_period(read_events(paths.events), rows, None if deadline is None else deadline.waiting_h)
    catalog, source = choose_catalog(catalog_path, study, description)
    recorded = latest_rental(root)
    rental: dict[str, Any] | None = ({"gpu": recorded.gpu, "lots": recorded.lots} if recorded
                                     else description.get("rental"))
    reason = "" if rental else str((description.get("empty_reasons") or {}).get("rental") or "no rental recorded")
    cost = plan_cost(catalog, rental["gpu"] if rental else None, rental.get("lots") if rental else None,
                     period.needed_h, None, no_gpu_reason=reason,
                     no_period_reason="; ".join(period.empty_reasons.values()))
    return period, {"campaign_id": description["campaign_id"], "rental": rental, "cost": cost.to_dict(),
                    "catalog_source": source, "catalog_dates": catalog.dates_text}


# -- the memo -------------------------------------------------------------------------------


def render_memo(data: dict[str, Any]) -> str:
    """decision.json (as a dict) → decision.md: the answer first, then the evidence."""
    configs = data["configurations"]
    lines = [f"# Decision: {data['study_name']}", "", f"Question: {data['question']}", "", "## Answer", ""]
    if data["chosen"]:
        chosen = next(c for c in configs if c["configuration_id"] == data["chosen"])
        cost = chosen["cost"]
        lines += [
            f"**Chosen: {data['chosen']}**: {_plan_text(cost)}; cost per validated corpus "
            f"{_per_corpus(cost)}.",
            "",
            f"Target load: {data['target_load']}.",
            "",
            "Why:",
            "",
        ]
        lines += [f"- {line}" for line in data["why"]]
    else:
        lines += ["**No configuration is chosen.**", "", f"Target load: {data['target_load']}.", "", "Why not:", ""]
        lines += [f"- {line}" for line in data["why"]]
    if data["deadline_note"]:
        lines += ["", f"**Deadline:** {data['deadline_note']}."]
    if data.get("job"):
        lines += ["", *job_lines(data["job"], data["catalog_dates"])]
    lines += ["", "## What is uncertain", ""]
    lines += [f"- {line}" for line in data["uncertain"]] or ["- nothing flagged"]

    lines += [
        "",
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
    for c in sorted(configs, key=lambda c: (c["rank"] is None, c["rank"] or 0)):
        quality = {True: "equivalent", False: "NOT equivalent", None: "unknown"}[c["equivalent"]]
        failures = ", ".join(f"{k} {n}" for k, n in c["statuses"].items() if k != "ok") or "0"
        if c["failures"] and failures == "0":
            failures = f"{c['failures']} rejected"
        deadline = {True: "fits", False: "does NOT fit", None: "—"}[c["deadline_fits"]]
        plan = c["cost"]["contracted"]
        plan_text = f"{plan['plan']['plan_days']}-day × {plan['lots']}" if plan else "—"
        lines.append(
            f"| {c['rank'] or '—'} | {c['configuration_id']} | {quality} | {_times(c['passes'])} "
            f"| {_s(c['median_pass_s'])} | {c['accepted_passes']} / {c['attempts']} | {failures} "
            f"| {c['accepted_artifacts']} of {c['expected_artifacts']} | {_h(c['campaign_needed_h'])} | {plan_text} "
            f"| {c['cost']['total_usd'] or '—'} | {_per_corpus_cell(c['cost'])} | {deadline} |"
        )
    excluded = [c for c in configs if not c["acceptable"]]
    if excluded:
        lines += ["", "Not ranked:", ""]
        lines += [f"- {c['configuration_id']}: {'; '.join(c['exclusions'])}" for c in excluded]

    lines += ["", "## Plans against the measured period", ""]
    for campaign in data["campaigns"]:
        cost = campaign["cost"]
        lines.append(f"### {campaign['hardware']} ({campaign['label']})")
        lines.append("")
        if not cost["options"]:
            lines += [f"No plan priced: {cost['empty_reason']}", ""]
            continue
        lines += [f"Needed period: {_h(cost['needed_h'])} h. Catalog dated {data['catalog_dates']} "
                  f"({data['catalog_path']}).", "",
                  "| plan | hours | covers | price per lot (USD) | lots | total (USD) | note |",
                  "|---|---|---|---|---|---|---|"]
        for option in cost["options"]:
            lines.append(
                f"| {option['plan_days']} days | {option['plan_hours']} | {'yes' if option['covers'] else 'no'} "
                f"| {option['price_usd_per_lot'] or '—'} | {cost['lots']} | {option['total_usd'] or '—'} "
                f"| {_cell(option['reason'])} |"
            )
        contracted = cost["contracted"]
        lines += ["", (f"Contracted: the {contracted['plan']['plan_days']}-day plan, {contracted['total_usd']} USD."
                       if contracted else f"No contracted plan: {cost['empty_reason']}"), ""]

    lines += ["## Campaign period (measured)", ""]
    for campaign in data["campaigns"]:
        lines += _period_lines(campaign)

    lines += ["## Deadline", ""]
    if data["deadline"]:
        window = data["deadline"]
        dst = "a UTC offset change inside the window" if window["dst_change"] else "no DST change"
        lines += [f"Window {window['start']} → {window['end']} ({window['tz']}): {_h(window['elapsed_h'])} h real "
                  f"elapsed, {dst}. A configuration fits when its campaign's needed period (used + declared waiting) "
                  "is no longer than the window.", ""]
    else:
        lines += [data["deadline_reason"] + ".", ""]

    lines += ["## Counting rule for accepted artifacts", "", data["artifact_rule"], ""]

    lines += ["## Other project expenses", ""]
    ledger = data["ledger"]
    if ledger is None:
        lines += ["None given (pass a ledger with --expenses FILE). They are never part of a configuration's cost.",
                  ""]
    else:
        lines += [f"From {ledger['path']}; shown apart, never added to a configuration's cost.", "",
                  "| date | description | amount (USD) | evidence |", "|---|---|---|---|"]
        lines += [f"| {e['date']} | {_cell(e['description'])} | {e['amount_usd']} | {_cell(e['evidence'])} |"
                  for e in ledger["expenses"]]
        lines += [f"| | total | {ledger['total_usd']} | |", ""]

    lines += ["## Inputs", "",
              f"- study `{data['study_name']}`, sha256 `{data['study_sha256']}`; reference variant "
              f"`{data['reference_variant']}`",
              f"- corpus `{data['corpus_fingerprint']}` ({data['corpus_inputs']} inputs); model "
              f"`{data['model_fingerprint']}`",
              f"- catalog {data['catalog_path']} dated {data['catalog_dates']} "
              f"({data.get('catalog_source', 'given')})"]
    for campaign in data["campaigns"]:
        lines.append(f"- campaign `{campaign['campaign_id']}` in {campaign['label']}: {campaign['hardware']}, "
                     f"launcher {campaign['launcher']}, {campaign['attempts']} attempted passes")
        lines += [f"  - note: {note}" for note in campaign["notes"]]
    return "\n".join(lines) + "\n"


def job_lines(job: dict[str, Any], catalog_dates: str) -> list[str]:
    """The memo's section on the declared job: answer, table, billing options, how sure, method, energy."""
    spec = job["job"]
    size = f"{spec['inputs']:,} inputs"
    if spec["inputs_per_day"]:
        size += f" ({spec['inputs_per_day']:,} a day × {spec['days']} days)"
    mix = (", ".join(f"{b} {v:g}" for b, v in spec["mix"].items()) if spec["mix"] else spec["mix_source"])
    level = job["level"]
    lines = ["## The declared job", "",
             f"Job: {size} × {spec['corpora']} accepted corpus/corpora; length mix: {mix}. Every billing option the "
             f"catalog (dated {catalog_dates}) has for each GPU is priced; ranked by expected cost among the "
             f"configurations that fit the deadline with P >= {level:g}.", ""]
    configs = {c["configuration_id"]: c for c in job["configurations"]}
    if job["chosen"]:
        c = configs[job["chosen"]]
        p = c["projection"]
        lines += [f"**Cheapest for the job: {job['chosen']}**: projected {_h(p['job_h'])} h (interval "
                  f"{_h(p['interval_h'][0])}–{_h(p['interval_h'][1])} h), {c['chosen_option']} billing, expected "
                  f"{c['expected_usd']} USD; cost per validated corpus {c['per_corpus_usd']} USD; P(fits plan) "
                  f"{_pct(c['p_fits_plan'])}; P(fits deadline) {_pct(c['p_fits_deadline'])}.", ""]
    else:
        lines += ["**No configuration can do the declared job.**", ""]
    lines += [f"- {line}" for line in job["why"]]
    lines += ["", "| rank | configuration | projected job hours (interval) | billing picked | expected cost (USD) "
                  "| per validated corpus (USD) | P(fits plan) | P(fits deadline) | quality | Pareto "
                  "| energy per input (J, GPU / CPU) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in sorted(job["configurations"], key=lambda c: (c["rank"] is None, c["rank"] or 0)):
        p = c["projection"]
        hours = "—" if p is None else f"{_h(p['job_h'])} ({_h(p['interval_h'][0])}–{_h(p['interval_h'][1])})"
        quality = "—" if c["median_metric"] is None else f"{c['metric']} {c['median_metric']:.4f}"
        energy = c["energy"]
        lines.append(
            f"| {c['rank'] or '—'} | {c['configuration_id']} | {hours} | {c['chosen_option'] or '—'} "
            f"| {c['expected_usd'] or '—'} | {c['per_corpus_usd'] or '—'} | {_pct(c['p_fits_plan'])} "
            f"| {_pct(c['p_fits_deadline'])} | {quality} | {'yes' if c['pareto'] else ''} "
            f"| {_joules(energy.get('gpu_j_per_input'))} / {_joules(energy.get('cpu_j_per_input'))} |")
    excluded = [c for c in job["configurations"] if c["rank"] is None]
    if excluded:
        lines += ["", "Not ranked for the job:", ""]
        lines += [f"- {c['configuration_id']}: {'; '.join(c['exclusions'])}" for c in excluded]
    lines += ["", "### Billing options for the job", ""]
    for c in job["configurations"]:
        if not c["options"]:
            continue
        lines += [f"{c['configuration_id']} ({c['lots']} lot(s), {c['workers']} worker(s)):", "",
                  "| option | covers (share of resamples) | expected (USD) | interval (USD) | fits | note |",
                  "|---|---|---|---|---|---|"]
        for o in c["options"]:
            low, high = o["interval_usd"]
            picked = " **picked**" if o["label"] == c["chosen_option"] else ""
            lines.append(f"| {o['label']}{picked} | {_pct(o['p_covers'])} | {o['expected_usd'] or '—'} "
                         f"| {low or '—'}–{high or '—'} | {'yes' if o['fits'] else 'no'} | {_cell(o['reason'])} |")
        lines += ["", f"Picked: {c['chosen_option'] or 'none'}: {c['choice_reason'] or '; '.join(c['exclusions'])}",
                  ""]
    lines += ["### How sure", ""]
    if job["comparisons"]:
        for comp in job["comparisons"]:
            extra = "" if comp["extra_passes"] in (None, 0) else f" (about {comp['extra_passes']} more passes)"
            lines.append(f"- {comp['a']} vs {comp['b']}: P(cheaper) {_pct(comp['p_a_cheaper'])}, P(same cost) "
                         f"{_pct(comp['p_tie'])}, P(dearer) {_pct(comp['p_b_cheaper'])}: **{comp['verdict']}**"
                         f"{extra}; {comp['note']}")
    else:
        lines.append("- fewer than two ranked configurations: nothing to compare")
    lines += ["", "### Projection method and check", ""]
    lines += [f"- {line}" for line in job["method"]]
    for c in job["configurations"]:
        p = c["projection"]
        if p is None:
            lines.append(f"- {c['configuration_id']}: not projected: {c['refused'] or '; '.join(c['exclusions'])}")
            continue
        fit = p["fit"]
        rates = ", ".join([f"{fit['s_per_batch'] * 1000:.4g} ms per batch"] * bool(fit["s_per_batch"])
                          + [f"{b} {v * 1000:.4g} ms/token" for b, v in fit["s_per_token"].items()])
        worst = p["max_check_error"]
        lines.append(
            f"- {c['configuration_id']}: {fit['method']}; {rates}; residual {fit['residual_rms_s']:.4g} s RMS over "
            f"{fit['batches']} batches (mean batch {fit['mean_batch_s']:.4g} s); pass factor {p['pass_factor']:.3f}; "
            f"whole-pass check: worst error {_pct(worst)} over {len(p['checks'])} passes; set-up "
            f"{p['setup_s']:.1f} s per worker; bootstrap seed {p['bootstrap']['seed']!r}, "
            f"{p['bootstrap']['resamples']} resamples over {p['bootstrap']['over']}")
    lines += ["", "Assumptions:", ""]
    lines += [f"- {line}" for line in job["assumptions"]]
    lines += ["", "### Energy (evidence beside the cost, never in it)", ""]
    for c in job["configurations"]:
        e = c["energy"]
        parts = []
        for kind in ("gpu", "cpu"):
            if e.get(f"{kind}_j_per_input") is None:
                parts.append(f"{kind.upper()}: empty ({e.get(f'{kind}_reason') or 'not recorded'})")
            else:
                parts.append(f"{kind.upper()}: {_joules(e[f'{kind}_j_per_input'])} J per input, "
                             f"{e[f'{kind}_j_per_validated_corpus']:.4g} J "
                             f"({e[f'{kind}_j_per_validated_corpus'] / 3.6e6:.4g} kWh) per validated corpus "
                             f"({e['per_corpus_inputs']:,} inputs)")
        lines.append(f"- {c['configuration_id']}: " + "; ".join(parts))
    return lines


def render_csv(data: dict[str, Any]) -> str:
    """decision.json → one CSV row per configuration (for spreadsheets); job columns empty without a [job]."""
    import csv
    import io

    job = data.get("job") or {}
    by_id = {c["configuration_id"]: c for c in job.get("configurations", [])}
    columns = ["configuration_id", "variant_id", "hardware", "equivalent", "metric", "median_metric",
               "accepted_passes", "attempts", "median_pass_s", "campaign_rank", "campaign_cost_usd",
               "campaign_cost_per_validated_corpus_usd", "job_rank", "job_h", "job_h_low", "job_h_high",
               "job_billing", "job_expected_usd", "job_per_validated_corpus_usd", "p_fits_plan", "p_fits_deadline",
               "pareto", "gpu_j_per_input", "cpu_j_per_input", "not_ranked_because"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for c in data["configurations"]:
        j = by_id.get(c["configuration_id"], {})
        p = j.get("projection") or {}
        energy = j.get("energy") or {}
        reasons = list(j.get("exclusions") or []) if job else list(c["exclusions"])
        row = [c["configuration_id"], c["variant_id"], c["hardware"], c["equivalent"], c["metric"],
               c["median_metric"], c["accepted_passes"], c["attempts"], c["median_pass_s"], c["rank"],
               c["cost"]["total_usd"], c["cost"]["cost_per_validated_corpus_usd"], j.get("rank"), p.get("job_h"),
               (p.get("interval_h") or [None, None])[0], (p.get("interval_h") or [None, None])[1],
               j.get("chosen_option"), j.get("expected_usd"), j.get("per_corpus_usd"), j.get("p_fits_plan"),
               j.get("p_fits_deadline"), j.get("pareto") if job else None, energy.get("gpu_j_per_input"),
               energy.get("cpu_j_per_input"), "; ".join(reasons)]
        writer.writerow(["" if v is None else v for v in row])
    return out.getvalue()


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _joules(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def render_period(period: CampaignPeriod, extra: dict[str, Any]) -> list[str]:
    """Plain text lines for ``isocost period``: every component with its source, then the plans."""
    data = period.to_dict()
    rental = extra["rental"]
    lines = [f"campaign {extra['campaign_id']}, rented as "
             + (f"{rental['gpu']} ×{rental['lots']} lot(s)" if rental else "unknown (no rental recorded)")]
    if period.used_s is None:
        lines.append("period unknown: " + "; ".join(sorted(set(period.empty_reasons.values()))))
    else:
        lines.append(f"from {data['start']} to {data['end']}")
    width = max(len(c.name) for c in period.components)
    for c in period.components:
        if c.seconds is None:
            lines.append(f"  {c.name:<{width}}  {'—':>12}  {'—':>10}  {c.source}")
        else:
            lines.append(f"  {c.name:<{width}}  {c.seconds:>10.1f} s  {_h(c.hours):>8} h  {c.source}")
    if period.used_s is not None:
        lines.append(f"used: {_h(period.used_h)} h ({period.sessions} session(s), {period.resumes} resume(s); "
                     f"overlaps counted once); idle between sessions: {_h(period.idle_h)} h")
        lines.append(f"needed period: {_h(period.needed_h)} h (used + declared waiting)")
    lines += [f"note: {note}" for note in period.notes]
    cost = extra["cost"]
    if cost["options"]:
        lines.append(f"plans for {cost['gpu']} ×{cost['lots']} lot(s) (catalog dated {extra['catalog_dates']}, "
                     f"{extra['catalog_source']}):")
        for option in cost["options"]:
            price = f"{option['total_usd']} USD" if option["total_usd"] else "no price"
            lines.append(f"  {option['plan_days']}-day plan ({option['plan_hours']} h): "
                         f"{'covers' if option['covers'] else 'does not cover'}; {price}; {option['reason']}")
        contracted = cost["contracted"]
        lines.append(f"contracted: {contracted['plan']['plan_days']}-day plan, {contracted['total_usd']} USD "
                     "(whole plan price)" if contracted else f"contracted: none ({cost['empty_reason']})")
    else:
        lines.append(f"plans: none priced ({cost['empty_reason']})")
    return lines


def _period_lines(campaign: dict[str, Any]) -> list[str]:
    period = campaign["period"]
    head = f"### {campaign['hardware']} ({campaign['label']})" if campaign["hardware"] else campaign["label"]
    lines = [head, ""]
    if period["used_s"] is None:
        reasons = "; ".join(sorted(set(period["empty_reasons"].values())))
        return lines + [f"Period unknown: {reasons}.", ""]
    lines += [
        f"From {period['start']} to {period['end']}: used {_h(period['used_h'])} h "
        f"({period['sessions']} session(s), {period['resumes']} resume(s)), idle between sessions "
        f"{_h(period['idle_h'])} h, declared waiting {_h(period['waiting_h'])} h; needed period "
        f"**{_h(period['needed_h'])} h** (used + waiting; overlaps counted once).",
        "",
        "| component | hours | seconds | counted | where it comes from |",
        "|---|---|---|---|---|",
    ]
    for c in period["components"]:
        seconds = "—" if c["seconds"] is None else f"{c['seconds']:.1f}"
        lines.append(f"| {c['name']} | {_h(c['hours'])} | {seconds} | {'yes' if c['counted'] else 'no'} "
                     f"| {_cell(c['source'])} |")
    lines += [""] + [f"- {note}" for note in period["notes"]] + ([""] if period["notes"] else [])
    return lines


def _plan_text(cost: dict[str, Any]) -> str:
    contracted = cost["contracted"]
    plan = contracted["plan"]
    return (f"{plan['gpu']} {plan['plan_days']}-day plan, {contracted['lots']} lot(s) × {plan['price_usd_per_lot']} "
            f"USD = {contracted['total_usd']} USD")


def _per_corpus(cost: dict[str, Any]) -> str:
    if cost["per_result_state"] == "defined":
        contracted = cost["contracted"]
        return (f"{cost['cost_per_validated_corpus_usd']} USD ({contracted['total_usd']} USD / "
                f"{contracted['accepted_results']})")
    if cost["per_result_state"] == "undefined":
        return f"undefined (no accepted corpus; the spend of {cost['total_usd']} USD still stands)"
    return f"unknown ({cost['empty_reason']})"


def _per_corpus_cell(cost: dict[str, Any]) -> str:
    if cost["per_result_state"] == "defined":
        return str(cost["cost_per_validated_corpus_usd"])
    if cost["per_result_state"] == "undefined":
        return "undefined (0 accepted)"
    return "unknown"


def _times(passes: list[dict[str, Any]]) -> str:
    parts = []
    for p in passes:
        if p["pass_s"] is None:
            parts.append(f"✗{p['status']}")
        elif p["accepted"]:
            parts.append(f"{p['pass_s']:.2f}")
        else:
            parts.append(f"{p['pass_s']:.2f}(r)")
    return " ".join(parts) or "—"


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _h(value: float | None) -> str:
    """Hours with two decimals; a sliver under 0.01 h keeps four so it never reads as 0."""
    if value is None:
        return "—"
    if 0 < value < 0.0001:
        return "< 0.0001"
    if 0 < value < 0.01:
        return f"{value:.4f}"
    return format_hours(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")



def _json_or_empty(path: Path) -> dict[str, Any]:
    """A trial's JSON file, or {} when absent or unreadable (a crashed trial may leave none)."""
    if not path.exists():
        return {}
    try:
        data = read_json(path)
    except UserError:
        return {}
    return data if isinstance(data, dict) else {}
