"""The decide stage: campaign directories → decision.json, decision.md and report.html.

Reads each results directory (:func:`runner.decision.evidence.load_evidence`, which re-derives every verdict
from the stored prediction files), weighs them with :func:`protocol.decision.rank.decide`, and writes the JSON
record, the memo (:mod:`runner.decision.memo`) and the HTML report (:mod:`runner.decision.html_report`) into the
first directory, or ``out``.

Example: ``run_decide([Path("results/a"), Path("results/b")])`` writes ``results/a/decision.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from protocol.codec import write_record
from protocol.decision.agreement import ConfigurationOutputs
from protocol.decision.configuration import configuration_labels
from protocol.decision.evidence import check_same_study
from protocol.decision.rank import Decision, decide
from protocol.errors import UserError
from protocol.jsonio import write_text_atomic
from protocol.safe_write import check_writable_target, make_dirs
from protocol.tasks import describe_task
from runner.campaign_dir.fault_hooks import FAULT_HOOK_BANNER, fault_hook_banner
from runner.campaign_dir.integrity import INCONSISTENT_BANNER
from runner.decision.crosscheck import cross_check
from runner.decision.evidence import choose_catalog, load_evidence, read_ledger
from runner.decision.market_stage import MarketOptions, output_paths, price_market
from runner.decision.memo import render_memo
from runner.hosts.record import expand_campaign_dirs, hosts_without_campaign

DECISION_JSON = "decision.json"
DECISION_MD = "decision.md"
REPORT_HTML = "report.html"


@dataclass(frozen=True)
class DecideOutcome:
    """What ``run_decide`` decided and wrote: the decision, the three files, where the catalog came from, and
    the banners printed first: a campaign run with the test-only fault hook, a directory read with
    ``allow_inconsistent`` that failed the checks."""

    decision: Decision
    written: tuple[Path, ...]
    catalog_source: str
    banners: tuple[str, ...] = ()


def _reference_campaign(roots: list[Path], campaign_roots: list[Path], reference: Path | None) -> Path | None:
    """``--reference`` as a campaign directory: one given, or a multi-host directory's first campaign."""
    if reference is None or reference.resolve() in {r.resolve() for r in campaign_roots}:
        return reference
    if reference.resolve() in {r.resolve() for r in roots}:
        expanded = expand_campaign_dirs([reference])
        return expanded[0] if expanded else reference
    return reference  # not among them: cross_check names it


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
) -> DecideOutcome:
    """Decide over ``roots`` (campaigns of one study) and write the memo, JSON and report; ``reference``: the
    campaign whose reference variant every configuration is compared with by id (default: the first); ``extra``:
    configurations to compare as well (replays), built from the study; ``market``: price every configuration
    across providers too (runner.decision.market_stage), written beside an earlier decision of other dates."""
    from runner.decision.html_report import render_report  # keeps the CLI import light

    if not roots:
        raise UserError("no results directory given", "isocost decide", "Pass at least one DIR.")
    campaign_roots = expand_campaign_dirs(roots)
    loaded = [load_evidence(root, allow_inconsistent) for root in campaign_roots]
    missing_hosts = [f"host {name}: {state or 'no campaign'}{f' ({reason})' if reason else ''}; no results to weigh"
                     for root in roots for name, state, reason in hosts_without_campaign(root)]
    if missing_hosts:
        first, study_, record_ = loaded[0]
        loaded[0] = (replace(first, notes=(*first.notes, *missing_hosts)), study_, record_)
    evidence = [item[0] for item in loaded]
    study, record = loaded[0][1], loaded[0][2]
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
    target = out if out is not None else roots[0]
    fix = "Choose a writable --out." if out is not None else "Pass a writable --out DIR."
    make_dirs(target, fix=fix)
    for path in (target / DECISION_JSON, target / DECISION_MD, target / REPORT_HTML):
        check_writable_target(path, fix=fix)  # refused before any of the three is written
    inconsistent = _flags(evidence, INCONSISTENT_BANNER)
    hooks = _flags(evidence, FAULT_HOOK_BANNER) + _replay_hooks(extras)
    banners = hooks + inconsistent
    decision = replace(decision, catalog_source=catalog_source, inconsistent=inconsistent or None,
                       test_hooks=hooks or None)
    decision, written = output_paths(decision, (target / DECISION_JSON, target / DECISION_MD, target / REPORT_HTML))
    write_record(written[0], decision, target, fix)
    write_text_atomic(written[1], "".join(f"{b}\n" for b in banners) + ("\n" if banners else "")
                      + render_memo(decision, catalog_source, describe_task(study)), target, fix)
    write_text_atomic(written[2], render_report(decision), target, fix)
    return DecideOutcome(decision=decision, written=written, catalog_source=catalog_source, banners=banners)


def run_compare(roots: list[Path], *, reference: Path | None = None, allow_inconsistent: bool = False,
                extra: Callable[[Any], Sequence[ConfigurationOutputs]] | None = None) -> tuple[Any, tuple[str, ...]]:
    """``isocost compare``: the agreement matrix of the campaigns (and ``extra`` configurations), no pricing;
    returns the matrix (its ``flags``: campaigns run with the test-only fault hook) and the inconsistency
    banners."""
    if not roots:
        raise UserError("no results directory given", "isocost compare", "Pass at least one DIR.")
    campaign_roots = expand_campaign_dirs(roots)
    loaded = [load_evidence(root, allow_inconsistent, "compare") for root in campaign_roots]
    evidence = [item[0] for item in loaded]
    check_same_study(evidence, "compare")
    study = loaded[0][1]
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
