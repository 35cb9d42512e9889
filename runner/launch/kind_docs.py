"""The tables of docs/launchers.md, generated from what each launcher kind says of itself.

``python -m runner.launch.kind_docs`` prints them; ``tests/cli/test_launcher_docs.py`` fails when the page
differs from the kinds found (built-in ones only: a folder in ``ISOCOST_LAUNCHERS_PATH`` is a user's own).

Example::

    print(kinds_table())   # | kind | where each trial runs | scenarios | `auto` | `--host` | replay | keys |
"""

from __future__ import annotations

from dataclasses import fields

from runner.launch.launcher import LauncherKind, launcher_kinds


def _auto(kind: LauncherKind, kinds: list[LauncherKind]) -> str:
    order = sorted((k for k in kinds if k.auto is not None), key=lambda k: k.auto_order)
    return f"{order.index(kind) + 1} of {len(order)}" if kind in order else "never"


def kinds_table() -> str:
    """One row per kind: its help, the study scenarios it runs, its place in ``auto``, ``--host``, replay and its
    launcher.json keys."""
    kinds = list(launcher_kinds().values())
    lines = ["| kind | where each trial runs | scenarios | `auto` asks it | `--host` | `replay --launcher` | "
             "launcher.json keys |",
             "|---|---|---|---|---|---|---|"]
    for kind in kinds:
        keys = ", ".join(f"`{f.name}`" for f in fields(kind.record))
        hosts = f"no: {kind.hosts}" if kind.hosts else "yes"
        scenarios = ", ".join(f"`{name}`" for name in kind.scenarios)
        lines.append(f"| `{kind.name}` | {kind.help} | {scenarios} | {_auto(kind, kinds)} | {hosts} | "
                     f"{'yes' if kind.replay_choice else 'no'} | {keys} |")
    return "\n".join(lines)


def options_table() -> str:
    """One row per option of every kind: ``--<kind>-<name> METAVAR`` and its help."""
    lines = ["| option | kind | help |", "|---|---|---|"]
    for kind in launcher_kinds().values():
        for option in kind.options:
            repeat = " (repeatable)" if option.multiple and "repeatable" not in option.help else ""
            lines.append(f"| `--{kind.name}-{option.name} {option.metavar}` | `{kind.name}` | "
                         f"{option.help.replace('|', '/')}{repeat} |")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m runner.launch.kind_docs > the tables to paste into docs/launchers.md
    print(kinds_table())
    print()
    print(options_table())
