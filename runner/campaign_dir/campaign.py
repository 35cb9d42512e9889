"""A campaign directory opened once: :class:`Campaign`, what every reading stage is handed instead of a path.

:func:`open_campaign` reads campaign.json, reads raw.csv's bytes once (:func:`~runner.campaign_dir.rawtable.
read_raw_bytes`), runs the evidence checks over those bytes (:class:`~runner.campaign_dir.checks.CampaignChecks`:
the chain checked once, the study parsed once), and keeps the checked chain: the typed rows
(:class:`~protocol.rawrecord.RawRecord`) and the pandas frame (:meth:`Campaign.frame`) both come from it, so no
stage reads raw.csv again. Opening writes nothing; the stages that derive verdicts and the summary do it in
memory (:mod:`runner.analysis`), and only ``validate``, ``summarize`` and ``run`` write them into the directory.

With ``allow_inconsistent`` (forensics) a directory that fails the checks is opened anyway, its rows read as
they are, and :attr:`Campaign.banner` says so; without it, a failed check is a UserError naming the first
discrepancy (:class:`~runner.campaign_dir.integrity.IntegrityReport`).

Example::

    campaign = open_campaign(Path("results/quick"))      # UserError: not a campaign, or not consistent
    campaign.study.name, len(campaign.rows)
    campaign.frame(("trial_id", "pass_s"))["pass_s"].median()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from protocol.errors import UserError
from protocol.rawrecord import RawRecord
from protocol.records import CampaignRecord
from protocol.study import Study, load_study
from runner.campaign_dir.checks import CampaignChecks
from runner.campaign_dir.integrity import IntegrityReport
from runner.campaign_dir.layout import CampaignPaths, load_record
from runner.campaign_dir.raw_frame import typed_frame
from runner.campaign_dir.rawtable import _RESUME_FIX, RawChain, check_chain, read_raw_bytes, typed_table


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
