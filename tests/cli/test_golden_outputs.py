"""The outputs of the golden 1.0 campaign stay byte for byte what isocost 1.0.0 wrote.

``tests/data/golden_campaign`` is a real campaign on the tiny workspace (tests/golden.py: 2 batch sizes × 3 passes)
with the summary.md/json and verdicts.csv/json isocost 1.0.0 wrote from it; ``tests/data/golden_decide`` holds what
``isocost decide`` printed from it (markdown and CSV) and its decision.json, with the campaign directory written
``<DIR>`` and this checkout ``<REPO>``. ``python tests/cli/test_golden_outputs.py`` records the decide outputs again
(``python tests/golden.py`` first records the campaign and its bundle: only for a new major version).

History: the outputs were first recorded by the code before the pandas tables, which the pandas code matched byte
for byte, from a fake-trial campaign in raw format 4; when 1.0 dropped the pre-release raw formats, the campaign was
recorded again by a real run (format 5), and the outputs with it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.analysis.summarize import summarize_campaign
from runner.cli import main

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
CAMPAIGN = TESTS / "data" / "golden_campaign"
DECIDE = TESTS / "data" / "golden_decide"
SUMMARY_FILES = ("summary.json", "summary.md", "verdicts.csv", "verdicts.json")


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "campaign"
    shutil.copytree(CAMPAIGN, root)
    for name in SUMMARY_FILES:
        (root / name).unlink()
    return root


def _decide(root: Path) -> dict[str, str]:
    found = {}
    out = root.parent / "decision"  # decide writes under --out only, never into the campaign it reads
    for name, extra in (("decision.md", []), ("decision.csv", ["--format", "csv"])):
        result = CliRunner().invoke(main, ["decide", str(root), "--out", str(out), *extra])
        assert result.exit_code == 3, result.output  # no rental recorded: the memo answers no (and is written)
        found[name] = result.stdout  # what it prints; where it wrote is said on stderr
    found["decision.json"] = (out / "decision.json").read_text(encoding="utf-8")
    # campaign.json keeps the catalog's source path of the checkout that recorded it: that checkout is <REPO> too
    source = json.loads((root / "campaign.json").read_text(encoding="utf-8"))["catalog"]["source"]
    recorded = source.rsplit("/protocol/data/", 1)[0]
    return {name: text.replace(str(root), "<DIR>").replace(str(REPO), "<REPO>").replace(recorded, "<REPO>")
            for name, text in found.items()}


def test_summarize_writes_the_same_bytes_as_before(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    summarize_campaign(root)
    for name in SUMMARY_FILES:
        assert (root / name).read_bytes() == (CAMPAIGN / name).read_bytes(), name


@pytest.mark.parametrize("name", ["decision.md", "decision.csv", "decision.json"])
def test_decide_writes_the_same_bytes_as_before(tmp_path: Path, name: str) -> None:
    root = _copy(tmp_path)
    summarize_campaign(root)
    assert _decide(root)[name] == (DECIDE / name).read_text(encoding="utf-8")


if __name__ == "__main__":  # record the golden files with the code of this checkout
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copy = _copy(Path(tmp))
        summarize_campaign(copy)
        DECIDE.mkdir(exist_ok=True)
        for file_name, text in _decide(copy).items():
            (DECIDE / file_name).write_text(text, encoding="utf-8")
    sys.exit(0)
