"""The summary is what the code before the pandas tables made of the same rows and verdicts, to the last bit.

The cases (tests/summary_cases.py) hold failed, retried and rejected passes, rows without a verdict, empty memory
peaks with their reasons, passes that scored other subgroups, a variant that never ran, another reference per
seed and a table of no rows; ``tests/data/summary_golden.json`` is what protocol/records/summary.py made of them.
"""

from __future__ import annotations

import json

import pytest
from summary_cases import GOLDEN, cases, summary_text

from protocol.records.raw_record import RawRecord
from runner.analysis.stats import summarize
from runner.campaign_dir.raw_frame import frame_of

CASES = cases()
EXPECTED = json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_summary_matches_the_golden_file(name: str) -> None:
    case = CASES[name]
    references = case["references"]
    frame = frame_of([RawRecord.from_text(row) for row in case["rows"]])
    summary = summarize(frame, case["verdicts"], case["variants"], case["quality"],
                        references.__getitem__ if references else None)
    assert summary_text(summary) == json.dumps(EXPECTED[name], indent=1, ensure_ascii=False)
