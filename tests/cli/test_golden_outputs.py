"""The outputs of a real small campaign stay byte for byte what the code before the pandas tables wrote.

``tests/data/golden_campaign`` is a fake-trial campaign (tests/fakecampaign.py: 2 variants × 3 passes) with the
summary.md/json and verdicts.csv/json the earlier code wrote from it; ``tests/data/golden_decide`` holds what
``isocost decide`` printed from it (markdown and CSV) and its decision.json, with the campaign directory written
``<DIR>`` and this checkout ``<REPO>``. ``python tests/cli/test_golden_outputs.py`` records them again;
``python tests/cli/test_golden_outputs.py campaign`` first runs the fake campaign again (3 passes of batch 1 and 4).

History: the outputs were first recorded by the code before the pandas tables, which the pandas code matched byte
for byte. When manifest.json became a typed record (its fake-trial manifests had no ``schema_version``, which is
now refused), the campaign was run again: its outputs differed from the first ones only in the campaign id, the
pass times and the timestamps.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.analysis.summary import summarize_campaign
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
        assert result.exit_code == 0, result.output
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


def _rerun_campaign() -> None:
    """Run the fake campaign again into tests/data/golden_campaign and summarize it."""
    import subprocess
    import tempfile

    sys.path.insert(0, str(TESTS))
    from fakecampaign import fake_workspace, host_command, host_env

    with tempfile.TemporaryDirectory() as tmp:
        study = fake_workspace(Path(tmp) / "ws", repetitions=3)
        subprocess.run(host_command(study, Path(tmp) / "out"), env=host_env(0.05), check=True)
        shutil.rmtree(CAMPAIGN, ignore_errors=True)
        shutil.copytree(Path(tmp) / "out", CAMPAIGN)
    summarize_campaign(CAMPAIGN)


if __name__ == "__main__":  # record the golden files with the code of this checkout
    import tempfile

    if sys.argv[1:] == ["campaign"]:
        _rerun_campaign()
    with tempfile.TemporaryDirectory() as tmp:
        copy = _copy(Path(tmp))
        summarize_campaign(copy)
        DECIDE.mkdir(exist_ok=True)
        for file_name, text in _decide(copy).items():
            (DECIDE / file_name).write_text(text, encoding="utf-8")
    sys.exit(0)
