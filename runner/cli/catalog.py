"""``isocost catalog import``: public provider catalogs (SkyPilot's format) → a dated, sourced isocost catalog.

A thin command over :func:`protocol.costing.market_import.import_catalogs`: parse the options, import, print what
was read, skipped and written, per provider. The options shared by ``decide`` and ``cost`` to price across
providers (``--market``, ``--gpu-map``, ``--provider``, ``--region``, ``--capacity``) are declared here too.

Example: ``isocost catalog import ../shared/data/skypilot-catalog/catalogs/v7 --date 2026-12-03 --out market.csv``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import click

from protocol.costing.market import CAPACITIES, MarketFilter
from protocol.costing.market_import import Billing, import_catalogs
from protocol.costing.plans import BILLING_HOURLY, BILLING_PER_SECOND
from protocol.errors import UserError

#: A file option: checked by its reader (not found, a directory, a FIFO...) in the house form, naming the option.
_FILE = click.Path(path_type=Path)


def market_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that price across providers, for ``decide`` and ``cost``."""
    for option in reversed([
        click.option("--market", "market_paths", type=_FILE, multiple=True,
                     help="An imported market catalog (`isocost catalog import`); repeat for several. Every "
                          "configuration is then priced on every provider, region and instance that sells its card."),
        click.option("--gpu-map", "gpu_maps", type=_FILE, multiple=True,
                     help="Your own GPU map rows (card,memory_gib,driver_names,catalog_names,note), added to the "
                          "shipped map (a row naming a shipped card replaces it)."),
        click.option("--provider", "providers", multiple=True, help="Weigh only this provider's offers (repeat)."),
        click.option("--region", "regions", multiple=True, help="Weigh only offers in this region (repeat)."),
        click.option("--capacity", type=click.Choice(CAPACITIES), default="both", show_default=True,
                     help="On-demand, spot (interruptible) or both."),
    ]):
        command = option(command)
    return command


def market_filter(providers: tuple[str, ...], regions: tuple[str, ...], capacity: str) -> MarketFilter:
    """Example: ``market_filter(("lambda",), (), "on-demand").text``."""
    return MarketFilter(providers=tuple(providers), regions=tuple(regions), capacity=capacity)


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f"--date {text[:40]!a} is not a date", "--date",
                        "Give the day the snapshot was taken, as YYYY-MM-DD (e.g. 2026-12-03).") from None


def _seconds(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise UserError(f"{option} {text[:40]!a} is not a whole number of seconds", option,
                        "Give whole seconds: minimum 0 to 86400, increment 1 to 86400 (e.g. --minimum-s 60).") \
            from None


def _commits(values: tuple[str, ...]) -> dict[str, str]:
    commits = {}
    for value in values:
        provider, sep, commit = value.partition("=")
        if not sep or not provider or not commit:
            raise UserError(f"--commit {value[:60]!a} is not PROVIDER=COMMIT", "--commit",
                            "Write e.g. --commit lambda=11580132cea293395776b033c8533714d42abb4e.")
        commits[provider.strip()] = commit.strip().lower()
    return commits


@click.group()
def catalog() -> None:
    """Import public price catalogs of GPU providers as dated isocost catalogs.

    \b
    Example: isocost catalog import catalogs/v7 --date 2026-12-03 --out market-2026-12-03.csv
    """


@catalog.command("import")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--date", "taken", required=True,
              help="The day the snapshot was taken (YYYY-MM-DD): every row is dated with it, never with today.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The isocost catalog CSV to write.")
@click.option("--commit", "commits", multiple=True,
              help="PROVIDER=COMMIT: the upstream commit the provider's file was taken from (repeat per provider).")
@click.option("--provider", "providers", multiple=True, help="Import only this provider's folder (repeat).")
@click.option("--metadata", type=click.Path(path_type=Path), default=None,
              help="SkyPilot's common/metadata.csv (the cards' memory; default: the one beside the providers).")
@click.option("--billing", type=click.Choice([BILLING_HOURLY, BILLING_PER_SECOND]), default=BILLING_HOURLY,
              show_default=True, help="How the providers bill (the catalogs do not say).")
@click.option("--minimum-s", default=None, help="Minimum billed seconds (default: 3600 hourly, 60 per-second).")
@click.option("--increment-s", default=None, help="Billing step in seconds (default: 3600 hourly, 1 per-second).")
def import_command(source: Path, taken: str, out: Path, commits: tuple[str, ...], providers: tuple[str, ...],
                   metadata: Path | None, billing: str, minimum_s: str | None, increment_s: str | None) -> None:
    """Read provider catalogs in SkyPilot's format (a vms.csv, a provider folder, or catalogs/vN) and write one
    dated, sourced isocost catalog: one row per provider × instance type × region, with the cards per instance,
    the on-demand and spot prices per instance-hour (an empty spot price stays empty) and the card's memory.
    Malformed rows are refused with their file and line; every bad input is an ``Error:`` naming what, where and
    the fix (exit 2).

    \b
    Example: isocost catalog import catalogs/v7 --date 2026-12-03 --out market-2026-12-03.csv --commit lambda=11580132
    """
    hourly = billing == BILLING_HOURLY
    minimum, increment = _seconds(minimum_s, "--minimum-s"), _seconds(increment_s, "--increment-s")
    terms = Billing(billing, minimum if minimum is not None else (3600 if hourly else 60),
                    increment if increment is not None else (3600 if hourly else 1))
    report = import_catalogs(source, _date(taken), out, commits=_commits(commits), providers=providers,
                             billing=terms, metadata=metadata)
    for provider in report.providers:
        skipped = ", ".join(f"{count} {reason}" for reason, count in sorted(provider.skipped.items())) or "none"
        click.echo(f"{provider.provider}: {provider.path} (sha256 {provider.sha256}): {len(provider.offers)} GPU "
                   f"offers kept; skipped: {skipped}; repeated rows dropped: {provider.repeated_rows}")
        for text in provider.notes:
            click.echo(f"  note: {text}")
    click.echo(f"Wrote {report.out}: {report.rows_written} rows ({report.plans} plans: a row with a spot price is "
               f"two), dated {report.catalog_date.isoformat()}, billed {terms.billing} (minimum {terms.minimum_s} s, "
               f"step {terms.increment_s} s)")


COMMANDS = [catalog]
