"""Is a campaign directory what its writer left? The report every reading command refuses on.

Every reading command opens a campaign through :func:`runner.campaign_dir.campaign.open_campaign`, which runs
the evidence checks (the deep ones too for ``bundle`` and ``verify``) and refuses on :class:`IntegrityReport`;
:func:`check_evidence` and :func:`check_campaign` run the same checks alone. What is checked is
:class:`~runner.campaign_dir.checks.CampaignChecks`; a failed check names the file, the field and
what differs (:class:`~runner.campaign_dir.findings.Discrepancy`). Readers refuse with ``Error:``
unless given ``--allow-inconsistent`` (forensics), and then say so first
(:data:`INCONSISTENT_BANNER`). :func:`refuse_less_evidence` keeps a derived file from being
replaced by one computed from fewer raw rows.

Example::

    report = check_evidence(Path("results/quick"))
    report.ok                 # True
    report.require(allow_inconsistent=False)   # raises UserError naming the first discrepancy
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.jsonio import read_json
from protocol.records.codec import to_dict
from runner.campaign_dir.checks import CampaignChecks
from runner.campaign_dir.findings import Discrepancy

#: A first line of every output made with ``--allow-inconsistent``.
INCONSISTENT_BANNER = "INCONSISTENT CAMPAIGN DIRECTORY (--allow-inconsistent, forensics only): "


def check_campaign(root: Path, prefix: str = "") -> list[Discrepancy]:
    """Every internal inconsistency of a campaign directory, in a fixed order (empty = consistent)."""
    checks = CampaignChecks(root, prefix)
    checks.run()
    return checks.problems


@dataclass(frozen=True)
class IntegrityReport:
    """The evidence checks of one campaign directory (:func:`check_evidence`)."""

    root: Path
    discrepancies: tuple[Discrepancy, ...]

    @property
    def ok(self) -> bool:
        return not self.discrepancies

    def headline(self) -> str:
        first = str(self.discrepancies[0]) if self.discrepancies else "consistent"
        more = len(self.discrepancies) - 1
        return first + (f" (and {more} more)" if more > 0 else "")

    def require(self, allow_inconsistent: bool = False) -> str:
        """"" when consistent; with ``allow_inconsistent`` the banner line to print first; else UserError."""
        if self.ok:
            return ""
        if allow_inconsistent:
            return f"{INCONSISTENT_BANNER}{self.root}: {self.headline()}"
        raise UserError(
            f"the campaign directory is not consistent: {self.headline()}",
            str(self.root),
            "Reading commands check the evidence before using it. A trial left unrecorded by a host crash, or a "
            "cut last row or event, is repaired by `isocost run STUDY --out DIR --resume`, a cut last rental by "
            "recording it again with `isocost rental`; anything else was changed after it was written: restore it "
            "from a backup or bundle. --allow-inconsistent reads it anyway (forensics; the output says so first).",
        )

    def to_dict(self) -> dict[str, Any]:
        return {"consistent": self.ok, "discrepancies": [to_dict(d) for d in self.discrepancies]}


def check_evidence(root: Path) -> IntegrityReport:
    """The evidence checks every reading command runs (study, corpus index, row chain, trials, events)."""
    checks = CampaignChecks(root, deep=False)
    checks.run()
    return IntegrityReport(root=root, discrepancies=tuple(checks.problems))


def refuse_less_evidence(previous_path: Path, rows_now: int, what: str) -> None:
    """Never replace ``previous_path`` (summary.json, verdicts.json) with one computed from fewer raw rows."""
    try:
        previous = read_json(previous_path)
    except (UserError, OSError, ValueError, RecursionError):
        return  # absent or unreadable: nothing to protect
    if not isinstance(previous, dict):
        return
    rows_before = previous.get("rows_total")
    if not isinstance(rows_before, int) and isinstance(previous.get("verdicts"), list):
        rows_before = len(previous["verdicts"])
    if not isinstance(rows_before, int) and isinstance(previous.get("variants"), list):
        rows_before = sum(int(v.get("attempts", 0)) for v in previous["variants"] if isinstance(v, dict))
    if isinstance(rows_before, int) and rows_now < rows_before:
        raise UserError(
            f"the existing {previous_path.name} was computed from {rows_before} raw row(s), raw.csv now gives "
            f"{rows_now}: the {what} would rest on less evidence than the one it replaces",
            str(previous_path),
            "raw.csv only grows. Restore the rows from a backup or bundle; the existing file is kept as it is.",
        )
