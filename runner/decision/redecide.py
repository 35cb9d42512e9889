"""A bundled decision re-derived from the bundle's sealed evidence: does decision.json/.md/report.html follow?

``decide`` writes decision.json, decision.md and report.html; a campaign directory may hold them when it is
bundled. None of them is sealed by the raw chain, so :func:`decision_findings` decides again over the bundled
campaign alone (:func:`runner.decision.stage.run_decide`'s steps, nothing written), with the catalog the decision
names (the frozen one, or the bundled ``catalog/`` copy) and, for a server study, the traffic it declared
(``demand``: :func:`runner.decision.serving.stage.serving_decision`), writes the directory paths the recorded
decision used back into the re-derived text, and names each decision file whose bytes differ. A decision that
weighs other campaigns, an expenses ledger, replays or market catalogs (``decide --market``) cannot be re-derived
from one bundle: that is named too.

Example::

    decision_findings(open_campaign(Path("work/campaign")), Path("work"), "campaign/")   # [] or [Discrepancy(…)]
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from protocol.costing.plans import Catalog
from protocol.decision.configuration import configuration_labels
from protocol.decision.evidence import CampaignEvidence
from protocol.decision.rank import decide
from protocol.decision.serving import serving_demand
from protocol.io.jsonio import read_json
from runner.analysis.rederive import differs
from runner.campaign_dir.campaign import Campaign
from runner.campaign_dir.fault_hooks import FAULT_HOOK_BANNER
from runner.campaign_dir.findings import MALFORMED, Discrepancy
from runner.campaign_dir.layout import FROZEN_CATALOG
from runner.decision.crosscheck import cross_check
from runner.decision.inputs import choose_catalog, load_evidence
from runner.decision.serving.stage import serving_decision, serving_texts
from runner.decision.stage import DECISION_JSON, DECISION_MD, REPORT_HTML, decision_texts

DECISION_FILES = (DECISION_JSON, DECISION_MD, REPORT_HTML)


def decision_findings(campaign: Campaign, bundle_root: Path, prefix: str = "") -> list[Discrepancy]:
    """The decision files of the opened ``campaign`` (extracted from a bundle at ``bundle_root``) that do not
    follow from its sealed evidence; [] when there are none, or they all follow."""
    root = campaign.root
    present = [name for name in DECISION_FILES if (root / name).is_file()]
    if not present:
        return []
    if DECISION_JSON not in present:
        return [Discrepancy(prefix + present[0], "presence", "a decision file without the decision.json it renders: "
                            "it cannot be re-derived")]
    try:
        recorded = read_json(root / DECISION_JSON)
        why, label, catalog = _re_derivable(recorded, campaign, bundle_root)
        if why:
            return [Discrepancy(prefix + DECISION_JSON, "re-derivation", why)]
        texts = _rederived(campaign, recorded, label, catalog)
    except MALFORMED as exc:
        return [Discrepancy(prefix + DECISION_JSON, "re-derivation",
                            f"cannot be re-derived from the sealed evidence ({type(exc).__name__}: {str(exc)[:200]})")]
    return [problem for name in present if (problem := differs(root, name, texts[name], prefix)) is not None]


def _re_derivable(recorded: Any, campaign: Campaign, bundle_root: Path) -> tuple[str, str, Path | None]:
    """Why the recorded decision cannot be re-derived from this bundle ("" when it can), the campaign label it
    used, and the catalog to price with (None: the frozen one)."""
    if not isinstance(recorded, dict):
        return "not a decision record", "", None
    if campaign.study.traffic is not None and "campaigns" not in recorded:
        return ("a server study's decision.json that names no campaigns (schema_version 1, before isocost verify "
                "re-derived it): decide again (decision.json schema_version 2) and bundle that", "", None)
    if campaign.study.traffic is not None and recorded.get("schema_version") == 2:
        return ("a server study's decision.json of schema_version 2 (before decide --market): decide again "
                "(decision.json schema_version 3) and bundle that", "", None)
    if recorded.get("market"):
        return ("it was priced across providers (decide --market) with market catalogs and a GPU map the bundle "
                "does not hold: verify re-derives a decision priced on one plan catalog; bundle the campaign with "
                "the decision made without --market, and keep the priced one beside it", "", None)
    campaigns = recorded.get("campaigns") or []
    ids = sorted({str(c.get("campaign_id")) for c in campaigns if isinstance(c, dict)})
    record_id = campaign.record.campaign_id  # the campaign as opened once, never campaign.json read again
    if ids != [record_id]:
        return (f"it weighs campaigns {ids}, this bundle holds {record_id} only: a decision is re-derived from "
                "the evidence of the campaigns it weighs", "", None)
    if recorded.get("ledger"):
        return "it weighs an expenses ledger the bundle does not hold", "", None
    label = str(campaigns[0].get("label", ""))
    source = str(recorded.get("catalog_source", ""))
    if source.startswith("the catalog frozen at campaign start"):
        return "", label, None
    bundled = bundle_root / "catalog" / Path(str(recorded.get("catalog_path", ""))).name
    if not bundled.is_file():
        return f"it was priced with {source!r}, which the bundle does not hold", label, None
    return "", label, bundled


def _rederived(campaign: Campaign, recorded: dict[str, Any], label: str, catalog_path: Path | None) -> \
        dict[str, str]:
    """decision.json, decision.md and report.html decided again over ``campaign``, with the paths the recorded
    decision used."""
    root = campaign.root
    evidence = load_evidence(campaign)
    study = campaign.study
    catalog, source = choose_catalog(catalog_path, study, campaign.record)
    hooks = tuple(note for note in evidence.notes if note.startswith(FAULT_HOOK_BANNER))  # first, as decide does
    if study.traffic is not None:  # a server study: its traffic as the recorded decision declared it
        texts = _serving_again(campaign, evidence, recorded, catalog, source, hooks)
    else:
        matrix = cross_check([(root, evidence)], study, configuration_labels([evidence]), reference=None, extra=())
        decision = decide([evidence], study, catalog, None, agreement=matrix)
        decision = replace(decision, catalog_source=source, inconsistent=None, test_hooks=hooks or None)
        texts = decision_texts(decision, hooks, study)
    paths = {str(root): label}
    recorded_catalog = str(recorded.get("catalog_path", ""))
    if catalog_path is not None:
        paths[str(catalog_path)] = recorded_catalog
        paths[source] = str(recorded.get("catalog_source", ""))
    elif _frozen_catalog_of(recorded_catalog, label):
        # the frozen catalog is named by the campaign's absolute path, the campaign by the DIR given (``label``,
        # maybe relative): both are the extracted root here, so the longer one is written back first
        paths[str(root / FROZEN_CATALOG)] = recorded_catalog
    for before in sorted(paths, key=len, reverse=True):  # the longest first: a path inside another one
        texts = {name: text.replace(before, paths[before]) for name, text in texts.items()}
    return texts


def _frozen_catalog_of(recorded_catalog: str, label: str) -> bool:
    """Can ``recorded_catalog`` be the frozen catalog of the campaign ``decide`` was given as ``label``: an absolute
    path to ``catalog.csv`` in a folder of the label's name (the only path written back that a relative label
    does not give)."""
    path, name = Path(recorded_catalog), Path(os.path.normpath(label)).name
    return path.is_absolute() and path.name == FROZEN_CATALOG and (name in ("", "..") or path.parent.name == name)


def _serving_again(campaign: Campaign, evidence: CampaignEvidence, recorded: dict[str, Any], catalog: Catalog,
                   source: str, hooks: tuple[str, ...]) -> dict[str, str]:
    """A server study's decision decided again over ``campaign`` for the traffic the recorded decision declared
    (``demand``: an input of the decision, as the catalog is; a demand that is not one ``decide`` accepts is
    refused as malformed), with the fault hook's flag (``hooks``) first as ``decide`` prints it."""
    declared = recorded["demand"]
    demand = serving_demand(declared["peak_qps"], declared["hours_per_day"], declared["days"])
    decision = serving_decision([campaign], [evidence], demand, catalog, source)
    return dict(zip(DECISION_FILES, serving_texts(decision, hooks), strict=True))
