"""A campaign directory opened once: :class:`Campaign`, what every reading stage is handed instead of a path.

:func:`open_campaign` reads campaign.json, reads raw.csv's bytes once (:func:`~runner.campaign_dir.raw_table.
read_raw_bytes`), runs the evidence checks over those bytes (:class:`~runner.campaign_dir.checks.CampaignChecks`:
the chain checked once, the study parsed once), and keeps the checked chain: the typed rows
(:class:`~protocol.records.raw_record.RawRecord`) and the pandas frame (:meth:`Campaign.frame`) both come from it, so no
stage reads raw.csv again. Opening writes nothing; the stages that derive verdicts and the summary do it in
memory (:mod:`runner.analysis`), and only ``validate``, ``summarize`` and ``run`` write them into the directory.

With ``allow_inconsistent`` (forensics) a directory that fails the checks is opened anyway, its rows read as
they are, and :attr:`Campaign.banner` says so; without it, a failed check is a UserError naming the first
discrepancy (:class:`~runner.campaign_dir.integrity.IntegrityReport`).

``bundle`` and ``verify`` need more: every discrepancy of the deep checks, and then (when there is none) the
campaign itself, both from the same single read. :func:`inspect_campaign` gives them as an :class:`Inspection`.

Example::

    campaign = open_campaign(Path("results/quick"))      # UserError: not a campaign, or not consistent
    inspect_campaign(Path("bundle/campaign"), "campaign/").problems   # [] or [Discrepancy(...), ...]
    campaign.study.name, len(campaign.rows)
    campaign.frame(("trial_id", "pass_s"))["pass_s"].median()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from protocol.errors import UserError
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignRecord
from protocol.study.load import Study, load_study
from runner.campaign_dir.checks import CampaignChecks
from runner.campaign_dir.findings import MALFORMED, Discrepancy
from runner.campaign_dir.integrity import IntegrityReport
from runner.campaign_dir.layout import CampaignPaths, load_record
from runner.campaign_dir.raw_frame import typed_frame
from runner.campaign_dir.raw_table import _RESUME_FIX, RawChain, check_chain, read_raw_bytes, typed_table


@dataclass(frozen=True)
class Campaign:
    """One campaign directory, read and checked once: its record, its frozen study, raw.csv's checked chain and
    typed rows, and the inconsistency banner ("" when consistent)."""

    root: Path
    record: CampaignRecord
    study: Study
    chain: RawChain
    rows: tuple[RawRecord, ...]
    banner: str = ""

    @property
    def paths(self) -> CampaignPaths:
        return CampaignPaths(self.root)

    def trial_dir(self, trial_id: str) -> Path:
        return self.paths.trial_dir(trial_id)

    def frame(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """raw.csv's rows as the typed frame of ``columns`` (default: every raw column), made from the chain read
        at opening (:func:`runner.campaign_dir.raw_frame.typed_frame`), never from the file again."""
        return typed_frame(self.chain, columns, str(self.paths.raw))


def open_campaign(root: Path, *, allow_inconsistent: bool = False, study: Study | None = None) -> Campaign:
    """Open the campaign directory ``root``: campaign.json, the evidence checks, the study and raw.csv, each read
    once. ``study``: the caller's parse of the same study (``isocost run`` has it), used when the frozen copy
    hashes to it. UserError when it is not a campaign, or not consistent (unless ``allow_inconsistent``)."""
    paths = CampaignPaths(root)
    record = load_record(root)
    data = read_raw_bytes(paths.raw)
    checks = CampaignChecks(root, deep=False, raw_data=data, study=study, frozen_study=True)
    checks.run()
    banner = IntegrityReport(root=root, discrepancies=tuple(checks.problems)).require(allow_inconsistent)
    frozen = checks.study if checks.study is not None else load_study(paths.study)  # unreadable: its own error
    table = checks.table
    if table is None or table.chain is None or banner:  # read as it is (forensics), from the same bytes
        chain = check_chain(paths.raw, verify=not allow_inconsistent, data=data)
        if chain.partial and not allow_inconsistent:
            raise UserError(f"raw.csv ends in a partial row (row {chain.partial_row}, byte {len(chain.data)})",
                            str(paths.raw), _RESUME_FIX)
        table = typed_table(chain, paths.raw)
    assert table.chain is not None  # typed_table keeps the chain it typed
    return Campaign(root=root, record=record, study=frozen, chain=table.chain, rows=table.rows, banner=banner)


@dataclass(frozen=True)
class Inspection:
    """A campaign directory under the deep checks (``verify``), raw.csv read once for all of it: every discrepancy,
    campaign.json and the rows as they are (None where unreadable: the discrepancies name why), and the opened
    :class:`Campaign` when the directory is consistent (else None)."""

    problems: tuple[Discrepancy, ...]
    record: CampaignRecord | None
    rows: tuple[RawRecord, ...] | None
    campaign: Campaign | None


def inspect_campaign(root: Path, prefix: str = "") -> Inspection:
    """Run the deep checks over ``root`` (file names shown with ``prefix``) and open it from the same single read of
    raw.csv. Never raises on malformed content: a discrepancy names it (a raw format this isocost cannot read
    stays a UserError, as in :func:`~runner.campaign_dir.integrity.check_campaign`)."""
    paths = CampaignPaths(root)
    try:
        data = read_raw_bytes(paths.raw)
    except UserError as exc:
        return Inspection((Discrepancy(prefix + "raw.csv", "content", exc.what),), None, None, None)
    checks = CampaignChecks(root, prefix, deep=True, raw_data=data, frozen_study=True)
    checks.run()
    record, table = checks.campaign, checks.table
    if record is not None and data is not None and (table is None or checks.problems):
        try:  # the rows as they are (forensics), from the same bytes
            table = typed_table(check_chain(paths.raw, verify=False, data=data), paths.raw)
        except MALFORMED:
            table = None
    rows = table.rows if table is not None else None
    opened = None
    if not checks.problems and record is not None and checks.study is not None and table is not None \
            and table.chain is not None:
        opened = Campaign(root=root, record=record, study=checks.study, chain=table.chain, rows=table.rows)
    return Inspection(tuple(checks.problems), record, rows, opened)
