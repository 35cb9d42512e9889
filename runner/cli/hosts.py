"""``isocost hosts check``: which engines a multi-host campaign would run on, before it runs.

Thin: parse the hosts, call :func:`runner.hosts.parallel.check_hosts`, print one line per host.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from protocol.io.names import check_image_reference, terminal_text
from runner.hosts.check import check_hosts
from runner.hosts.spec import merge_hosts


@click.group()
def hosts() -> None:
    """Several hosts: check the Docker engines a multi-host campaign runs on (see docs/hosts.md)."""


@hosts.command("check")
@click.option("--host", "host_options", multiple=True, metavar="NAME=URL",
              help="A host: NAME=local, NAME=unix:///PATH/docker.sock or NAME=ssh://USER@HOST[:PORT] (repeatable).")
@click.option("--hosts-file", "hosts_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="TOML list of hosts (name, url, stack, rental, ssh_config).")
@click.option("--stack", type=click.Choice(["cpu", "cuda", "rocm"]), default=None,
              help="Also check that every host can run this stack (hosts-file stacks win).")
@click.option("--image", default="", metavar="REF",
              help="GPU stacks: the trial image to probe the GPU with (default: the stack's entry in images.lock).")
@click.option("--require-gpu", is_flag=True,
              help="GPU stacks: a host whose GPU could not be probed (no image yet) is unusable too.")
def check(host_options: tuple[str, ...], hosts_file: Path | None, stack: str | None, image: str,
          require_gpu: bool) -> None:
    """Connect to every host's engine at once and say what answers: engine ID, version, machine.

    Exits with status 3 when a host is unusable (the line says why: ssh's or
    the engine's own words). For --stack cuda or rocm, once an image of that
    stack is known, one tiny container of it must see the GPU (driver checked
    against the shipped CUDA table or ROCm matrix, a small computation on the
    device); that image may be pulled. Nothing else is shipped or run.

    \b
    Example: isocost hosts check --host local=local --host b200=ssh://ubuntu@203.0.113.7
    Example: isocost hosts check --host local=local --stack cuda --require-gpu
    """
    image = check_image_reference(image, "--image") if image else image
    hosts_list = merge_hosts(host_options, hosts_file)
    if not hosts_list:
        raise click.UsageError("name at least one host (--host NAME=URL or --hosts-file FILE)")
    results = check_hosts(hosts_list, stack or "", image=image, require_gpu=require_gpu)
    width = max(len(r.name) for r in results)
    bad = 0
    for result in results:  # what a remote engine or ssh says is printed escaped: it cannot rewrite the terminal
        if result.problem:
            bad += 1
            click.echo(terminal_text(f"{result.name:<{width}}  UNUSABLE  {result.url}: {result.problem}"))
            continue
        facts = result.identity
        click.echo(terminal_text(
            f"{result.name:<{width}}  ok        {result.url}: engine {facts['engine_id']}, Docker "
            f"{facts['engine_version']} on {facts['name']} ({facts['os']}, {facts['cpus']} CPUs, "
            f"{facts['memory_bytes'] / 2**30:.1f} GiB, runtimes {', '.join(facts['runtimes'])})"))
        if result.gpu:
            click.echo(terminal_text(f"{'':<{width}}  gpu       {result.gpu}"))
    if bad:
        sys.exit(3)


COMMANDS = [hosts]
