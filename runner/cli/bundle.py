"""``isocost bundle``, ``isocost verify``, ``isocost replay``: archive a campaign, check it, rerun it.

Thin commands over :mod:`runner.bundle.pack`, :mod:`runner.bundle.verify` and :mod:`runner.bundle.replay`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from protocol.io import jsonio
from protocol.io.fingerprint import sha256_file
from protocol.io.paths import allowed_roots
from protocol.io.safe_extract import DEFAULT_MAX_MEMBERS, DEFAULT_MAX_TOTAL_BYTES, ExtractLimits
from protocol.records.codec import to_dict
from runner.bundle.pack import create_bundle
from runner.bundle.replay import replay_bundle
from runner.bundle.verify import verify_bundle
from runner.cli.launcher_flags import launcher_choice
from runner.decision.redecide import decision_findings

#: Exit status when a bundle does not verify or a replay does not match (UserErrors exit 2).
EXIT_MISMATCH = 1


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _size(size_bytes: int) -> str:
    if size_bytes < 2**20:
        return f"{size_bytes / 2**10:.1f} KiB"
    return f"{size_bytes / 2**20:.1f} MiB"


_limit_options = [
    click.option("--max-expanded-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_TOTAL_BYTES,
                 show_default=True, help="Refuse an archive whose files add up to more bytes than this."),
    click.option("--max-members", type=click.IntRange(min=1), default=DEFAULT_MAX_MEMBERS, show_default=True,
                 help="Refuse an archive with more members than this."),
]


def _with_limits(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_limit_options):
        command = option(command)
    return command


@click.command()
@click.argument("campaign_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="The bundle file to write (.tar.gz); refused if it exists.")
@click.option("--include-inputs", is_flag=True,
              help="Also pack the corpus, the tuning corpus and the model files, so `isocost replay` works on "
                   "another host. The corpus may be copyrighted or personal data: make sure you may "
                   "redistribute it before you share such a bundle. Without this flag only their hashes are "
                   "packed.")
def bundle(campaign_dir: Path, output: Path, include_inputs: bool) -> None:
    """Pack a campaign into one verifiable archive (deterministic .tar.gz).

    Holds the frozen study, the input fingerprints (and per-file model hashes),
    every trial's spec, manifest, predictions, status and logs, raw.csv,
    verdicts, summary, decision memo/report if present, the image lock and the
    plan catalog, and BUNDLE.json with the SHA-256 and size of every file and
    the host, rental and dates to match the rental ledger. The new bundle is
    verified before it is kept.

    Example: isocost bundle results/quick -o quick.tar.gz
    """
    manifest = create_bundle(campaign_dir, output, include_inputs=include_inputs, progress=_progress)
    size = output.stat().st_size
    included = [i.kind for i in manifest.inputs if i.included]
    click.echo(f"wrote {output} ({_size(size)}, {len(manifest.files) + 1} files): campaign {manifest.campaign_id}, "
               f"{len(manifest.trials)} trial(s), study {manifest.study_sha256}")
    click.echo("inputs: " + (f"included ({', '.join(included)})" if included
                             else "hashes only (replay needs the original files or --inputs DIR)"))
    if manifest.unfinished_slots:
        click.echo(f"unfinished: {len(manifest.unfinished_slots)} planned pass(es) have no final row")
    click.echo(f"bundle sha256: {sha256_file(output)}")


@click.command()
@click.argument("bundle_file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--all", "show_all", is_flag=True, help="List every discrepancy, not only the first.")
@click.option("--json", "as_json", is_flag=True, help="Print the verification report as sorted JSON.")
@_with_limits
def verify(bundle_file: Path, show_all: bool, as_json: bool, max_expanded_bytes: int, max_members: int) -> None:
    """Check a bundle: every SHA-256, nothing missing or extra, and internal consistency.

    Raw rows ↔ trial directories (spec, manifest, status: trial id, variant,
    status agree), prediction files ↔ observed_ids and verdict columns,
    schedule ↔ rows, events ↔ rows, study.toml ↔ the campaign's study sha256;
    then the derived files (verdicts, summary, decision) are re-derived from
    the sealed evidence and compared (the memory estimates from the model,
    bundled or at its recorded path; without it a caveat line says they were
    not re-derived). Names the first discrepancy (file and field) and exits 1;
    0 if all agree.
    Nothing is extracted to disk outside a temporary folder.

    Example: isocost verify quick.tar.gz
    """
    limits = ExtractLimits(max_members=max_members, max_total_bytes=max_expanded_bytes)
    report = verify_bundle(bundle_file, limits, decision_check=decision_findings)
    if as_json:
        click.echo(jsonio.dumps(to_dict(report)), nl=False)
    elif report.ok:
        included = ", ".join(report.inputs_included) or "none (hashes only)"
        click.echo(f"OK: {bundle_file}: {report.files_checked} files, {_size(report.bytes_checked)}, every SHA-256 "
                   "matches BUNDLE.json, nothing missing or extra")
        except_estimates = ", except the memory estimates (caveat below)" if report.caveats else ""
        click.echo(f"consistent: {report.trials} trial(s): raw rows, trial directories, specs, manifests, "
                   "statuses, predictions, schedule and events agree; verdicts, summary and decision re-derived "
                   f"from them{except_estimates}")
        click.echo(f"campaign {report.campaign_id}, study {report.study_sha256}, inputs included: {included}")
        for caveat in report.caveats:
            click.echo(f"caveat: {caveat}")
    else:
        click.echo(f"FAILED: {bundle_file}: {report.first}")
        shown = report.discrepancies if show_all else ()
        for problem in shown[1:]:
            click.echo(f"  also: {problem}")
        if len(report.discrepancies) > 1 and not show_all:
            click.echo(f"({len(report.discrepancies)} discrepancies in all; --all lists them)")
    if not report.ok:
        sys.exit(EXIT_MISMATCH)


@click.command()
@click.argument("bundle_file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--trial", "trial_ids", multiple=True, metavar="ID",
              help="Replay this trial (repeatable). Default: the first accepted pass of every variant.")
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="New folder for the replay (default: BUNDLE.replay-<time> next to the bundle).")
@click.option("--inputs", "inputs_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="Folder holding the corpus file and the model directory under their original names, for a "
                   "bundle made without --include-inputs (default: the paths the campaign used).")
@launcher_choice("replay")
@click.option("--allowed-root", "allowed", multiple=True, type=click.Path(path_type=Path, file_okay=False),
              help="Read inputs only under this folder (repeatable; adds to ISOCOST_ALLOWED_ROOTS).")
@_with_limits
def replay(bundle_file: Path, trial_ids: tuple[str, ...], out: Path | None, inputs_dir: Path | None,
           launcher_kind: str, allowed: tuple[Path, ...], max_expanded_bytes: int, max_members: int) -> None:
    """Rerun trials of a bundle with the same spec and inputs, and compare with the originals.

    The bundle must verify; it is extracted (safely) into a new folder next to
    it, never over the original. The corpus and model must have the campaign's
    exact fingerprints (from the bundle, --inputs, or the original paths), else
    replay refuses and names the input. The comparison follows the study's
    quality.replay: identical (same labels and scores), bounded (same labels,
    max |Δscore| ≤ quality.max_score_delta) or quality (the rerun passes the same
    quality rule). Writes replay.json and replay.md; exits 0 only on a match.

    Example: isocost replay quick.tar.gz --trial 001-r1-batch_size-1
    """
    limits = ExtractLimits(max_members=max_members, max_total_bytes=max_expanded_bytes)
    report = replay_bundle(bundle_file, trial_ids=trial_ids, out=out, inputs_dir=inputs_dir,
                           launcher_kind=launcher_kind, allowed_roots=allowed_roots(allowed), limits=limits,
                           progress=_progress, decision_check=decision_findings)
    click.echo((Path(report.out_dir) / "replay.md").read_text(encoding="utf-8"), nl=False)
    click.echo(f"Wrote {Path(report.out_dir) / 'replay.json'}")
    if not report.matches:
        sys.exit(EXIT_MISMATCH)


COMMANDS = [bundle, verify, replay]
