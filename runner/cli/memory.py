"""`isocost memory`: the memory estimate, shown beside measured peaks."""

from __future__ import annotations

import json
from pathlib import Path

import click

from protocol.errors import UserError
from protocol.hardware.memory import ModelShape, estimate
from protocol.records import codec
from protocol.records.summary import VariantSummary
from protocol.study.load import load_study
from protocol.study.model import ATTENTIONS, PRECISIONS, QUANTIZATIONS
from protocol.study.reader import BOUNDS


def _mib(value: int | None) -> str:
    return f"{value / 2**20:,.1f} MiB" if value is not None else "—"


@click.group()
def memory() -> None:
    """Memory as a feasibility criterion: estimates beside measured peaks."""


@memory.command("estimate")
@click.option("--study", "study_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Estimate every variant of this study (model, precision, batch, max length).")
@click.option("--campaign", "campaign_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="A campaign of that study: its measured peaks (re-derived from its raw rows, the evidence "
                   "checked first) are shown beside the estimates.")
@click.option("--model", "model_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="A checkpoint directory (instead of --study).")
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True)
@click.option("--quantization", type=click.Choice(QUANTIZATIONS), default="none", show_default=True)
@click.option("--batch", "batch_size", type=click.IntRange(1, int(BOUNDS["batch_size"][1])), default=1,
              show_default=True)
@click.option("--max-length", type=click.IntRange(1, int(BOUNDS["max_length"][1])), default=512, show_default=True)
@click.option("--attention", type=click.Choice(ATTENTIONS), default="sdpa", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def estimate_command(study_path: Path | None, campaign_dir: Path | None, model_dir: Path | None, precision: str,
                     quantization: str, batch_size: int, max_length: int, attention: str, as_json: bool) -> None:
    """Parameters × bytes + activations + attention scores, per variant.

    An estimate never replaces a measurement: allocator caching, the
    framework's runtime and workspaces are not in it.

    Example: isocost memory estimate --study .isocost-demo/quick.toml --campaign results/quick-…
    """
    rows = []
    if campaign_dir is not None and study_path is None:
        raise UserError("--campaign needs --study", "isocost memory estimate",
                        f"Pass the campaign's study: --study {campaign_dir / 'study.toml'} (its frozen copy).")
    if study_path is not None:
        study = load_study(study_path)
        shape = ModelShape.read(study.model.path)
        measured = _measured(campaign_dir) if campaign_dir else {}
        for v in study.variants():
            est = estimate(shape, v.precision, v.quantization, v.batch_size, v.max_length, v.attention)
            rows.append((v.variant_id, est, measured.get(v.variant_id)))
    elif model_dir is not None:
        shape = ModelShape.read(model_dir)
        est = estimate(shape, precision, quantization, batch_size, max_length, attention)
        rows.append((f"{precision}/{quantization}/batch {batch_size}/length {max_length}", est, None))
    else:
        raise UserError("nothing to estimate", "isocost memory estimate", "Pass --study STUDY or --model DIR.")
    if as_json:
        click.echo(json.dumps([{"variant": name, "estimate": codec.to_dict(est),
                                "measured": codec.to_dict(peaks) if peaks else None}
                               for name, est, peaks in rows], indent=2, sort_keys=True))
        return
    click.echo(f"parameters: {rows[0][1].parameters:,} (counted from the safetensors headers)")
    for name, est, peaks in rows:
        line = (f"{name}: estimate {_mib(est.total_bytes)} (weights {_mib(est.weight_bytes)}, activations "
                f"{_mib(est.activation_bytes)}, attention scores {_mib(est.attention_score_bytes)})")
        if peaks is not None:
            line += (f"; measured: host peak RSS {_mib(peaks.peak_rss_bytes)}, device allocated "
                     f"{_mib(peaks.peak_allocated_bytes)}, reserved {_mib(peaks.peak_reserved_bytes)}")
        click.echo(line)
    click.echo("assumptions: " + "; ".join(rows[0][1].assumptions))


def _measured(campaign_dir: Path) -> dict[str, VariantSummary]:
    """Each variant's measured peaks, re-derived from the campaign's sealed evidence (its raw rows, checked at the
    opening), never read from summary.json (a derived file no seal covers); nothing is written."""
    from runner.analysis.summarize import derive_summary
    from runner.analysis.verdicts import derive_verdicts
    from runner.campaign_dir.campaign import open_campaign

    campaign = open_campaign(campaign_dir)
    record, _ = derive_summary(campaign, derive_verdicts(campaign), estimates={})
    return {v.variant_id: v for v in record.variants}


COMMANDS = [memory]
