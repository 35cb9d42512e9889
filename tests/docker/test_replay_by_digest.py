"""Push, forget the local image, pull by digest, replay one trial: identical predictions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.docker
#: It removes the local engine's cpu image: the tests using it on other workers wait (tests/image_lock.py).
REMOVES_CPU_IMAGE = True


def test_push_pull_by_digest_and_replay(cpu_image: Any, images_lock: Path, registry: str, docker_client: Any,
                                        files: Any,
                                        workspace: Any, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import docker.errors

    from runner.campaign.run import run_campaign
    from runner.cli import main
    from runner.images.build import push_image
    from runner.images.lock import read_lock
    from runner.launch.kinds.docker.launcher import DockerLauncher

    monkeypatch.delenv("ISOCOST_FAULT_INJECT", raising=False)
    # A first run by image ID, before any push.
    first = tmp_path / "first"
    run_campaign(workspace.study("replay", batches="[4]"), first, DockerLauncher(cpu_image.image_id, stack="cpu"))

    record = push_image("cpu", registry, lock_path=images_lock)
    assert record.repo_digest.startswith(f"{registry}/isocost/cpu@sha256:")
    assert record.image_id == cpu_image.image_id  # the image ID does not change with a push
    assert read_lock(images_lock)["cpu"].repo_digest == record.repo_digest

    # Forget the image (keeping the build cache's parent layers), then replay by digest only.
    docker_client.images.remove(record.image_id, force=True, noprune=True)
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(record.image_id)
    second = tmp_path / "second"
    result = CliRunner().invoke(main, ["run", str(workspace.study("replay")), "--out", str(second),
                                       "--launcher", "docker", "--image", record.repo_digest])
    assert result.exit_code == 0, result.output
    assert docker_client.images.get(record.repo_digest).id == record.image_id  # pulled: the same config digest

    [row] = files.rows(second)
    assert row["status"] == "ok", row["notes"]
    assert row["image_id"] == record.image_id
    assert row["image_digest"] == record.repo_digest
    [trial] = files.trials(second)
    manifest = json.loads((trial / "manifest.json").read_text())
    assert manifest["image_ref"] == record.repo_digest
    assert manifest["image_digest"] == record.repo_digest
    assert manifest["image_id"] == record.image_id

    [before] = files.trials(first)
    old = [json.loads(line) for line in (before / "predictions.jsonl").read_text().splitlines()]
    new = [json.loads(line) for line in (trial / "predictions.jsonl").read_text().splitlines()]
    assert len(new) == 12
    assert new == old  # same ids, labels and scores, bit for bit
