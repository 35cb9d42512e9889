"""The decide stage: campaign directories → decision.json, decision.md and report.html.

Opens each results directory once (:func:`runner.campaign_dir.campaign.open_campaign`), reads it as evidence
(:func:`runner.decision.inputs.load_evidence`, which re-derives every verdict from the stored prediction files in
memory), weighs them with :func:`protocol.decision.rank.decide`, and renders the JSON record, the memo
(:mod:`runner.decision.offline.memo`) and the HTML report (:mod:`runner.decision.offline.report`); it writes them under
``out`` only, never into a campaign directory it reads. A server study's campaigns are decided by
:mod:`runner.decision.serving.stage` instead (capacity per configuration, replicas and money for the declared
traffic, the memo of :mod:`runner.decision.serving.memo`), under the same rule.

Example: ``run_decide([Path("results/a"), Path("results/b")], out=Path("decisions/ab"))`` writes
``decisions/ab/decision.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from protocol.decision.agreement import ConfigurationOutputs
from protocol.decision.configuration import configuration_labels
from protocol.decision.evidence import check_same_study
from protocol.decision.rank import Decision, decide
from protocol.decision.serving import ServingDecision, ServingDemand, serving_demand
from protocol.errors import UserError
from protocol.io.jsonio import dumps, write_text_atomic
from protocol.io.safe_write import check_writable_target, make_dirs
from protocol.records.codec import to_dict
from protocol.tasks import describe_task
from runner.campaign_dir.campaign import open_campaign
from runner.campaign_dir.fault_hooks import FAULT_HOOK_BANNER, fault_hook_banner
from runner.campaign_dir.integrity import INCONSISTENT_BANNER
from runner.decision.crosscheck import cross_check, reference_root
from runner.decision.inputs import choose_catalog, load_evidence, read_ledger
from runner.decision.market.pricing import MarketOptions, output_paths, price_market
from runner.decision.market.replicas import price_serving_market
from runner.decision.offline.memo import render_memo
from runner.decision.serving.stage import across_campaigns, serving_decision, serving_texts
from runner.hosts.record import expand_campaign_dirs, hosts_without_campaign

#: What a server study's decision offers instead of each option it refuses (``decide`` names it in the refusal).
SERVING_INSTEAD = {"a replay directory": "pass campaign directories only (the --out of `isocost run`)"}
DECISION_JSON = "decision.json"
DECISION_MD = "decision.md"
REPORT_HTML = "report.html"


@dataclass(frozen=True)
class DecideOutcome:
    """What ``run_decide`` decided and wrote: the decision, the three files, where the catalog came from, and
    the banners printed first: a campaign run with the test-only fault hook, a directory read with
    ``allow_inconsistent`` that failed the checks."""

    decision: Decision | None  # None for a server study: ``serving`` holds its decision
    written: tuple[Path, ...]  # empty without --out
    catalog_source: str
    banners: tuple[str, ...] = ()
    texts: dict[str, str] = field(default_factory=dict)  # file name → its text, written or not
    serving: ServingDecision | None = None


def _reference_campaign(roots: list[Path], campaign_roots: list[Path], reference: Path | None) -> Path | None:
    """``--reference`` as a campaign directory: one given, or a multi-host directory's first campaign."""
    if reference is None or reference.resolve() in {r.resolve() for r in campaign_roots}:
        return reference
    if reference.resolve() in {r.resolve() for r in roots}:
        expanded = expand_campaign_dirs([reference])
        return expanded[0] if expanded else reference
    return reference  # not among them: cross_check names it


