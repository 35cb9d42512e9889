"""``isocost decide`` and ``isocost period``: the decision over campaigns, and one campaign's measured period.

Thin commands: parse the options, call ``runner.decision.stage`` (decide) or ``runner.decision.period_report``
(period), print the memo, JSON or CSV.

Example: ``isocost decide results/rtx4090 results/b200 --expenses ledger.csv --out decisions/q4`` prints the memo
and writes ``decisions/q4/decision.md``, ``decision.json`` and ``report.html``.
"""

from __future__ import annotations

from pathlib import Path

import click

from protocol.decision.rank import Decision
from protocol.decision.serving import serving_demand
from protocol.io import jsonio
from protocol.records import codec
from runner.bundle.replay_read import refuse_replay_reference, replays_loader, split_replays
from runner.cli.catalog import market_filter, market_options
from runner.decision.market.pricing import MarketOptions
from runner.decision.offline.unanswered import UNANSWERED_EXIT, unanswered
from runner.decision.period_report import campaign_period, render_period
from runner.decision.render.csv_table import render_csv, render_serving_csv
from runner.decision.render.matrix import matrix_csv, matrix_text
from runner.decision.stage import DECISION_JSON, DECISION_MD, DecideOutcome, run_compare, run_decide

_DIR = click.Path(path_type=Path, file_okay=False, exists=True)
_FILE = click.Path(path_type=Path, dir_okay=False)


_DECIDE_HELP = """Which acceptable configuration is cheapest before the deadline? Combine campaigns of ONE study.

A configuration is one variant on one campaign's hardware. For each: the
quality verdict, raw pass times, accepted artifacts (each corpus counted
once), the measured campaign period, the plans covering it, the contracted
cost (whole plan price) and the cost per validated corpus, the deadline
fit and the failures. Results of different studies are refused.

Equivalence is judged twice: within each campaign against its own run
of the reference variant, and across campaigns against ONE reference
configuration (--reference DIR, default the first DIR), by id on every
accepted pass, with the study's rule; a configuration that is not
equivalent to that one reference is not ranked.

With a [job] table in the study, the job is projected from the measured
batches and priced under every billing option of the catalog.

With --market CATALOG (imported by `isocost catalog import`), every
configuration is also priced on every provider, region and instance that
sells its card (the card the trials recorded, mapped by the GPU map):
the memo names the cheapest provider and instance, the runner-up, and
how much the provider changes the cost against the configuration. A
decision priced with catalogs of other dates is never overwritten: the
new one is written beside it.

A server study's campaigns (scenario = "server") are decided for the
traffic declared with --peak-qps, --hours-per-day and --days: each
configuration's capacity (the highest declared rate at which every kept
run had accepted answers, LoadGen VALID and the bound met), the replicas
the peak needs, their cost over the period under the catalog's billing
options, and the cost per million requests; only configurations with
accepted answers and a capacity are ranked. --format csv prints one row
per configuration (capacity, replicas, lots, cost, per million requests
and output tokens; an empty cell has its reason beside it); --expenses
is shown apart, and --reference DIR names the campaign whose reference
variant every configuration is compared with by id, as for an offline
study. --market prices each configuration's replicas for the whole
period on every provider that sells its card, with the cost per million
requests. Replay directories are refused for it.

It writes nothing into the campaigns it reads; --out DIR writes
decision.md, decision.json and report.html there.

\b
Exit status: 0 the memo is written and names a choice; 3 the memo (and,
with --out, decision.json and report.html) is written and answers no:
no configuration is chosen (none accepted, no plan or rental known for
its hardware, the deadline out of reach, no pass yet: its "Why not"
lines say which), no configuration can do the declared job, or
nothing fits: no plan covers the declared job on any configuration
(why, and what would cover it: more lots, another billing, a longer
period); 2 an error (nothing written).

\b
Example: isocost decide results/rtx4090 results/b200 --expenses ledger.csv --out decisions/q4
Example: isocost decide results/rtx4090 --market market-2026-12-03.csv --capacity on-demand
Example: isocost decide results/rtx4090 results/b200 --format csv > decision.csv
Example: isocost decide results/serve --peak-qps 40 --hours-per-day 8 --days 30
Example: isocost decide results/serve --peak-qps 40 --hours-per-day 8 --days 30 --format csv > serving.csv
"""


