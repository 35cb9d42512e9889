"""`isocost images` against the engine: list the lock; a stack whose base cannot be had fails clearly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.docker


def _cli() -> click.Group:
    from runner.cli.images import COMMANDS

    group = click.Group(commands={c.name: c for c in COMMANDS if c.name})
    return group


def test_list_shows_id_and_digest_status(cpu_image: Any, images_lock: Path) -> None:
    result = CliRunner().invoke(_cli(), ["images", "list", "--lock", str(images_lock)])
    assert result.exit_code == 0, result.output
    assert f"image ID     {cpu_image.image_id}" in result.output
    assert "(override)" in result.output


def test_gpu_stack_without_reachable_base_fails_clearly(docker_client: Any, tmp_path: Path) -> None:
    import docker.errors

    from protocol.errors import UserError
    from runner.images.build import build_image
    from runner.images.stacks import default_base, repo_root

    base = default_base("rocm", repo_root())
    try:
        docker_client.images.get(base)
        pytest.skip(f"{base} is present in this engine")
    except docker.errors.ImageNotFound:
        pass
    with pytest.raises(UserError) as caught:
        build_image("rocm", lock_path=tmp_path / "images.lock")
    assert "not present locally and could not be pulled" in caught.value.message
    assert "--base" in caught.value.message
    assert not (tmp_path / "images.lock").exists()


def test_gpu_access_refused_without_the_stack(docker_client: Any) -> None:
    from protocol.errors import UserError
    from runner.launch.daemon.gpu import gpu_options

    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime")
    with pytest.raises(UserError, match="NVIDIA Container Toolkit"):
        gpu_options("cuda", docker_client)
    if not Path("/dev/kfd").exists():
        with pytest.raises(UserError, match="/dev/kfd"):
            gpu_options("rocm", docker_client)


def test_gpu_facts_helper_script_runs_locked_down_in_the_trial_image(docker_client: Any, cpu_image: Any) -> None:
    """The script a remote ROCm engine runs to read its device groups and KFD topology: valid in the image's
    python3, as the image's non-root user with no network, a read-only root and no capabilities (here
    without GPU devices: the host has none, so both parts are empty unless it has an AMD card)."""
    import json

    from runner.launch.daemon.client import IMAGE_UID
    from runner.launch.daemon.gpu import GID_SCRIPT

    out = docker_client.containers.run(
        image=cpu_image.image_id, entrypoint=["python3"], command=["-c", GID_SCRIPT],
        user=f"{IMAGE_UID}:{IMAGE_UID}", network_mode="none", read_only=True, cap_drop=["ALL"],
        security_opt=["no-new-privileges"], remove=True, stdout=True, stderr=True)
    facts = json.loads(out.decode().strip().splitlines()[-1])
    assert set(facts) == {"gids", "topology"}
    if not Path("/sys/class/kfd/kfd/topology/nodes").exists():
        assert facts["topology"] == {}
