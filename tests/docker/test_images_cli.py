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
    from runner.launch.gpu import gpu_options

    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime")
    with pytest.raises(UserError, match="NVIDIA Container Toolkit"):
        gpu_options("cuda", docker_client)
    if not Path("/dev/kfd").exists():
        with pytest.raises(UserError, match="/dev/kfd"):
            gpu_options("rocm", docker_client)
