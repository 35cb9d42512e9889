"""``--launcher KIND`` and the kinds' own options on the command line: ``--<kind>-<name>`` (``--slurm-partition`` …).

The kinds are found by name (:func:`runner.launch.launcher.launcher_kinds`); this module turns them into the
``--launcher`` choice of ``run``, ``check`` and ``replay`` (with each kind's help line), into click options
for each kind's options, and hands their values back by kind. No kind is named here.

Example::

    @click.command()
    @launcher_choice("run")
    @launcher_flags
    def run(launcher_kind, **values): choose_launcher(study, launcher_kind, options=launcher_values(values))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from protocol.errors import UserError
from runner.campaign.launcher_choice import launcher_options
from runner.launch.launcher import kind_names, launcher_kinds

F = TypeVar("F", bound=Callable[..., Any])

#: What ``--launcher`` adds to each command's help, before the kinds' own lines.
_LEADS = {
    "run": "auto: the first kind that can run the study here ({auto}), with a notice when it is not the first.",
    "check": "Check the launcher `isocost run` would use with the same --launcher. auto: the first kind that can "
             "run the study here ({auto}).",
    "replay": "original: the launcher the trials ran with (the exact image digest for containers); another kind "
              "runs them its own way (a local process is reported as not exact).",
}


class KindChoice(click.Choice):  # type: ignore[type-arg]
    """The launcher kinds found when the command runs (those of ISOCOST_LAUNCHERS_PATH included)."""

    def __init__(self, replay: bool = False) -> None:
        self.replay = replay
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return kind_names(auto=not self.replay, replay=self.replay)

    @choices.setter
    def choices(self, value: Any) -> None:
        return None


def launcher_help(command: str) -> str:
    """The ``--launcher`` help of a command: how ``auto`` (or ``original``) chooses, then one line per kind."""
    try:
        kinds = launcher_kinds()
    except UserError as exc:  # a broken ISOCOST_LAUNCHERS_PATH folder: the command says so (Error: …) when it runs
        return f"The launcher kind (none can be listed now: {exc.what})."
    auto = ", else ".join(k.name for k in sorted(kinds.values(), key=lambda k: k.auto_order) if k.auto)
    shown = [k for k in kinds.values() if k.replay_choice] if command == "replay" else list(kinds.values())
    return " ".join([_LEADS[command].format(auto=auto), *(f"{k.name}: {k.help}." for k in shown)])


def launcher_choice(command: str) -> Callable[[F], F]:
    """The ``--launcher`` option of ``run``, ``check`` or ``replay`` (value: ``launcher_kind``)."""
    replay = command == "replay"
    return click.option("--launcher", "launcher_kind", type=KindChoice(replay=replay),
                        default="original" if replay else "auto", show_default=True, help=launcher_help(command))


def _param(kind: str, name: str) -> str:
    return f"{kind}_{name}".replace("-", "_")


def launcher_flags(command: F) -> F:
    """Add every kind's options (in declaration order) to a click command (none while the kinds cannot be listed:
    the command then says why when it runs)."""
    try:
        every = launcher_options()
    except UserError:
        every = {}
    for kind, options in reversed(list(every.items())):
        for option in reversed(options):
            command = click.option(f"--{kind}-{option.name}", _param(kind, option.name), metavar=option.metavar,
                                   help=f"[--launcher {kind}] {option.help}", multiple=option.multiple,
                                   type=float if option.kind == "float" else str, default=None)(command)
    return command


def launcher_values(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pop the kinds' option values out of a command's keyword arguments: {kind: {name: value}}."""
    found: dict[str, dict[str, Any]] = {}
    for kind, options in launcher_options().items():
        found[kind] = {option.name.replace("-", "_"): values.pop(_param(kind, option.name), None) for option in options}
    return found


def refuse_with_hosts(kind: str, options: dict[str, dict[str, Any]]) -> None:
    """``--host`` runs Docker engines: refuse a kind (chosen, or given options) that says it cannot run there."""
    for name, described in launcher_kinds().items():
        given = any(value not in (None, ()) for value in options.get(name, {}).values())
        if described.hosts and (name == kind or given):
            raise UserError(described.hosts, f"--host with --launcher {name}",
                            f"Drop --host/--hosts-file, or --launcher {name} and its --{name}-* options.")
