"""``isocost cost`` and ``isocost window``: the plan calculator and the calendar.

Thin commands: parse the options, call ``protocol.costing.plans`` / ``protocol.costing.calendar``,
render the result as text or sorted JSON.

Example: ``isocost cost --gpu rtx-4090 --days 7 --lots 2`` prints ``total: 220.00 USD …``.
"""

from __future__ import annotations

from pathlib import Path

import click

from protocol.costing.calendar import SCHEMA_VERSION as CALENDAR_SCHEMA_VERSION
from protocol.costing.calendar import OffsetChange, Window, access_window, format_hours, format_offset
from protocol.costing.catalog_file import load_catalog
from protocol.costing.coverage import Coverage, covering_plans
from protocol.costing.plans import (
    MAX_ACCEPTED_RESULTS,
    MAX_LOTS,
    PER_RESULT_DEFINED,
    PER_RESULT_UNDEFINED,
    PLAN_LENGTHS_DAYS,
    ROUNDING_NOTE,
    Quote,
    default_catalog_path,
    format_usd,
    quote,
)
from protocol.errors import UserError
from protocol.io import jsonio
from protocol.records import codec
from runner.cli.catalog import market_filter, market_options
from runner.decision.market.memo import pricing_lines
from runner.decision.market.pricing import price_market_job

_CHANGE_LABELS = {
    "dst_starts": "DST starts",
    "dst_ends": "DST ends",
    "standard_offset_change": "standard UTC offset changes",
}


@click.command()
@click.option("--gpu", required=True, help="GPU type as named in the catalog, e.g. rtx-4090.")
@click.option(
    "--days",
    default=None,
    type=click.Choice([str(days) for days in PLAN_LENGTHS_DAYS]),
    help="Plan length in days.",
)
@click.option("--lots", default=None, type=int, help="Number of lots rented (a positive integer).")
@click.option(
    "--accepted-results",
    type=int,
    default=None,
    help="Corpora actually completed, validated and not duplicated. Omit it until they exist: "
    "no per-result cost is printed then.",
)
@click.option(
    "--catalog",
    "catalog_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Your own dated catalog CSV (default: the snapshot shipped with isocost).",
)
@click.option("--json", "as_json", is_flag=True, help="Print sorted JSON (money as strings).")
@click.option("--hours", type=float, default=None, help="With --market: the hours the job needs.")
@click.option("--cards", type=int, default=1, show_default=True, help="With --market: the cards the job needs.")
@market_options
def cost(
    gpu: str,
    days: str | None,
    lots: int | None,
    accepted_results: int | None,
    catalog_path: Path | None,
    as_json: bool,
    hours: float | None,
    cards: int,
    market_paths: tuple[Path, ...],
    gpu_maps: tuple[Path, ...],
    providers: tuple[str, ...],
    regions: tuple[str, ...],
    capacity: str,
) -> None:
    """Price a flat rental plan from a dated catalog (the whole plan price is charged), or, with --market, a job
    of --hours on --cards cards on every provider, region and instance that sells the card (--gpu names it as the
    GPU map does, e.g. h100-sxm).

    \b
    Example: isocost cost --gpu rtx-4090 --days 7 --lots 2
    Example: isocost cost --gpu h100-sxm --hours 3 --market market-2026-12-03.csv --capacity on-demand
    """
    if market_paths:
        catalogs = [load_catalog(catalog_path if catalog_path is not None else default_catalog_path()),
                    *(load_catalog(path) for path in market_paths)]
        pricing = price_market_job(catalogs, gpu, hours, cards, accepted_results, gpu_maps,
                                   market_filter(providers, regions, capacity))
        click.echo(jsonio.dumps(codec.to_dict(pricing)) if as_json else "\n".join(pricing_lines(pricing)),
                   nl=not as_json)
        return
    if days is None or lots is None:
        raise UserError("--days and --lots are required (or --market with --hours)", "isocost cost",
                        "Price a flat plan: --gpu rtx-4090 --days 7 --lots 2; or a job across providers: "
                        "--gpu h100-sxm --hours 3 --market FILE.")
    if not 1 <= lots <= MAX_LOTS:
        raise UserError(
            f"--lots must be a positive whole number, got {lots}" if lots <= 0
            else f"--lots must be at most {MAX_LOTS:,}, got {_short(lots)}",
            "--lots",
            "Rent at least one lot, e.g. --lots 1." if lots <= 0 else f"Name at most {MAX_LOTS:,} lots of one plan.",
        )
    if accepted_results is not None and not 0 <= accepted_results <= MAX_ACCEPTED_RESULTS:
        raise UserError(
            f"--accepted-results must be 0 or more, got {accepted_results}" if accepted_results < 0
            else f"--accepted-results must be at most {MAX_ACCEPTED_RESULTS:,}, got {_short(accepted_results)}",
            "--accepted-results",
            "Count the corpora actually completed and validated, or leave the option out.",
        )
    catalog = load_catalog(catalog_path if catalog_path is not None else default_catalog_path())
    result = quote(catalog, gpu, int(days), lots, accepted_results)
    if as_json:
        click.echo(jsonio.dumps(codec.to_dict(result)), nl=False)
        return
    for line in _render_quote(result):
        click.echo(line)