@click.command(help=_DECIDE_HELP)
@click.argument("dirs", nargs=-1, required=True, type=_DIR)
@click.option("--expenses", "expenses", type=_FILE, default=None,
              help="Ledger CSV of other project expenses (date,description,amount_usd,evidence); shown apart, "
                   "never added to a configuration's cost.")
@click.option("--catalog", "catalog_path", type=_FILE, default=None,
              help="Your own dated plan catalog CSV (default: the study's [costing] catalog, else the shipped "
                   "snapshot).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write decision.md, decision.json and report.html here (never inside a DIR it reads; without "
                   "--out nothing is written).")
@click.option("--json", "as_json", is_flag=True, help="Print decision.json instead of the memo.")
@click.option("--reference", "reference", type=_DIR, default=None,
              help="The campaign whose run of the study's reference variant is the ONE reference every "
                   "configuration of every campaign is compared with by id (default: the first DIR).")
@click.option("--allow-inconsistent", is_flag=True,
              help="Forensics: weigh campaign directories that fail the evidence checks anyway; the output then "
                   "says so on its first line.")
@click.option("--format", "output_format", type=click.Choice(["md", "json", "csv"]), default=None,
              help="What to print: the memo (md, default), decision.json (json), or one CSV row per configuration "
                   "(csv, for spreadsheets: campaign cost, projected job hours and cost, P(fits), Pareto, energy; "
                   "a server study: capacity, replicas, lots, cost, per million requests and output tokens).")
@click.option("--peak-qps", "peak_qps", type=float, default=None,
              help="A server study: the peak rate to serve, queries per second (with --hours-per-day and --days).")
@click.option("--hours-per-day", "hours_per_day", type=float, default=None,
              help="A server study: hours a day at the peak rate (above 0, at most 24).")
@click.option("--days", "days", type=int, default=None,
              help="A server study: the period the replicas are rented for, in days.")
@market_options
def decide(dirs: tuple[Path, ...], expenses: Path | None, catalog_path: Path | None, out: Path | None,
           as_json: bool, output_format: str | None, allow_inconsistent: bool, reference: Path | None,
           peak_qps: float | None, hours_per_day: float | None, days: int | None,
           market_paths: tuple[Path, ...], gpu_maps: tuple[Path, ...], providers: tuple[str, ...],
           regions: tuple[str, ...], capacity: str) -> None:
    refuse_replay_reference(reference, "decide")
    campaigns, replays = split_replays(list(dirs))
    market = MarketOptions(tuple(market_paths), tuple(gpu_maps), market_filter(providers, regions, capacity)) \
        if market_paths else None
    given = (peak_qps, hours_per_day, days)
    demand = serving_demand(*given) if any(value is not None for value in given) else None
    outcome = run_decide(campaigns, catalog_path=catalog_path, expenses_path=expenses, out=out,
                         allow_inconsistent=allow_inconsistent, reference=reference,
                         extra=replays_loader(replays), market=market, demand=demand)
    if outcome.serving is not None:
        _show_serving(outcome, output_format, as_json)
        return
    _show(outcome, output_format, as_json)
    assert outcome.decision is not None
    _exit_if_unanswered(outcome.decision, _say_written(outcome), memo_shown=output_format in (None, "md")
                        and not as_json)


def _show_serving(outcome: DecideOutcome, output_format: str | None, as_json: bool) -> None:
    """Print a server study's decision (memo, JSON or CSV); exit 3 when it chooses nothing."""
    assert outcome.serving is not None
    if output_format == "csv":  # the fault hook's flag is in the CSV's not_a_measurement column
        click.echo(render_serving_csv(outcome.serving), nl=False)
    else:
        click.echo(outcome.texts[DECISION_JSON if as_json or output_format == "json" else DECISION_MD], nl=False)
    memo_path = _say_written(outcome)
    if outcome.serving.chosen is None:
        where = memo_path if memo_path is not None else "the memo"
        click.echo(f"No configuration chosen ({where} says why).", err=True)
        raise SystemExit(UNANSWERED_EXIT)


def _show(outcome: DecideOutcome, output_format: str | None, as_json: bool) -> None:
    """Print the decision in the format asked for."""
    assert outcome.decision is not None
    if output_format == "csv":
        click.echo(render_csv(outcome.decision), nl=False)
    elif as_json or output_format == "json":
        for banner in outcome.decision.inconsistent or ():  # the fault hook's flag is in the JSON (test_hooks)
            click.echo(banner)
        click.echo(outcome.texts[DECISION_JSON], nl=False)
    else:
        click.echo(outcome.texts[DECISION_MD], nl=False)


