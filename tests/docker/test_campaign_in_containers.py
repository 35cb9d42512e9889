"""A small campaign in real containers: every manifest and raw row names the image."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def docker_campaign(cpu_image: Any, images_lock: Path, workspace: Any,
                    tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`isocost run` with the default launcher choice (auto): the locked image must be picked."""
    from runner.cli import main

    out = tmp_path_factory.mktemp("campaign") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ISOCOST_IMAGES_LOCK", str(images_lock))
        patch.delenv("ISOCOST_FAULT_INJECT", raising=False)
        result = CliRunner().invoke(main, ["run", str(workspace.study("two")), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_auto_picks_the_locked_image(docker_campaign: tuple[Path, str], cpu_image: Any) -> None:
    out, output = docker_campaign
    assert f"launcher: docker, image {cpu_image.image_id}" in output
    campaign = json.loads((out / "campaign.json").read_text())
    assert campaign["launcher"]["kind"] == "docker"
    assert campaign["launcher"]["image_id"] == cpu_image.image_id


def test_rows_and_manifests_name_the_image(docker_campaign: tuple[Path, str], cpu_image: Any, files: Any) -> None:
    out, _ = docker_campaign
    rows = files.rows(out)
    assert len(rows) == 2
    for row in rows:
        assert row["status"] == "ok", row["notes"]
        assert row["corpus_accepted"] == "true"
        assert row["launcher"] == "docker"
        assert row["image_id"] == cpu_image.image_id
        assert row["image_digest"] == ""  # built here, never pushed: no repo digest, and the reason says so
        assert "image_digest: image never pushed or pulled" in row["empty_reasons"]
        assert row["exit_code"] == "0"
    for trial in files.trials(out):
        manifest = json.loads((trial / "manifest.json").read_text())
        assert manifest["launcher"] == "docker"
        assert manifest["image_id"] == cpu_image.image_id
        assert manifest["image_ref"] == cpu_image.image_id
        assert manifest["image_digest"] is None
        assert "never pushed" in manifest["empty_reasons"]["image_digest"]
        assert manifest["device"]["compat"]["status"] == "unknown"
        assert manifest["software"]["torch"] == "2.13.0+cpu"
        assert manifest["software"]["python"].startswith("3.11")


def test_containers_removed_logs_and_state_kept(docker_campaign: tuple[Path, str], docker_client: Any,
                                                files: Any) -> None:
    out, _ = docker_campaign
    for trial in files.trials(out):
        record = json.loads((trial / "launcher.json").read_text())
        assert record["state"]["ExitCode"] == 0 and record["state"]["OOMKilled"] is False
        assert record["user"] != "0:0" and not record["user"].startswith("root")
        assert (trial / "trial.log").stat().st_size > 0
        left = docker_client.containers.list(all=True, filters={"label": f"org.isocost.trial_dir={trial}"})
        assert left == [], "the trial's container was not removed"
        # Whatever the container wrote is given back to the trial directory's owner.
        owners = {p.stat().st_uid for p in [trial, *trial.iterdir()]}
        assert owners == {os.geteuid()}


def test_overhead_is_recorded(docker_campaign: tuple[Path, str], files: Any) -> None:
    out, _ = docker_campaign
    for row in files.rows(out):
        assert float(row["launch_overhead_s"]) > 0
        assert float(row["trial_s"]) > 0