@click.command()
@click.option(
    "--start",
    required=True,
    help="Start of the access window (rental setup), ISO 8601: 2026-11-02T09:00 or with an "
    "offset, 2026-11-02T09:00+01:00.",
)
@click.option("--end", required=True, help="End of the access window (artifacts collected), ISO 8601 like --start.")
@click.option("--tz", default=None, help="IANA time zone for times written without an offset, e.g. Europe/Paris.")
@click.option(
    "--fold",
    type=click.Choice(["0", "1"]),
    default=None,
    help="For a local time that happens twice (clocks fall back): 0 = first, 1 = second.",
)
@click.option("--json", "as_json", is_flag=True, help="Print sorted JSON.")
def window(start: str, end: str, tz: str | None, fold: str | None, as_json: bool) -> None:
    """Measure an access window on a real calendar and say which plan lengths cover it.

    \b
    Example: isocost window --start 2026-11-02T09:00 --end 2026-11-06T09:00 --tz Europe/Paris
    """
    try:
        measured = access_window(start, end, tz, None if fold is None else int(fold))
    except UserError as exc:  # the calendar names its arguments (start, end, tz, fold): here they are options
        where = f"--{exc.where}" if exc.where in ("start", "end", "tz", "fold") else exc.where
        raise UserError(exc.what, where, exc.fix) from None
    coverage = covering_plans(measured.elapsed_h, PLAN_LENGTHS_DAYS)
    if as_json:
        data = {
            "schema_version": CALENDAR_SCHEMA_VERSION,
            "window": codec.to_dict(measured),
            "coverage": codec.to_dict(coverage),
        }
        click.echo(jsonio.dumps(data), nl=False)
        return
    for line in _render_window(measured) + _render_coverage(coverage):
        click.echo(line)


def _short(number: int) -> str:
    """A number as text, cut after 40 digits (a 30-digit --lots is shown, a 4000-digit one is not)."""
    text = str(number)
    return text if len(text) <= 40 else f"{text[:40]}… ({len(text)} digits)"


def _render_quote(result: Quote) -> list[str]:
    plan = result.plan
    card_word = "card" if plan.cards_per_lot == 1 else "cards"
    gpu_word = "GPU" if result.cards == 1 else "GPUs"
    total = format_usd(result.total_usd)
    lines = [
        f"plan: {plan.gpu}, {plan.plan_days} days, {plan.cards_per_lot} {card_word} per lot, "
        f"{format_usd(plan.price_usd_per_lot)} USD per lot (catalog {plan.catalog_date})",
        f"source: {plan.source}",
        f"lots: {result.lots}",
        f"cards: {result.cards} {gpu_word}",
        f"total: {total} USD (whole plan price, charged in full even if the work ends early)",
    ]
    per_result = result.cost_per_validated_corpus_usd
    if result.per_result_state == PER_RESULT_DEFINED and per_result is not None:
        lines += [
            f"accepted results: {result.accepted_results}",
            f"cost per validated corpus: {format_usd(per_result)} USD "
            f"({total} USD / {result.accepted_results}, {ROUNDING_NOTE})",
        ]
    elif result.per_result_state == PER_RESULT_UNDEFINED:
        lines += [
            "accepted results: 0",
            "cost per validated corpus: undefined (no accepted corpus); "
            f"the spend of {total} USD still stands",
        ]
    return lines


def _render_window(measured: Window) -> list[str]:
    zone = measured.tz or "no time zone given: offsets as written"
    written = codec.to_dict(measured)
    start, end = written["start"], written["end"]
    lines = [
        f"window: {start} -> {end} ({zone})",
        f"real elapsed: {format_hours(measured.elapsed_h)} h (aware datetimes, UTC arithmetic)",
        f"wall clock: {format_hours(measured.wall_clock_h)} h",
    ]
    if not measured.dst_change:
        lines.append(
            "DST: no UTC offset change inside the window "
            f"({format_offset(measured.offset_start)} throughout)"
        )
    elif not measured.offset_changes:
        lines.append(
            f"DST: the offset differs ({format_offset(measured.offset_start)} at the start, "
            f"{format_offset(measured.offset_end)} at the end)"
        )
    lines += ["DST: " + _describe_change(change) for change in measured.offset_changes]
    difference = measured.elapsed_h - measured.wall_clock_h
    if difference:
        sign = "+" if difference > 0 else "-"
        lines.append(f"real elapsed differs from the wall clock by {sign}{format_hours(abs(difference))} h")
    lines += [f"note: {note}" for note in measured.notes]
    return lines


def _describe_change(change: OffsetChange) -> str:
    label = _CHANGE_LABELS.get(change.kind, change.kind)
    direction = "forward" if change.offset_after > change.offset_before else "back"
    return (
        f"{label} at {codec.to_dict(change)['at_utc']}: clocks go {direction} from "
        f"{change.wall_before:%Y-%m-%d %H:%M} to {change.wall_after:%H:%M} "
        f"({format_offset(change.offset_before)} -> {format_offset(change.offset_after)})"
    )


def _render_coverage(coverage: Coverage) -> list[str]:
    lines = []
    for fit in coverage.fits:
        head = f"{fit.plan_days}-day plan ({fit.plan_hours} h): "
        if fit.covers:
            lines.append(head + f"covers ({format_hours(fit.margin_h)} h to spare)")
        else:
            lines.append(head + f"does not cover (short by {format_hours(-fit.margin_h)} h)")
    lines.append(coverage.advice)
    return lines


COMMANDS = [cost, window]
