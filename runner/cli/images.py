"""``isocost images``: lock, build, push and list the pinned trial images (thin over runner.images.build)."""

from __future__ import annotations

from pathlib import Path

import click

from protocol.io.names import check_image_reference
from runner.images.build import build_image, push_image
from runner.images.lock import default_lock_path, list_images
from runner.images.requirements import lock_requirements
from runner.images.stacks import STACKS

_STACK = click.Choice(sorted(STACKS))


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _lock_option(function: click.decorators.FC) -> click.decorators.FC:
    return click.option("--lock", "lock_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
                        help="The images lock to read and update (default: images/images.lock, or "
                             "$ISOCOST_IMAGES_LOCK).")(function)


@click.group()
def images() -> None:
    """Pinned trial images: one per stack (cpu, cuda, rocm), each embedding the runner.

    Every image is recorded in images/images.lock by image ID (sha256 of its
    config, local) and, after a push, by repo digest (REPO@sha256:…, what
    another host pulls to replay a trial exactly).
    """


@images.command("lock")
@click.option("--stack", type=_STACK, required=True, help="Which image's Python dependencies to resolve.")
def lock_command(stack: str) -> None:
    """Resolve images/STACK/requirements.in into requirements.lock (exact versions, sha256 hashes).

    The wheels it names are downloaded into the stack's wheelhouse; builds
    install only from there, without any index.

    Example: isocost images lock --stack cpu
    """
    path = lock_requirements(stack, progress=_progress)
    click.echo(str(path))


@images.command("build")
@click.option("--stack", type=_STACK, required=True, help="Which image to build.")
@click.option("--base", "base", metavar="IMAGE", default=None,
              help="Build on this base instead of the Dockerfile's pinned one (air-gapped hosts, CI); recorded.")
@click.option("--no-cache", is_flag=True, help="Ignore the engine's layer cache.")
@_lock_option
def build_command(stack: str, base: str | None, no_cache: bool, lock_path: Path | None) -> None:
    """Build the STACK image from its pinned base and hashed lock; record it in the images lock.

    Example: isocost images build --stack cpu --base isocost-base/bookworm:local
    """
    base = check_image_reference(base, "--base") if base is not None else None
    record = build_image(stack, base, lock_path=lock_path, no_cache=no_cache, progress=_progress)
    click.echo(f"{record.stack}: image ID {record.image_id} ({record.tag}, {record.size_bytes / 1e9:.2f} GB, "
               f"built in {record.build_s:.1f} s on {record.base})")


@images.command("push")
@click.option("--stack", type=_STACK, required=True, help="Which locked image to push.")
@click.option("--registry", required=True, metavar="HOST[:PORT]", help="Registry to push to, e.g. 127.0.0.1:5000.")
@_lock_option
def push_command(stack: str, registry: str, lock_path: Path | None) -> None:
    """Push the locked STACK image and record its repo digest (REPO@sha256:…).

    Example: isocost images push --stack cpu --registry 127.0.0.1:5000
    """
    record = push_image(stack, registry, lock_path=lock_path, progress=_progress)
    click.echo(f"{record.stack}: repo digest {record.repo_digest} (image ID {record.image_id})")


@images.command("list")
@_lock_option
def list_command(lock_path: Path | None) -> None:
    """Show the images lock: per stack, image ID, repo digest, base and build facts.

    Example: isocost images list
    """
    path = lock_path or default_lock_path()
    records = list_images(path)
    if not records:
        click.echo(f"no images in {path} (build one: isocost images build --stack cpu)")
        return
    for record in records:
        base = record.base + (" (override)" if record.base_override else "")
        click.echo(f"{record.stack}")
        click.echo(f"  image ID     {record.image_id}")
        click.echo(f"  repo digest  {record.repo_digest or '- (not pushed)'}")
        click.echo(f"  run by       {record.image_ref}")
        click.echo(f"  tag          {record.tag}")
        click.echo(f"  base         {base}")
        click.echo(f"  base digest  {record.base_digest} ({record.base_digest_kind})")
        click.echo(f"  revision     {record.revision}")
        click.echo(f"  built        {record.built_at} in {record.build_s:.1f} s, {record.size_bytes / 1e9:.2f} GB")


COMMANDS = [images]
