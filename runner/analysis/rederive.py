"""Derived files re-derived from sealed evidence and compared: what ``verify`` checks before it trusts a bundle.

verdicts.csv/json and summary.json/md are derived files: no raw row seals them, so a bundle whose derived files
were changed (and whose BUNDLE.json hashes were recomputed) would still pass the hash checks. :func:`derived_findings`
opens the campaign (its evidence checks), re-derives the verdicts and the summary in memory from the sealed raw rows
and trial files (:func:`~runner.analysis.verdicts.derive_verdicts`, :func:`~runner.analysis.summarize.derive_summary`)
and names, in that order, each derived file whose bytes differ from the re-derived ones. Nothing is written.

The memory estimates in the summary come from the model, not from the evidence: they are re-derived from the model
bundled with ``--include-inputs`` (its fingerprint sealed by BUNDLE.json and campaign.json) or the one at the path
campaign.json recorded where it is on this host (:func:`estimate_model`). Where neither is there they cannot be
re-derived: the recorded summary.json's are used for the comparison and :func:`estimate_caveat` names them as
unchecked, so an edited estimate is never vouched for silently.

Example::

    derived_findings(open_campaign(Path("bundle/campaign")), "campaign/")   # [] or [Discrepancy(...summary.md...)]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.hardware.memory import MemoryEstimate, ModelShape, estimate
from protocol.io.jsonio import dumps, read_json
from protocol.records.codec import from_dict, to_dict
from protocol.records.summary import SummaryRecord
from runner.analysis.summarize import derive_summary
from runner.analysis.verdicts import derive_verdicts, verdicts_csv, verdicts_record
from runner.campaign_dir.campaign import Campaign
from runner.campaign_dir.findings import MALFORMED, Discrepancy


def derived_findings(campaign: Campaign, prefix: str = "", model_dir: Path | None = None) -> list[Discrepancy]:
    """Each derived file of the opened ``campaign`` (verdicts.csv, verdicts.json, summary.json, summary.md) that
    differs from the one re-derived from its sealed evidence (the memory estimates from ``model_dir``, see
    :func:`estimate_model`); [] when they all follow."""
    root = campaign.root
    try:
        texts = rederived_texts(campaign, model_dir)
    except MALFORMED as exc:
        return [Discrepancy(prefix + "verdicts.json", "re-derivation",
                            f"the evidence cannot be re-derived ({type(exc).__name__}: {str(exc)[:200]})")]
    return [problem for name, text in texts.items() if (problem := differs(root, name, text, prefix)) is not None]


def rederived_texts(campaign: Campaign, model_dir: Path | None = None) -> dict[str, str]:
    """The text each derived file of ``campaign`` must hold, re-derived from its evidence (and from the model in
    ``model_dir`` for the memory estimates; the recorded ones where it is None)."""
    verdicts = derive_verdicts(campaign)
    record, markdown = derive_summary(campaign, verdicts, estimates=_model_estimates(campaign, model_dir))
    return {"verdicts.csv": verdicts_csv(verdicts),
            "verdicts.json": dumps(to_dict(verdicts_record(campaign, verdicts))),
            "summary.json": dumps(to_dict(record)), "summary.md": markdown}


def differs(root: Path, name: str, expected: str, prefix: str = "") -> Discrepancy | None:
    """A discrepancy when ``root/name`` is there and does not hold ``expected`` (the first line that differs)."""
    path = root / name
    if not path.is_file():
        return None  # a missing derived file is named by the listing and packing checks
    actual = path.read_bytes()
    if actual == expected.encode("utf-8"):
        return None
    lines, wanted = actual.decode("utf-8", "replace").splitlines(), expected.splitlines()
    number = next((i for i, (a, b) in enumerate(zip(lines, wanted, strict=False), start=1) if a != b),
                  min(len(lines), len(wanted)) + 1)
    shown = lines[number - 1][:120] if number <= len(lines) else "(end of file)"
    return Discrepancy(prefix + name, f"line {number}",
                       f"does not follow from the sealed evidence: it reads {shown!r}, re-derived it reads "
                       f"{(wanted[number - 1][:120] if number <= len(wanted) else '(end of file)')!r}")


def estimate_model(campaign: Campaign, bundled: Path | None = None) -> Path | None:
    """The model directory the memory estimates are re-derived from: the ``bundled`` copy (its fingerprint already
    checked against the campaign's), else the path campaign.json recorded when it is on this host; None when
    neither holds a config.json."""
    recorded = campaign.record.model.path if campaign.record.model else ""
    for candidate in (bundled, Path(recorded) if recorded else None):
        if candidate is not None and (candidate / "config.json").is_file():
            return candidate
    return None


def estimate_caveat(campaign: Campaign, prefix: str = "") -> str:
    """What a reader must know when the memory estimates could not be re-derived (no model here or in the bundle)."""
    recorded = campaign.record.model.path if campaign.record.model else ""
    return (f"{prefix}summary.json: memory_estimates: not re-derived: the model is not on this host (not at "
            f"{recorded!r}) nor in the bundle, so the estimates in summary.json and summary.md are the bundle's "
            "own, unchecked (bundle with --include-inputs, or verify where the model is at that path)")


def _model_estimates(campaign: Campaign, model_dir: Path | None) -> dict[str, MemoryEstimate | None]:
    """The memory estimates: from the model in ``model_dir``, else the ones summary.json recorded (unchecked)."""
    if model_dir is not None:
        try:
            shape = ModelShape.read(model_dir)
        except (UserError, OSError):
            return {v.variant_id: None for v in campaign.record.variants}
        return {v.variant_id: estimate(shape, v.precision, v.quantization, v.batch_size, v.max_length, v.attention)
                for v in campaign.record.variants}
    try:
        recorded: Any = from_dict(SummaryRecord, read_json(campaign.root / "summary.json"), "summary.json")
    except (*MALFORMED, OSError):
        return {v.variant_id: None for v in campaign.record.variants}
    return dict(recorded.memory_estimates or {v.variant_id: None for v in campaign.record.variants})
