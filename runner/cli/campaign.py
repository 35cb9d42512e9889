"""Commands that run and read a campaign: run, validate, summarize, fingerprint."""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path
from types import FrameType

import click

from protocol.costing.plans import MAX_LOTS
from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.io.names import check_image_reference
from protocol.study.load import Study, load_study
from runner.analysis.summarize import summarize_campaign
from runner.analysis.verdicts import derive_verdicts, write_verdicts
from runner.campaign.launcher_choice import choose_launcher
from runner.campaign.run import rental_from_options, run_campaign
from runner.campaign_dir.campaign import open_campaign
from runner.cli.launcher_flags import launcher_choice, launcher_flags, launcher_values, refuse_with_hosts


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command()
@click.argument("study", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Results directory (new or empty; with --resume, the interrupted campaign's).")
@click.option("--resume", is_flag=True, help="Continue an interrupted campaign in --out; refused if the study changed.")
@launcher_choice("run")
@click.option("--image", "image", metavar="REF", default=None,
              help="Run exactly this image: REPO@sha256:… (pulled if absent) or an image ID (sha256:…).")
@click.option("--gpu", default=None, metavar="GPU",
              help="The GPU type this host is rented as, in the plan catalog (e.g. rtx-4090); recorded for decide.")
@click.option("--lots", type=click.IntRange(min=1, max=MAX_LOTS), default=None,
              help=f"Lots of that plan rented (default 1; at most {MAX_LOTS:,}).")
@click.option("--acknowledge-seen-corpus", is_flag=True,
              help="Run although this final corpus was already evaluated under another quality rule "
                   "(recorded in campaign.json and the summary).")
@click.option("--ledger", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Ledger directory of seen corpora, the one `isocost tune --ledger` and `isocost check --ledger` "
                   "read (default: .isocost/ next to the study; also ISOCOST_LEDGER_DIR).")
@click.option("--allowed-root", "allowed_root", multiple=True, metavar="DIR",
              help="Refuse a study, corpus, model or catalog outside these directories (repeatable; also "
                   "ISOCOST_ALLOWED_ROOTS).")
@click.option("--host", "host_options", multiple=True, metavar="NAME=URL",
              help="Run the whole study on this host, as its own campaign in OUT/NAME/; all hosts run in parallel "
                   "(repeatable). URL: local (this machine's engine), unix:///PATH/docker.sock or "
                   "ssh://USER@HOST[:PORT] (Docker Engine over SSH).")
@click.option("--hosts-file", "hosts_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="TOML list of hosts (name, url, stack, rental, ssh_config); see docs/hosts.md.")
@launcher_flags
def run(study: Path, out: Path, resume: bool, launcher_kind: str, image: str | None, gpu: str | None,
        lots: int | None, acknowledge_seen_corpus: bool, ledger: Path | None, allowed_root: tuple[str, ...],
        host_options: tuple[str, ...], hosts_file: Path | None, **launcher_args: object) -> None:
    """Run every trial of STUDY in rotated order, one fresh container or process per trial.

    Every attempt gets one row in OUT/raw.csv the moment it ends (failures,
    OOM, timeouts and Ctrl-C included). At the end the campaign is validated
    and summarized.

    Example: isocost run .isocost-demo/quick.toml --out results/quick

    Exact replay: isocost run STUDY --out DIR --image 127.0.0.1:5000/isocost/cpu@sha256:…

    Several hosts, one campaign each, in parallel (results in OUT/NAME/, listed in OUT/hosts.json):
    isocost run STUDY --out results/multi --host local=local --host b200=ssh://ubuntu@203.0.113.7

    \b
    A Slurm cluster, each trial one job on a pinned node (docs/slurm.md):
    isocost run STUDY --out /scratch/me/out --launcher slurm --slurm-gres gpu:a100:1 --slurm-shared /scratch/me
    """
    options = launcher_values(launcher_args)
    if host_options or hosts_file or (resume and (out / "hosts.json").is_file()):
        refuse_with_hosts(launcher_kind, options)
        _run_hosts(study, out, resume, launcher_kind, image, gpu, lots, acknowledge_seen_corpus, allowed_root,
                   host_options, hosts_file, ledger)
        return
    image = check_image_reference(image, "--image") if image is not None else None
    parsed = load_study(study)  # parsed once; the launcher, the campaign and the summary are handed it
    choice = choose_launcher(parsed, launcher_kind, image, options=options)
    launcher = choice.launcher
    if choice.notice:
        click.echo(f"notice: {choice.notice}", err=True)
    else:
        click.echo(f"launcher: {launcher.summary()}", err=True)
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        rental = rental_from_options(gpu, lots)
        outcome = run_campaign(parsed, out, launcher, resume=resume, progress=_progress, rental=rental,
                               acknowledge_seen_corpus=acknowledge_seen_corpus, allowed_root_list=allowed_root,
                               ledger_dir=ledger)
    except KeyboardInterrupt:
        stopped = f"Stopped: {launcher.lost}" if launcher.lost else "Interrupted"
        click.echo(f"{stopped}. Every finished trial is in {out / 'raw.csv'}; "
                   f"continue with: {_resume_command(study, out, launcher_kind, image, options)}", err=True)
        sys.exit(3 if launcher.lost else 130)
    finally:
        signal.signal(signal.SIGTERM, previous)
    click.echo(f"{outcome.rows_written} trial(s) run now; {outcome.rows_total} row(s) in raw.csv "
               f"for {outcome.slots_total} planned pass(es).", err=True)
    summary_text = _summarize(out, parsed)
    click.echo(summary_text)
    click.echo(f"Results: {out.resolve()}")


def _resume_command(study: Path, out: Path, kind: str, image: str | None, options: dict[str, dict[str, object]]) -> str:
    """The command that continues this campaign: the same launcher, image and launcher options."""
    words = ["isocost", "run", str(study), "--out", str(out), "--resume"]
    words += ["--launcher", kind] if kind != "auto" else []
    words += ["--image", image] if image else []
    for name, value in sorted(options.get(kind, {}).items()):
        for item in (value if isinstance(value, tuple) else (value,)):
            if item not in (None, ""):
                words += [f"--{kind}-{name.replace('_', '-')}", f"{item:g}" if isinstance(item, float) else str(item)]
    return shlex.join(words)


def _run_hosts(study: Path, out: Path, resume: bool, launcher_kind: str, image: str | None, gpu: str | None,
               lots: int | None, acknowledge_seen_corpus: bool, allowed_root: tuple[str, ...],
               host_options: tuple[str, ...], hosts_file: Path | None, ledger: Path | None) -> None:
    """``run`` with --host/--hosts-file: one campaign per host, in parallel (runner.hosts.parallel)."""
    from runner.hosts.board import HostBoard
    from runner.hosts.parallel import run_hosts
    from runner.hosts.record import load_hosts_json
    from runner.hosts.spec import merge_hosts

    if gpu or lots:
        raise UserError("--gpu/--lots name one host's plan", "--host",
                        "Give each host its rental in a hosts file (rental = { gpu = \"rtx-4090\", lots = 1 }).")
    hosts = merge_hosts(host_options, hosts_file)
    parsed = load_study(study)  # parsed once; every host's campaign and summary are handed it
    names = [h.name for h in hosts] or [h.name for h in load_hosts_json(out).hosts]
    board = HostBoard(names)
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        outcome = run_hosts(parsed, out, hosts, image=image, resume=resume, board=board,
                            acknowledge_seen_corpus=acknowledge_seen_corpus, allowed_root_list=allowed_root,
                            ledger_dir=ledger)
    except KeyboardInterrupt:
        click.echo(f"Interrupted. Every finished trial is in {out}/<host>/raw.csv; "
                   f"continue with: isocost run {study} --out {out} --resume", err=True)
        sys.exit(130)
    finally:
        signal.signal(signal.SIGTERM, previous)
    width = max(4, *(len(h.name) for h in outcome.hosts))
    click.echo(f"{'host':<{width}}  {'state':<11}  rows/passes  wall")
    for host in outcome.hosts:
        reason = f"  {host.reason}" if host.reason else ""
        click.echo(f"{host.name:<{width}}  {host.state:<11}  {host.rows_total:>6}/{host.slots_total:<4}  "
                   f"{host.wall_s:6.1f} s{reason}")
        if (out / host.name / "campaign.json").exists():
            summarize_campaign(out / host.name, study=parsed)
    click.echo(f"All hosts: {outcome.wall_s:.1f} s wall. Per host: {out.resolve()}/<host>/summary.md; "
               f"hosts: {out.resolve() / 'hosts.json'}")
    if not outcome.complete:
        click.echo(f"Some hosts did not finish: continue with isocost run {study} --out {out} --resume", err=True)
        sys.exit(3)
    click.echo(f"Decide across hosts: isocost decide {out}")


def _summarize(out: Path, study: Study) -> str:
    summarize_campaign(out, record_events=True, study=study)
    return (out / "summary.md").read_text(encoding="utf-8")


_ALLOW_INCONSISTENT = click.option(
    "--allow-inconsistent", is_flag=True,
    help="Forensics: read a campaign directory that fails the evidence checks (edited, cut or missing files) "
         "anyway; the output then says so on its first line.")


@click.command()
@click.argument("campaign_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@_ALLOW_INCONSISTENT
def validate(campaign_dir: Path, allow_inconsistent: bool) -> None:
    """Re-derive every trial's verdict from its stored prediction file.

    Checks expected vs observed ids (duplicates, missing, unexpected), the
    format of every line, the main metric and subgroups against the reference
    labels, and agreement with the reference variant. Writes verdicts.csv.

    Checks the campaign directory first (study, corpus index, raw-row chain,
    trial directories, events) and refuses an inconsistent one.

    Example: isocost validate results/quick
    """
    campaign = open_campaign(campaign_dir, allow_inconsistent=allow_inconsistent)
    if campaign.banner:
        click.echo(campaign.banner)
    verdicts = derive_verdicts(campaign)
    write_verdicts(campaign, verdicts, banner=campaign.banner)
    accepted = sum(1 for v in verdicts if v["corpus_accepted"])
    for v in verdicts:
        state = "accepted" if v["corpus_accepted"] else "rejected"
        metric = f"{v['metric']} {v['metric_value']:.4f}" if v["metric_value"] is not None else "no metric"
        agreement = f", agreement {v['agreement']:.4f}" if v.get("agreement") is not None else ""
        detail = f" ({v['reasons']})" if v["reasons"] else ""
        click.echo(f"{v['trial_id']}: {state}, {v['observed_ids']}/{v['expected_ids']} ids, "
                   f"{metric}{agreement}{detail}")
    mismatched = [v["trial_id"] for v in verdicts if not v["matches_raw"]]
    click.echo(f"{accepted} of {len(verdicts)} passes accepted; wrote {campaign_dir / 'verdicts.csv'}")
    if mismatched:
        click.echo(f"warning: re-derived verdicts differ from raw.csv for {', '.join(mismatched)}", err=True)


@click.command()
@click.argument("campaign_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print summary.json instead of the Markdown table.")
@_ALLOW_INCONSISTENT
def summarize(campaign_dir: Path, as_json: bool, allow_inconsistent: bool) -> None:
    """Per variant: every raw pass time, median, min, max, failures, quality, memory.

    Writes summary.md and summary.json (a pure function of raw.csv and the
    prediction files) and warns when the spread of pass times is comparable
    to the difference between medians.

    Example: isocost summarize results/quick
    """
    banner = summarize_campaign(campaign_dir, allow_inconsistent=allow_inconsistent).inconsistent
    name = "summary.json" if as_json else "summary.md"
    if banner and as_json:
        click.echo(banner)  # summary.md starts with it already
    click.echo((campaign_dir / name).read_text(encoding="utf-8"), nl=False)


@click.command()
@click.argument("path", type=click.Path(path_type=Path, exists=True))
def fingerprint(path: Path) -> None:
    """Print the sha256 fingerprint of a corpus file or a model directory.

    Paste it into the study's `fingerprint = "…"`.

    Example: isocost fingerprint my-model/
    """
    click.echo(fingerprint_path(path))


COMMANDS = [run, validate, summarize, fingerprint]
