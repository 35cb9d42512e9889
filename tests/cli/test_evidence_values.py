"""Issue 38, class 2: a sealed row is trusted for values no run can produce.

The chain proves a row was not edited after it was written; it does not make its values possible, and anyone
can recompute a sha256 chain (tests/rechain.py does, with isocost's own chain code). So every numeric cell of
every evidence file is checked for its domain when read (finite, non-negative, within its declared bounds), and
a value outside it is one ``Error:`` line naming the file, the row and the column: never a summary of it, never
a traceback. The campaign is real host code with fake trials (tests/fakecampaign.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rechain import rechain, reseal
from test_hostile_inputs import assert_user_error, invoke

from runner.campaign_dir.layout import read_rows

READING = ["validate", "summarize", "decide", "period", "bundle"]


def _argv(command: str, root: Path, tmp: Path) -> list[str]:
    return {"bundle": ["bundle", str(root), "-o", str(tmp / "b.tar.gz")]}.get(command, [command, str(root)])


def _set_cell(column: str, value: str, row: int = 1):
    def change(rows: list[dict[str, str]]) -> None:
        rows[row - 1][column] = value
    return change


@pytest.mark.parametrize("command", READING)
@pytest.mark.parametrize("column, value", [("pass_s", "-5"), ("pass_s", "inf"), ("pass_s", "nan"),
                                           ("peak_rss_bytes", "1" + "0" * 30), ("pass_s", "-inf"),
                                           ("load_s", "-1"), ("peak_allocated_bytes", "-1"), ("completed", "-3"),
                                           ("device_busy_share", "7"), ("queue_s", "1e300"), ("repetition", "0")])
def test_a_rechained_row_with_an_impossible_value_is_refused_naming_row_and_column(evidence_campaign, tmp_path,
                                                                                    command, column, value):
    rechain(evidence_campaign, _set_cell(column, value, row=2))
    assert_user_error(invoke(_argv(command, evidence_campaign, tmp_path)), "raw.csv", "row 2", column)


def test_the_unedited_campaign_reads_with_every_command(evidence_campaign, tmp_path):
    rechain(evidence_campaign, lambda rows: None)  # the helper itself changes nothing a reader sees
    for command in READING:
        result = invoke(_argv(command, evidence_campaign, tmp_path))
        assert result.exit_code == 0, f"{command}: {result.output}"


def _edit_trial_json(root: Path, name: str, change) -> str:
    trial_id = read_rows(root)[1].trial_id
    path = root / "trials" / trial_id / name
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    reseal(root, trial_id, name)  # the seal and the chain recomputed: only the value itself is wrong now
    return f"{trial_id}/{name}"


TRIAL_FILE_EDITS = {
    "status-load-negative": ("status.json", lambda d: d["phases"].update(load_s=-1.0), "phases.load_s"),
    "status-pass-huge": ("status.json", lambda d: d["phases"].update(trial_s=1e300), "phases.trial_s"),
    "status-peak-1e30": ("status.json", lambda d: d["memory"].update(peak_rss_bytes=10**30), "memory.peak_rss_bytes"),
    "status-energy-negative": ("status.json", lambda d: d.update(gpu_energy_j=-3.0), "gpu_energy_j"),
    "status-completed-negative": ("status.json", lambda d: d.update(completed=-1), "completed"),
    "status-truncated-negative": ("status.json", lambda d: d.update(truncated_count=-2), "truncated_count"),
    "manifest-attempt-zero": ("manifest.json", lambda d: d.update(attempt=0), "attempt"),
}


@pytest.mark.parametrize("case, command", [  # validate reads no status or manifest, summarize no manifest
    (case, command) for case in sorted(TRIAL_FILE_EDITS) for command in ("summarize", "decide", "bundle")
    if not (case.startswith("manifest") and command == "summarize")])
def test_a_resealed_trial_file_with_an_impossible_value_is_refused_naming_file_and_key(evidence_campaign, tmp_path,
                                                                                       command, case):
    name, change, key = TRIAL_FILE_EDITS[case]
    where = _edit_trial_json(evidence_campaign, name, change)
    result = invoke(_argv(command, evidence_campaign, tmp_path))
    assert_user_error(result, where, key)
    assert "outside its domain" in result.output or "finite" in result.output, result.output


def test_the_raw_domains_cover_every_numeric_column():
    """One mechanism: every numeric raw column has a declared domain (by unit, by name, or RAW_DOMAINS)."""
    from protocol.records.domains import FINITE, INT64
    from protocol.records.raw_columns import RAW_DOMAINS, raw_domain
    from protocol.records.raw_record import COLUMN_TYPES

    numeric = [name for name, kind in COLUMN_TYPES.items() if kind in ("int | None", "float | None")]
    undeclared = [name for name in numeric if raw_domain(name) in (FINITE, INT64) and name not in RAW_DOMAINS]
    assert undeclared == []