def _serving_outcome(campaigns: Sequence[Any], evidence: Sequence[Any], demand: ServingDemand | None,
                     catalog_path: Path | None, out: Path | None, expenses_path: Path | None,
                     refused: dict[str, object], reference: Path | None = None,
                     market: MarketOptions | None = None) -> DecideOutcome:
    """A server study's decision (runner.decision.serving.stage): capacity, replicas and money, the expenses
    ledger shown apart; written under ``out`` only. ``refused``: the offline-only options given (each refused by
    name). ``reference``: the campaign whose reference variant is the decision's one reference (``--reference``):
    it is weighed first, so the decision lists it first and its memo names it (default: the first DIR).
    ``market``: every configuration's replicas priced across providers too (runner.decision.market.replicas),
    written beside an earlier decision of other dates as an offline one is."""
    for option, value in refused.items():
        if value:
            raise UserError(f"{option} is not wired for a server study's decision yet", option,
                            f"Run decide on the server campaigns without it: {SERVING_INSTEAD[option]} "
                            "(docs/decide.md#serving-traffic-replicas-and-money).")
    if demand is None:
        serving_demand(None, None, None)  # raises, naming the first missing option
    assert demand is not None
    chosen = reference_root([c.root for c in campaigns], reference)
    first = [index for index, campaign in enumerate(campaigns) if campaign.root == chosen]
    order = first + [index for index in range(len(campaigns)) if index not in first]
    campaigns, evidence = [campaigns[i] for i in order], [evidence[i] for i in order]
    check_same_study(evidence)
    catalog, catalog_source = choose_catalog(catalog_path, campaigns[0].study, campaigns[0].record)
    across = None
    if len(campaigns) > 1:  # the same result across campaigns, by id, as the offline decision judges it
        study, labels = campaigns[0].study, configuration_labels(evidence)
        matrix = cross_check([(c.root, e) for c, e in zip(campaigns, evidence, strict=True)], study, labels)
        across = across_campaigns(matrix, labels, evidence, study.quality)
    ledger = read_ledger(expenses_path) if expenses_path is not None else None
    decision = serving_decision(campaigns, evidence, demand, catalog, catalog_source, across, ledger)
    if market is not None:
        decision = price_serving_market(decision, campaigns, evidence, market, catalog)
    paths: tuple[Path, ...] = ()
    if out is not None:
        decision, paths = output_paths(decision, (out / DECISION_JSON, out / DECISION_MD, out / REPORT_HTML))
    banners = _flags(evidence, FAULT_HOOK_BANNER) + _flags(evidence, INCONSISTENT_BANNER)
    texts = dict(zip((DECISION_JSON, DECISION_MD, REPORT_HTML), serving_texts(decision, banners), strict=True))
    written = write_decision(paths, texts) if paths else ()
    return DecideOutcome(decision=None, written=written, catalog_source=catalog_source, banners=banners,
                         texts=texts, serving=decision)


def run_decide(
    roots: list[Path],
    *,
    catalog_path: Path | None = None,
    expenses_path: Path | None = None,
    out: Path | None = None,
    allow_inconsistent: bool = False,
    reference: Path | None = None,
    extra: Callable[[Any], Sequence[ConfigurationOutputs]] | None = None,
    market: MarketOptions | None = None,
    demand: ServingDemand | None = None,
) -> DecideOutcome:
    """Decide over ``roots`` (campaigns of one study); with ``out``, write the JSON, memo and report there (never
    into a campaign directory it reads: nothing is written without ``out``). ``reference``: the campaign whose
    reference variant every configuration is compared with by id (default: the first); ``extra``:
    configurations to compare as well (replays), built from the study; ``market``: price every configuration
    across providers too (runner.decision.market.pricing), written beside an earlier decision of other dates;
    ``demand``: the declared traffic, for a server study's campaigns only (runner.decision.serving.stage)."""
    if not roots:
        raise UserError("no results directory given", "isocost decide", "Pass at least one DIR.")
    campaign_roots = expand_campaign_dirs(roots)
    if out is not None:
        check_out_of_campaigns(out, [*roots, *campaign_roots], "decide")
    campaigns = [open_campaign(root, allow_inconsistent=allow_inconsistent) for root in campaign_roots]
    evidence = [load_evidence(campaign) for campaign in campaigns]
    if campaigns[0].study.traffic is not None:
        return _serving_outcome(campaigns, evidence, demand, catalog_path, out, expenses_path,
                                {"a replay directory": extra is not None and bool(extra(campaigns[0].study))},
                                _reference_campaign(roots, campaign_roots, reference), market)
    if demand is not None:
        raise UserError("--peak-qps, --hours-per-day and --days declare serving traffic, and this campaign's study "
                        "is offline", "--peak-qps", "Leave them out for an offline study (its job is the study's "
                        "[job] table, docs/job.md).")
    missing_hosts = [f"host {name}: {state or 'no campaign'}{f' ({reason})' if reason else ''}; no results to weigh"
                     for root in roots for name, state, reason in hosts_without_campaign(root)]
    if missing_hosts:
        evidence[0] = replace(evidence[0], notes=(*evidence[0].notes, *missing_hosts))
    study, record = campaigns[0].study, campaigns[0].record
    catalog, catalog_source = choose_catalog(catalog_path, study, record)
    ledger = read_ledger(expenses_path) if expenses_path is not None else None
    check_same_study(evidence)  # before any output is read across campaigns
    extras = extra(study) if extra is not None else ()
    matrix = cross_check(list(zip(campaign_roots, evidence, strict=True)), study, configuration_labels(evidence),
                         reference=_reference_campaign(roots, campaign_roots, reference),
                         extra=extras)
    decision = decide(evidence, study, catalog, ledger, agreement=matrix)
    if market is not None:
        decision = price_market(decision, campaign_roots, evidence, market, catalog)
    inconsistent = _flags(evidence, INCONSISTENT_BANNER)
    hooks = _flags(evidence, FAULT_HOOK_BANNER) + _replay_hooks(extras)
    banners = hooks + inconsistent
    decision = replace(decision, catalog_source=catalog_source, inconsistent=inconsistent or None,
                       test_hooks=hooks or None)
    paths: tuple[Path, ...] = ()
    if out is not None:
        decision, paths = output_paths(decision, (out / DECISION_JSON, out / DECISION_MD, out / REPORT_HTML))
    texts = decision_texts(decision, banners, study)
    written = write_decision(paths, texts) if paths else ()
    return DecideOutcome(decision=decision, written=written, catalog_source=catalog_source, banners=banners,
                         texts=texts)


