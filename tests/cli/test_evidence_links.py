"""Issue 38, class 4: no hard-link way out of a campaign.

A hard link is a second name of a file outside the campaign: ``rentals.jsonl`` hard-linked to an empty file
outside got the rental appended there; ``bundle`` packed a trial file hard-linked to a secret outside (its bytes
in an archive that verifies). Every writer (protocol/io/safe_write.py: raw.csv, events, rentals, ledgers, atomic
writes) and the bundler refuse a regular file with more than one link, as they refuse symbolic links, naming it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_hostile_inputs import assert_user_error, invoke

from runner.campaign_dir.layout import read_rows

SECRET = b"-----BEGIN PRIVATE KEY-----\nnot really\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def test_rental_refuses_a_rentals_jsonl_hard_linked_outside(evidence_campaign: Path, outside: Path) -> None:
    empty = outside / "empty"
    empty.write_bytes(b"")
    rentals = evidence_campaign / "rentals.jsonl"
    rentals.unlink(missing_ok=True)
    os.link(empty, rentals)
    assert_user_error(invoke(["rental", str(evidence_campaign), "--gpu", "rtx-4090", "--lots", "1"]),
                      "rentals.jsonl has 2 hard links")
    assert empty.read_bytes() == b""


@pytest.mark.parametrize("name", ["status.json", "trial.log", "extra.txt"])
def test_bundle_refuses_a_trial_file_hard_linked_outside(evidence_campaign: Path, outside: Path, tmp_path: Path,
                                                         name: str) -> None:
    """A secret's bytes under a trial file's name (trial.log is not sealed; extra.txt is no trial file), or a
    sealed file given a second name outside."""
    target = evidence_campaign / "trials" / read_rows(evidence_campaign)[0].trial_id / name
    if name == "status.json":
        os.link(target, outside / name)
    else:
        secret = outside / "id_rsa"
        secret.write_bytes(SECRET)
        target.unlink(missing_ok=True)
        os.link(secret, target)
    out = tmp_path / "b.tar.gz"
    assert_user_error(invoke(["bundle", str(evidence_campaign), "-o", str(out)]), f"{name} has 2 hard links")
    assert not out.exists()


@pytest.mark.parametrize("name", ["campaign.json", "raw.csv", "events.jsonl", "summary.json"])
def test_bundle_refuses_a_campaign_file_hard_linked_outside(evidence_campaign: Path, outside: Path, tmp_path: Path,
                                                            name: str) -> None:
    os.link(evidence_campaign / name, outside / name)  # the campaign's own file, with a second name outside
    out = tmp_path / "b.tar.gz"
    assert_user_error(invoke(["bundle", str(evidence_campaign), "-o", str(out)]), f"{name} has 2 hard links")
    assert not out.exists()


@pytest.mark.parametrize("command", ["summarize", "decide"])
def test_a_derived_file_hard_linked_outside_is_not_written_there(evidence_campaign: Path, outside: Path,
                                                                 command: str) -> None:
    name = {"summarize": "summary.md", "decide": "decision.md"}[command]
    kept = outside / name
    if not (evidence_campaign / name).exists():  # decide writes under --out only: a memo left by an older one
        (evidence_campaign / name).write_text("# an earlier memo\n", encoding="utf-8")
    os.link(evidence_campaign / name, kept)
    before = kept.read_bytes()
    if command == "decide":  # decide never writes into a campaign it reads: the link is left alone
        result = invoke([command, str(evidence_campaign)])
        assert result.exit_code == 0, result.output
    else:
        assert_user_error(invoke([command, str(evidence_campaign)]), f"{name} has 2 hard links")
    assert kept.read_bytes() == before
