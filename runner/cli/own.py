"""Your own data to a first decision: ``init``, ``tune``, ``check``, ``rental``.

Thin commands over :mod:`runner.own.init`, :mod:`runner.own.tune`, :mod:`runner.own.check` and
:mod:`runner.campaign_dir.rentals`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from protocol.costing.plans import MAX_LOTS
from protocol.io.names import check_gpu_name, check_plain_text
from protocol.study.model import STACKS
from protocol.study.tuning import MIN_TUNING_INPUTS, WORST_CASE_INPUTS
from protocol.tasks import all_tasks, task_names
from protocol.tasks.base import InitOption
from runner.campaign_dir.rentals import RENTALS_FILE, record_rental
from runner.cli.launcher_flags import launcher_choice, launcher_flags, launcher_values

_FILE = click.Path(path_type=Path, dir_okay=False)
TASKS = task_names()


def _task_options(command: Callable[..., None]) -> Callable[..., None]:
    """Every found task's own options of ``isocost init`` (``Task.init.options``), each once."""
    seen: dict[str, InitOption] = {}
    for option in (o for task in all_tasks() for o in task.init.options):
        seen.setdefault(option.flag, option)
    for option in reversed(seen.values()):
        kind: Any = {"integer": int, "file": click.Path(path_type=Path, dir_okay=False, exists=True)}.get(
            option.kind, click.Choice(option.choices) if option.choices else str)
        default = "" if option.default is None else f" (default: {option.default})"
        command = click.option(option.flag, option.key, type=kind, default=None, help=option.help + default)(command)
    return command


