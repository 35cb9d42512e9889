"""Through the CLI: no command writes through a symbolic link, and a path that cannot be written is an ``Error:``.

Issue 20, defect 1 (`isocost rental DIR` appended to what a symlinked DIR/rentals.jsonl pointed at) and its
class: every file a command writes in the campaign directory or under ``--out``, ``--ledger``, ``-o``; and the
tracebacks of unwritable paths (``--ledger``, ``init --out``, ``decide --out``, ``bundle -o``) and of a
directory where a campaign file belongs. Real host code, fake trials (tests/fakecampaign.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fakecampaign import FakeLauncher, build_fake_model, fake_workspace
from workspace import write_corpus

from protocol.errors import UserError
from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.cli import main

pytestmark = pytest.mark.e2e

SECRET = "root:x:0:0:root:/root:/bin/bash\n"


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def refused(result: Result, *fragments: str) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.output
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("writes")
    out = root / "out"
    run_campaign(fake_workspace(root / "ws", repetitions=1), out, FakeLauncher(), rental=Rental("rtx-4090", 1))
    assert cli("summarize", str(out)).exit_code == 0
    return out


@pytest.fixture
def campaign(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "campaign"
    shutil.copytree(built, copy, symlinks=True)
    return copy


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "passwd"
    path.parent.mkdir()
    path.write_text(SECRET, encoding="utf-8")
    return path


def _plant(path: Path, target: Path) -> None:
    if path.exists():
        path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize(("name", "argv"), [
    ("rentals.jsonl", ["rental", "{dir}", "--gpu", "rtx-4090", "--lots", "1"]),
    ("verdicts.csv", ["validate", "{dir}"]),
    ("verdicts.json", ["validate", "{dir}"]),
    ("summary.md", ["summarize", "{dir}"]),
    ("summary.json", ["summarize", "{dir}"]),
])
def test_a_link_in_the_campaign_directory_is_refused_not_written_through(
        campaign: Path, secret: Path, name: str, argv: list[str]) -> None:
    _plant(campaign / name, secret)
    error = refused(cli(*[a.replace("{dir}", str(campaign)) for a in argv]), name, "symbolic link")
    assert str(campaign / name) in error
    assert secret.read_text(encoding="utf-8") == SECRET
    assert (campaign / name).is_symlink()


def test_decide_never_writes_into_the_campaign_so_a_planted_link_stays_untouched(campaign: Path, secret: Path,
                                                                                tmp_path: Path) -> None:
    for name in ("decision.md", "report.html"):
        _plant(campaign / name, secret)
    result = cli("decide", str(campaign), "--out", str(tmp_path / "elsewhere"))
    assert result.exit_code == 0, result.output
    assert secret.read_text(encoding="utf-8") == SECRET
    assert (campaign / "decision.md").is_symlink() and (tmp_path / "elsewhere" / "decision.md").is_file()


def test_decide_out_with_a_planted_link_writes_none_of_its_three_files(campaign: Path, secret: Path,
                                                                     tmp_path: Path) -> None:
    out = tmp_path / "decision"
    out.mkdir()
    _plant(out / "report.html", secret)
    refused(cli("decide", str(campaign), "--out", str(out)), "report.html", "symbolic link")
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]
    assert secret.read_text(encoding="utf-8") == SECRET


def test_bundle_o_that_is_a_link_is_refused(campaign: Path, secret: Path, tmp_path: Path) -> None:
    link = tmp_path / "b.tar.gz"
    link.symlink_to(secret)
    refused(cli("bundle", str(campaign), "-o", str(link)), "b.tar.gz", "symbolic link")
    dangling = tmp_path / "dangling.tar.gz"
    dangling.symlink_to(tmp_path / "nowhere" / "x.tar.gz")
    refused(cli("bundle", str(campaign), "-o", str(dangling)), "dangling.tar.gz")
    assert secret.read_text(encoding="utf-8") == SECRET and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("argv", [
    ["decide", "{dir}", "--out", "{file}/decision"],
    ["bundle", "{dir}", "-o", "{file}/b.tar.gz"],
])
def test_an_unwritable_output_is_an_error_naming_it(campaign: Path, tmp_path: Path, argv: list[str]) -> None:
    plain = tmp_path / "plain"
    plain.write_text("a file, not a folder\n", encoding="utf-8")
    args = [a.replace("{dir}", str(campaign)).replace("{file}", str(plain)) for a in argv]
    refused(cli(*args), "plain", "not a directory")


def test_a_directory_where_rentals_jsonl_belongs(campaign: Path) -> None:
    (campaign / "rentals.jsonl").mkdir()
    refused(cli("rental", str(campaign), "--gpu", "rtx-4090"), "rentals.jsonl", "directory")
    refused(cli("decide", str(campaign)), "rentals.jsonl", "directory")


def test_init_out_that_is_a_link_or_unwritable(tmp_path: Path, secret: Path) -> None:
    model = build_fake_model(tmp_path / "model")
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, "c", 12, seed=1)
    tuning = tmp_path / "tuning.jsonl"
    write_corpus(tuning, "t", 6, seed=2)
    link = tmp_path / "study.toml"
    link.symlink_to(secret)
    refused(cli("init", str(corpus), str(model), "--tuning", str(tuning), "--out", str(link), "--force"),
            "study.toml", "symbolic link")
    assert secret.read_text(encoding="utf-8") == SECRET
    plain = tmp_path / "plain"
    plain.write_text("x", encoding="utf-8")
    refused(cli("init", str(corpus), str(model), "--tuning", str(tuning), "--out", str(plain / "study.toml")),
            "plain", "not a directory")


def test_the_ledger_is_never_written_through_a_link_and_a_bad_ledger_is_named(tmp_path: Path, secret: Path) -> None:
    study = fake_workspace(tmp_path / "ws", repetitions=1)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    (ledger / "evaluations.jsonl").symlink_to(secret)
    with pytest.raises(UserError, match="evaluations.jsonl is a symbolic link"):
        run_campaign(study, tmp_path / "a", FakeLauncher(), ledger_dir=ledger)
    assert secret.read_text(encoding="utf-8") == SECRET
    (ledger / "evaluations.jsonl").unlink()
    (ledger / "evaluations.jsonl").mkdir()
    with pytest.raises(UserError, match="evaluations.jsonl is a directory"):
        run_campaign(study, tmp_path / "b", FakeLauncher(), ledger_dir=ledger)
    refused(cli("check", str(study), "--ledger", str(ledger)), "evaluations ledger is a directory")
    plain = tmp_path / "plain"
    plain.write_text("x", encoding="utf-8")
    with pytest.raises(UserError, match="(?i)not a directory") as caught:
        run_campaign(study, tmp_path / "c", FakeLauncher(), ledger_dir=plain / "ledger")
    assert "--ledger" in caught.value.message


def test_a_cut_last_ledger_line_is_kept_aside_by_run_and_named_by_check(tmp_path: Path) -> None:
    study = fake_workspace(tmp_path / "ws", repetitions=1)
    ledger = tmp_path / "ledger"
    run_campaign(study, tmp_path / "a", FakeLauncher(), ledger_dir=ledger)
    with open(ledger / "evaluations.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"campaign_id": "cut')
    refused(cli("check", str(study), "--ledger", str(ledger)), "evaluations ledger ends in line 2, cut")
    run_campaign(study, tmp_path / "b", FakeLauncher(), ledger_dir=ledger)
    assert (ledger / "evaluations.jsonl.partial-1").read_text(encoding="utf-8") == '{"campaign_id": "cut'
    assert len((ledger / "evaluations.jsonl").read_text(encoding="utf-8").splitlines()) == 2
