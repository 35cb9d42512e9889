"""Readers never write (issue 34, deliverable 3): `decide`, `compare`, `period`, `memory`, `verify` and `replay`
write only under their `--out`, never into a campaign directory they read.

Two ways: every file of the campaign directory (and the bundle) keeps its bytes and its mtime, and the same
commands succeed on a real read-only bind mount of the directory (tests run as root, and root ignores
permission bits, so `chmod -R a-w` proves nothing here). Mounting is tried, never guessed: where it is refused
the mount test skips, unless ISOCOST_REQUIRE_MOUNT=1 (CI), where it fails.
Before the change `decide` re-ran validate and summarize and rewrote verdicts.* and summary.* in every campaign it
weighed, and wrote decision.* into the first one; on a read-only directory it failed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"
REQUIRE_MOUNT_ENV = "ISOCOST_REQUIRE_MOUNT"


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``root``: its sha256 (a directory: "dir") and mtime in nanoseconds."""
    found = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        found[str(path.relative_to(root))] = (digest, stat.st_mtime_ns)
    return found


def _study_with_model(tmp_path: Path) -> Path:
    """The golden campaign's study, its model a directory with a safetensors header (for `memory estimate`)."""
    from test_hostile_inputs import make_model

    model = make_model(tmp_path / "model")
    text = (GOLDEN / "study.toml").read_text(encoding="utf-8").replace('path = "model"', f'path = "{model}"')
    study = tmp_path / "study.toml"
    study.write_text(text, encoding="utf-8")
    return study


def _commands(campaign: Path, tmp_path: Path) -> list[list[str]]:
    bundle = tmp_path / "bundle.tar.gz"
    return [
        ["decide", str(campaign), "--out", str(tmp_path / "decision")],
        ["decide", str(campaign), "--format", "csv"],
        ["compare", str(campaign)],
        ["period", str(campaign)],
        ["memory", "estimate", "--study", str(_study_with_model(tmp_path)), "--campaign", str(campaign)],
        ["bundle", str(campaign), "-o", str(bundle)],
        ["verify", str(bundle)],
    ]


def _run_all(campaign: Path, tmp_path: Path) -> None:
    for args in _commands(campaign, tmp_path):
        result = CliRunner().invoke(main, args)
        # decide: the golden campaign recorded no rental, so the memo answers no (exit 3), and is written
        assert result.exit_code == (3 if args[0] == "decide" else 0), (args, result.output)


def test_reading_commands_leave_every_file_of_the_campaign_as_it_was(tmp_path):
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    before = _snapshot(campaign)
    _run_all(campaign, tmp_path / "outs")
    assert _snapshot(campaign) == before


def test_decide_refuses_an_out_inside_a_campaign_it_reads(tmp_path):
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    before = _snapshot(campaign)
    for out in (campaign, campaign / "decision"):
        result = CliRunner().invoke(main, ["decide", str(campaign), "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert "never writes into the campaigns it reads" in result.output
    assert _snapshot(campaign) == before


def test_decide_without_out_writes_nothing_and_says_so(tmp_path):
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    before = _snapshot(campaign)
    result = CliRunner().invoke(main, ["decide", str(campaign)])
    assert result.exit_code == 3, result.output  # no rental recorded: the memo answers no
    assert "pass --out DIR" in result.stderr and "# " in result.stdout
    assert _snapshot(campaign) == before


@contextmanager
def _read_only_mount(source: Path, target: Path) -> Iterator[Path]:
    """``source`` bind-mounted read-only at ``target``; skips (fails with ISOCOST_REQUIRE_MOUNT=1) where refused."""
    target.mkdir()
    try:
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        if os.environ.get(REQUIRE_MOUNT_ENV) == "1":
            pytest.fail(f"cannot bind-mount here ({exc}) and {REQUIRE_MOUNT_ENV}=1 requires it")
        pytest.skip(f"cannot bind-mount here: {exc} (set {REQUIRE_MOUNT_ENV}=1 to require it)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True, capture_output=True, timeout=30)
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False, capture_output=True, timeout=30)


def test_reading_commands_run_on_a_read_only_campaign_directory(tmp_path):
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    with _read_only_mount(campaign, tmp_path / "read-only") as read_only:
        with pytest.raises(OSError):
            (read_only / "probe").write_text("x")  # the mount is really read-only, even for root
        _run_all(read_only, tmp_path / "outs")
