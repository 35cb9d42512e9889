"""The ``isocost`` command line: thin click commands over the library.

Each command group lives in its own module; this module only assembles them.
"""

from __future__ import annotations

import io
import sys

import click

from protocol import __version__
from protocol.errors import UserError
from protocol.io.names import terminal_text


class IsocostGroup(click.Group):
    """Turns a ``UserError`` into ``Error: …`` and exit status 2; bugs keep their tracebacks."""

    def invoke(self, ctx: click.Context) -> object:
        for stream in (sys.stdout, sys.stderr):  # a path from undecodable bytes is printed escaped, never a crash
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        try:
            return super().invoke(ctx)
        except UserError as exc:
            # A message may quote what a hostile input held (a lone surrogate, an ANSI escape, a carriage
            # return): shown escaped, never a traceback, never a rewritten terminal.
            message = terminal_text(exc.message.encode("utf-8", "backslashreplace").decode("utf-8"))
            click.echo(f"Error: {message}", err=True)
            sys.exit(2)


@click.group(cls=IsocostGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="isocost")
def main() -> None:
    """Which configuration gives the same accepted ML result for the least money?

    A study file fixes the question, the corpus, the quality rule and the
    variants before anything is timed. `isocost run` executes every trial in a
    fresh process or container, in rotated order, and keeps every attempt.
    `validate`, `summarize`, `cost`, `window` and `decide` turn the results
    into an auditable answer.

    \b
    Your own data, from corpus and checkpoint to a decision:
      isocost init reports.jsonl weather-model --tuning reports-tuning.jsonl --out study.toml
      isocost tune study.toml
      isocost check study.toml --probe
      isocost run study.toml --out results/mine
      isocost rental results/mine --gpu rtx-4090 --lots 1
      isocost decide results/mine
    """


def _register() -> None:
    from runner.cli import bundle, campaign, catalog, cost, decide, demo, hosts, images, memory, own, selfcheck

    for module in (own, campaign, cost, decide, catalog, demo, images, memory, bundle, hosts, selfcheck):
        for command in module.COMMANDS:
            main.add_command(command)


_register()
