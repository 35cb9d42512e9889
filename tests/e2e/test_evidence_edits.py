"""Every file a verdict, a summary or a decision reads is sealed: an edit is refused by every reading command.

Issue 20, defect 2: a price changed in catalog.csv, a deleted catalog.csv, 300,000 s added to one set-up time
in status.json, three labels changed in one predictions.jsonl were each read without a word (`decide` exit 0
with another answer). Here each edit (and its cousins: manifest, spec, batches, events, rentals) is made on a
copy of one real campaign (real host code, fake trials: tests/fakecampaign.py), and every reading command must
refuse it with one ``Error:`` line naming the file, exit 2, and no derived file replaced. Defect 3 (a cut last
line of rentals.jsonl priced the previous rental) is here too.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fakecampaign import FakeLauncher, fake_workspace

from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_rows
from runner.cli import main

pytestmark = pytest.mark.e2e

READERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "validate": lambda root, tmp: ["validate", str(root)],
    "summarize": lambda root, tmp: ["summarize", str(root)],
    "decide": lambda root, tmp: ["decide", str(root), "--out", str(tmp / "decision")],
    "period": lambda root, tmp: ["period", str(root)],
    "bundle": lambda root, tmp: ["bundle", str(root), "-o", str(tmp / "b.tar.gz")],
}


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sealed")
    out = root / "out"
    run_campaign(fake_workspace(root / "ws", repetitions=2), out, FakeLauncher(), rental=Rental("rtx-4090", 2))
    result = cli("rental", str(out), "--gpu", "rtx-4090", "--lots", "2")
    assert result.exit_code == 0, result.output
    for command in ("validate", "summarize"):
        result = cli(command, str(out))
        assert result.exit_code == 0, result.output
    result = cli("decide", str(out), "--out", str(root / "decision"))
    assert result.exit_code == 0, result.output
    for name in ("decision.json", "decision.md", "report.html"):  # as an older decide left them: bundled too
        shutil.copyfile(root / "decision" / name, out / name)
    return out


@pytest.fixture
def campaign(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "campaign"
    shutil.copytree(built, copy)
    return copy


def _first_trial(root: Path) -> Path:
    return root / "trials" / read_rows(root)[0].trial_id


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n", encoding="utf-8")


def edit_catalog_price(root: Path) -> str:
    path = root / "catalog.csv"
    text = path.read_text(encoding="utf-8")
    assert "110.00" in text
    path.write_text(text.replace("110.00", "1.10"), encoding="utf-8")
    return "catalog.csv"


def delete_catalog(root: Path) -> str:
    (root / "catalog.csv").unlink()
    return "catalog.csv"


def add_setup_time(root: Path) -> str:
    def change(data: dict) -> None:
        data["phases"]["load_s"] = (data["phases"].get("load_s") or 0.0) + 300_000.0
    _edit_json(_first_trial(root) / "status.json", change)
    return "status.json"


def change_three_labels(root: Path) -> str:
    path = _first_trial(root) / "predictions.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for line in lines[:3]:
        line["label"] = "y" if line["label"] == "x" else "x"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return "predictions.jsonl"


def edit_manifest(root: Path) -> str:
    _edit_json(_first_trial(root) / "manifest.json", lambda data: data.update(host={"memory_total_bytes": 1}))
    return "manifest.json"


def edit_spec(root: Path) -> str:
    _edit_json(_first_trial(root) / "spec.json", lambda data: data.update(timeout_s=1))
    return "spec.json"


def add_batches(root: Path) -> str:
    (_first_trial(root) / "batches.jsonl").write_text('{"batch": 0, "pass_s": 0.001}\n', encoding="utf-8")
    return "batches.jsonl"


def link_status(root: Path) -> str:
    rows = read_rows(root)
    target = root / "trials" / rows[1].trial_id / "status.json"
    status = root / "trials" / rows[0].trial_id / "status.json"
    status.unlink()
    status.symlink_to(target)
    return "status.json"


def shift_last_event(root: Path) -> str:
    path = root / "events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    last["at"] = (datetime.fromisoformat(last["at"]) - timedelta(seconds=1)).isoformat()  # within the 2 s NTP slack
    lines[-1] = json.dumps(last, sort_keys=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return "events.jsonl"


def drop_an_event(root: Path) -> str:
    path = root / "events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:2] + lines[3:]), encoding="utf-8")
    return "events.jsonl"


def append_an_event(root: Path) -> str:
    """A later end of the campaign, appended by hand: the period (and so the plan) would grow."""
    with open(root / "events.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"at": datetime.now(UTC).isoformat(), "event": "trials_end"}) + "\n")
    return "events.jsonl"


def edit_rental_lots(root: Path) -> str:
    path = root / "rentals.jsonl"
    text = path.read_text(encoding="utf-8")
    assert '"lots": 2' in text
    path.write_text(text.replace('"lots": 2', '"lots": 1'), encoding="utf-8")
    return "rentals.jsonl"


def cut_last_rental(root: Path) -> str:
    with open(root / "rentals.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"gpu": "b200", "lo')
    return "rentals.jsonl"


def bad_rental_line(root: Path) -> str:
    path = root / "rentals.jsonl"
    path.write_text("{not json\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    return "rentals.jsonl"


EDITS = [edit_catalog_price, delete_catalog, add_setup_time, change_three_labels, edit_manifest, edit_spec,
         add_batches, link_status, shift_last_event, drop_an_event, append_an_event, edit_rental_lots, cut_last_rental,
         bad_rental_line]


@pytest.mark.parametrize("edit", EDITS, ids=[edit.__name__ for edit in EDITS])
def test_every_reading_command_refuses_the_edit_naming_the_file(campaign: Path, tmp_path: Path,
                                                                edit: Callable[[Path], str]) -> None:
    decision_before = (campaign / "decision.json").read_bytes()
    summary_before = (campaign / "summary.json").read_bytes()
    name = edit(campaign)
    for command, argv in READERS.items():
        result = cli(*argv(campaign, tmp_path))
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{command}: traceback {result.exception!r}\n{result.output}")
        assert result.exit_code == 2, f"{command} accepted the edit of {name}:\n{result.output}"
        errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1, f"{command}:\n{result.output}"
        assert name in errors[0], f"{command} does not name {name}: {errors[0]}"
    assert (campaign / "decision.json").read_bytes() == decision_before
    assert (campaign / "summary.json").read_bytes() == summary_before
    assert not (tmp_path / "b.tar.gz").exists()


def test_allow_inconsistent_reads_an_edit_and_says_so_first(campaign: Path) -> None:
    change_three_labels(campaign)
    result = cli("summarize", str(campaign), "--allow-inconsistent")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("INCONSISTENT CAMPAIGN DIRECTORY (--allow-inconsistent, forensics only)")
    assert "predictions.jsonl" in result.output.splitlines()[0]


def test_the_next_rental_keeps_a_cut_last_line_aside(campaign: Path) -> None:
    cut_last_rental(campaign)
    result = cli("rental", str(campaign), "--gpu", "b200", "--lots", "1")
    assert result.exit_code == 0, result.output
    assert "rentals.jsonl.partial-1" in result.output
    assert (campaign / "rentals.jsonl.partial-1").read_text(encoding="utf-8") == '{"gpu": "b200", "lo'
    result = cli("decide", str(campaign))
    assert result.exit_code == 0, result.output
    assert "b200 ×1 lot" in result.output and "latest of 2" in result.output


def test_unedited_campaign_still_reads(campaign: Path, tmp_path: Path) -> None:
    for command, argv in READERS.items():
        result = cli(*argv(campaign, tmp_path))
        assert result.exit_code == 0, f"{command}:\n{result.output}"