@click.command()
@click.argument("corpus", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("model", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--tuning", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="Separate tuning split (default: 20% of CORPUS is held out into CORPUS.tuning.jsonl, the rest "
                   "written to CORPUS.final.jsonl, next to --out).")
@click.option("--out", type=_FILE, default=Path("study.toml"), show_default=True, help="The study file to write.")
@click.option("--stack", type=click.Choice(STACKS), default="cpu", show_default=True,
              help="Batch and precision series suited to this stack.")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@click.option("--task", type=click.Choice(TASKS), default=TASKS[0], show_default=True,
              help="What each input yields: " + "; ".join(
                  f"{t.name}: {t.docs['yields']} ({t.docs['model']})".replace("`", "") for t in all_tasks())
              + " (docs/tasks.md).")
@_task_options
def init(corpus: Path, model: Path, tuning: Path | None, out: Path, stack: str, force: bool, task: str,
         **task_options: Any) -> None:
    """Write a complete, commented study for your own CORPUS and checkpoint MODEL.

    Computes the fingerprints, length buckets from the model's tokenizer
    (with counts), checks the corpus labels against the model's id2label (or,
    for sentence embeddings, the query sets against the corpora) and writes
    every key with its default and meaning. With --task text-generation: a
    causal LM, the [generation] table and its rule. Each task's own options
    are its own (docs/tasks.md).

    \b
    Example: isocost init reports.jsonl weather-model --tuning reports-tuning.jsonl --out study.toml
    Example: isocost init docs.jsonl encoder --task sentence-embedding --queries queries.jsonl
    """
    from runner.own.init import init_study

    report = init_study(corpus, model, out=out, tuning=tuning, stack=stack, force=force, task=task,
                        options=task_options)
    for path in report.written:
        click.echo(f"wrote {path}")
    buckets = ", ".join(f"{name} ≤ {bound} tokens: {count}" if bound is not None else f"{name}: {count}"
                        for name, bound, count in report.buckets)
    click.echo(f"length buckets (model tokenizer): {buckets}")
    for line in report.lines:
        click.echo(line)
    for warning in report.warnings:
        click.echo(warning, err=True)
    click.echo(f"{report.variants} variants, reference {report.reference_variant}, 5 repetitions each")
    if report.tuning_units < MIN_TUNING_INPUTS:
        click.echo(f"warning: the tuning split has {report.tuning_units} {report.units_word}; `isocost tune` needs "
                   f"at least {MIN_TUNING_INPUTS} (up to {WORST_CASE_INPUTS}, depending on the metric): pass a "
                   "larger --tuning FILE", err=True)
    click.echo(f"wrote {report.study}")
    click.echo(f"next: isocost tune {out}")


@click.command()
@click.argument("study", type=_FILE)
@click.option("--ledger", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Ledger directory of seen corpora (default: .isocost/ next to the study; also "
                   "ISOCOST_LEDGER_DIR).")
@click.option("--dry-run", is_flag=True, help="Measure and propose, but leave the study file as it is.")
def tune(study: Path, ledger: Path | None, dry_run: bool) -> None:
    """Measure the quality metric on the tuning split and write the minimum and tolerances.

    Runs the study's reference variant over the tuning split in a fresh
    process, like a trial, then proposes [quality] minimum, max_metric_drop
    and min_agreement by a stated rule and writes them into the study
    (comments kept). Refused once the final corpus was evaluated.

    \b
    Example: isocost tune study.toml
    """
    from runner.own.tune import tune_study

    result = tune_study(study, ledger_dir=ledger, write=not dry_run, progress=lambda m: click.echo(m, err=True))
    for line in result.lines():
        click.echo(line)


@click.command()
@click.argument("study", type=_FILE)
@click.option("--host", "host_options", multiple=True, metavar="NAME=URL",
              help="Also check that this host's engine answers and knows the image (repeatable).")
@click.option("--probe", is_flag=True, help="Run one batch of the reference variant to estimate the wall time.")
@click.option("--target-memory-gib", type=float, default=None,
              help="Memory of the target device in GiB, 0.1 to 65536 (default: this machine's RAM for cpu, unknown "
                   "for GPU stacks).")
@click.option("--ledger", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Ledger directory of seen corpora (default: .isocost/ next to the study).")
@launcher_choice("check")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="The --out `isocost run` will be given: it must be new, or empty.")
@click.option("--image", metavar="REF", default=None, help="The --image `isocost run` will be given.")
@click.option("--gpu", default=None, metavar="GPU", help="The --gpu `isocost run` will be given (the catalog must "
                                                          "price it for decide to price the campaign).")
@click.option("--lots", type=click.IntRange(min=1, max=MAX_LOTS), default=None, help="The --lots of `isocost run`.")
@click.option("--allowed-root", "allowed_root", multiple=True, metavar="DIR",
              help="The --allowed-root `isocost run` will be given (repeatable).")
@launcher_flags
def check(study: Path, host_options: tuple[str, ...], probe: bool, target_memory_gib: float | None,
          ledger: Path | None, launcher_kind: str, out: Path | None, image: str | None, gpu: str | None,
          lots: int | None, allowed_root: tuple[str, ...], **launcher_args: object) -> None:
    """Everything that can fail before renting time is spent, without timing anything.

    The study's keys (all errors at once), paths, fingerprints, labels,
    tokenizer, memory estimate against the target, images and hosts, and
    the schedule it would run. Exit 0 only if `isocost run` would start.

    \b
    Example: isocost check study.toml --probe
    Example: isocost check study.toml --launcher process
    Example: isocost check study.toml --launcher slurm --slurm-gres gpu:a100:1
    """
    from runner.own.check import RunOptions, check_study

    report = check_study(study, hosts=host_options, probe=probe, target_memory_gib=target_memory_gib,
                         ledger_dir=ledger, launcher_kind=launcher_kind,
                         launcher_options=launcher_values(launcher_args),
                         run=RunOptions(out=out, image=image, gpu=gpu, lots=lots, allowed_root_list=allowed_root))
    for line in report.lines():
        click.echo(line)
    if not report.ok:
        sys.exit(2)


@click.command()
@click.argument("campaign_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--gpu", required=True, metavar="GPU", help="The GPU type the campaign ran on, as the catalog names it.")
@click.option("--lots", type=click.IntRange(min=1, max=MAX_LOTS), default=1, show_default=True,
              help=f"Lots of that plan rented (1 to {MAX_LOTS:,}).")
@click.option("--plan-start", default=None, metavar="ISO", help="When the rented plan started (ISO date-time).")
@click.option("--host", default=None, metavar="NAME", help="The rented host's name (optional).")
def rental(campaign_dir: Path, gpu: str, lots: int, plan_start: str | None, host: str | None) -> None:
    """Record where a campaign ran, after the fact (appended to DIR/rentals.jsonl, never edited).

    `decide` prices the campaign from the latest recorded rental and says
    when it was recorded.

    \b
    Example: isocost rental results/mine --gpu rtx-4090 --lots 1
    """
    gpu = check_gpu_name(gpu, "--gpu")  # a plain name: it reaches CSV, Markdown, HTML and terminals
    if host is not None:
        from runner.hosts.spec import check_name

        host = check_name(host, "--host")
    if plan_start is not None:
        check_plain_text(plan_start, "--plan-start", "--plan-start", max_chars=64)
    recorded = record_rental(campaign_dir, gpu, lots, plan_start=plan_start, host=host)
    if recorded.kept_cut is not None:
        click.echo(f"note: {RENTALS_FILE} ended in a line cut while it was written; its bytes are kept in "
                   f"{recorded.kept_cut}")
    record = recorded.record
    click.echo(f"recorded {record.gpu} ×{record.lots} lot(s) at {record.recorded_at} in "
               f"{campaign_dir / RENTALS_FILE}; next: isocost decide {campaign_dir}")


COMMANDS = [init, tune, check, rental]
