"""The launcher kinds' own options on the command line: ``--<kind>-<name>`` (``--slurm-partition`` …).

Each kind declares its options (:func:`runner.campaign.launcher_choice.launcher_options`); this
module turns them into click options on ``run`` and ``check`` and hands their values back by kind.

Example::

    @click.command()
    @launcher_flags
    def run(**values): choose_launcher(study, "slurm", options=launcher_values(values))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from runner.campaign.launcher_choice import launcher_options

F = TypeVar("F", bound=Callable[..., Any])


def _param(kind: str, name: str) -> str:
    return f"{kind}_{name.replace('-', '_')}"


def launcher_flags(command: F) -> F:
    """Add every kind's options (in declaration order) to a click command."""
    for kind, options in reversed(list(launcher_options().items())):
        for option in reversed(options):
            command = click.option(f"--{kind}-{option.name}", _param(kind, option.name), metavar=option.metavar,
                                   help=f"[--launcher {kind}] {option.help}", multiple=option.multiple,
                                   type=float if option.kind == "float" else str, default=None)(command)
    return command


def launcher_values(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pop the kinds' option values out of a command's keyword arguments: {kind: {name: value}}."""
    found: dict[str, dict[str, Any]] = {}
    for kind, options in launcher_options().items():
        found[kind] = {option.name.replace("-", "_"): values.pop(_param(kind, option.name), None)
                       for option in options}
    return found