def decision_texts(decision: Decision, banners: Sequence[str], study: Any) -> dict[str, str]:
    """decision.json, decision.md and report.html as text (what ``decide --out`` writes; ``verify`` re-derives
    them from a bundle's evidence and compares)."""
    from runner.decision.offline.report import render_report  # keeps the CLI import light

    return {
        DECISION_JSON: dumps(to_dict(decision)),
        DECISION_MD: "".join(f"{b}\n" for b in banners) + ("\n" if banners else "")
        + render_memo(decision, decision.catalog_source or "", describe_task(study)),
        REPORT_HTML: render_report(decision),
    }


def write_decision(paths: Sequence[Path], texts: dict[str, str]) -> tuple[Path, ...]:
    """Write decision.json, decision.md and report.html's ``texts`` to ``paths`` (in that order; their folder is
    created if needed); every target is checked before any is written."""
    fix = "Choose a writable --out."
    target = paths[0].parent
    make_dirs(target, fix=fix)
    for path in paths:
        check_writable_target(path, fix=fix)  # refused before any of the three is written
    for path, name in zip(paths, (DECISION_JSON, DECISION_MD, REPORT_HTML), strict=True):
        write_text_atomic(path, texts[name], target, fix)
    return tuple(paths)


def check_out_of_campaigns(out: Path, roots: Sequence[Path], command: str) -> None:
    """A reading command writes under its ``--out`` only, never into a campaign directory it reads."""
    target = out.resolve()
    for root in roots:
        folder = root.resolve()
        if target == folder or folder in target.parents:
            raise UserError(f"--out {out} is inside {root}, a directory {command} reads", "--out",
                            f"{command} never writes into the campaigns it reads: choose an --out outside them.")


def run_compare(roots: list[Path], *, reference: Path | None = None, allow_inconsistent: bool = False,
                extra: Callable[[Any], Sequence[ConfigurationOutputs]] | None = None) -> tuple[Any, tuple[str, ...]]:
    """``isocost compare``: the agreement matrix of the campaigns (and ``extra`` configurations), no pricing; returns
    the matrix (its ``flags``: campaigns run with the test-only fault hook) and the inconsistency banners."""
    if not roots:
        raise UserError("no results directory given", "isocost compare", "Pass at least one DIR.")
    campaign_roots = expand_campaign_dirs(roots)
    campaigns = [open_campaign(root, allow_inconsistent=allow_inconsistent) for root in campaign_roots]
    evidence = [load_evidence(campaign) for campaign in campaigns]
    check_same_study(evidence, "compare")
    study = campaigns[0].study
    extras = extra(study) if extra is not None else ()
    matrix = cross_check(list(zip(campaign_roots, evidence, strict=True)), study, configuration_labels(evidence),
                         reference=_reference_campaign(roots, campaign_roots, reference),
                         extra=extras, command="compare")
    hooks = _flags(evidence, FAULT_HOOK_BANNER) + _replay_hooks(extras)
    return replace(matrix, flags=hooks or None), _flags(evidence, INCONSISTENT_BANNER)


def _replay_hooks(extras: Sequence[ConfigurationOutputs]) -> tuple[str, ...]:
    """The fault-hook flag of each replay directory whose reruns ran with it (their manifests, trials/<id>/)."""
    found = (fault_hook_banner(Path(c.source), c.trial_ids) for c in extras)
    return tuple(dict.fromkeys(flag for flag in found if flag))


def _flags(evidence: Sequence[Any], prefix: str) -> tuple[str, ...]:
    """The campaigns' notes that every output shows first: the fault hook, an inconsistent directory."""
    return tuple(note for item in evidence for note in item.notes if note.startswith(prefix))