def _say_written(outcome: DecideOutcome) -> Path | None:
    """Say on stderr what was written under --out (the memo's path), or that nothing was."""
    if not outcome.written:
        click.echo("Nothing written (decide never writes into the campaigns it reads): pass --out DIR to write "
                   "decision.md, decision.json and report.html there.", err=True)
        return None
    json_path, memo_path, report_path = outcome.written
    click.echo(f"Wrote {memo_path}, {json_path} and {report_path}", err=True)
    return memo_path


def _exit_if_unanswered(decision: Decision, memo_path: Path | None, memo_shown: bool) -> None:
    """Exit 3 (after the memo is printed, and written under --out) when the memo answers no (:func:`unanswered`):
    nothing chosen, or nothing fits the declared job."""
    reason = unanswered(decision)
    if not reason:
        return
    where = memo_path if memo_path is not None else "the memo above" if memo_shown else \
        "the memo (printed without --format or --json)"
    why = "says why and what would cover it" if reason.startswith("Nothing fits") else "says why"
    click.echo(f"{reason} ({where} {why}).", err=True)
    raise SystemExit(UNANSWERED_EXIT)


@click.command()
@click.argument("dirs", nargs=-1, required=True, type=_DIR)
@click.option("--reference", "reference", type=_DIR, default=None,
              help="The campaign whose run of the study's reference variant is the reference (default: the first "
                   "DIR).")
@click.option("--json", "as_json", is_flag=True, help="Print the matrix as sorted JSON.")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="text, json (as decision.json's agreement) or csv (one row per pair).")
@click.option("--allow-inconsistent", is_flag=True,
              help="Forensics: compare campaign directories that fail the evidence checks anyway; the output then "
                   "says so on its first line.")
def compare(dirs: tuple[Path, ...], reference: Path | None, as_json: bool, output_format: str,
            allow_inconsistent: bool) -> None:
    """Do the campaigns give the same result? Every configuration against every other, by id, no pricing.

    For each pair of configurations (a variant on one campaign's hardware):
    the share of ids with equal outputs (labels for classification), the
    metric difference, and the ids that differ with a few examples; for each
    configuration, how its own repetitions agree; and which configurations
    are equivalent to the one reference under the study's rule (what decide
    then ranks). A DIR may be an `isocost replay` directory: its reruns are
    compared like another configuration.

    \b
    Example: isocost compare results/h200 results/rtx4090
    Example: isocost compare results/h200 results/rtx4090 --reference results/rtx4090 --format csv
    """
    refuse_replay_reference(reference, "compare")
    campaigns, replays = split_replays(list(dirs))
    matrix, banners = run_compare(campaigns, reference=reference, allow_inconsistent=allow_inconsistent,
                                  extra=replays_loader(replays))
    for banner in banners:
        click.echo(banner)
    if as_json or output_format == "json":  # the fault hook's flag is in the JSON (flags), and in the CSV's column
        click.echo(jsonio.dumps(codec.to_dict(matrix)), nl=False)
    elif output_format == "csv":
        click.echo(matrix_csv(matrix), nl=False)
    else:
        click.echo("".join(f"{flag}\n" for flag in matrix.flags or ()) + matrix_text(matrix), nl=False)


@click.command()
@click.argument("campaign_dir", type=_DIR)
@click.option("--catalog", "catalog_path", type=_FILE, default=None,
              help="Your own dated plan catalog CSV (default: the study's [costing] catalog, else the shipped "
                   "snapshot).")
@click.option("--json", "as_json", is_flag=True, help="Print sorted JSON.")
@click.option("--allow-inconsistent", is_flag=True,
              help="Forensics: read a campaign directory that fails the evidence checks anyway; the output then "
                   "says so on its first line.")
def period(campaign_dir: Path, catalog_path: Path | None, as_json: bool, allow_inconsistent: bool) -> None:
    """The campaign period, measured from its timestamps, beside the plans that cover it.

    Used time runs from set-up to the last trial (overlaps counted once), plus
    the waiting the study declares; every component says where it comes from.

    \b
    Example: isocost period results/quick
    """
    report = campaign_period(campaign_dir, catalog_path, allow_inconsistent)
    if as_json:
        if report.inconsistent:
            click.echo(report.inconsistent)
        click.echo(jsonio.dumps(codec.to_dict(report)), nl=False)
        return
    for line in render_period(report):
        click.echo(line)


COMMANDS = [decide, compare, period]
