"""``isocost selfcheck``: check this host's GPU path in minutes, before days are rented or a campaign trusted.

Thin command: parse the options, call :func:`runner.selfcheck.host.run_selfcheck`, print the text report,
exit 1 on any FAIL. The checks run in a separate process with this python's torch
(``python -m runner.trial.selfcheck``): the CLI itself never imports torch.

Example::

    isocost selfcheck --device cuda --budget-s 300
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from protocol.records.selfcheck import exit_code, render_text
from runner.demo.build import DEFAULT_OUT_DIR
from runner.selfcheck.host import Request, run_selfcheck


@click.command("selfcheck")
@click.option("--device", type=click.Choice(["auto", "cuda", "rocm", "cpu"]), default="auto", show_default=True,
              help="What to check: auto = the stack of this python's torch build (a CUDA build checks its GPU and "
                   "fails without one).")
@click.option("--model", "model_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="A checkpoint directory (a study's model). Default: the demo's, else a small random encoder "
                   "built from a config (no download).")
@click.option("--corpus", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="Texts for the trials (JSONL/CSV with id, text, label). Default: the demo's quick corpus with "
                   "the demo model, else generated sentences.")
@click.option("--demo", "demo_dir", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_OUT_DIR,
              show_default=True, help="Where to look for the demo (isocost demo prepare).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Directory for selfcheck.json, selfcheck.txt and the checks' trials [default: "
                   "results/selfcheck-<UTC time>].")
@click.option("--budget-s", type=click.FloatRange(min=10), default=300.0, show_default=True,
              help="Wall-clock budget in seconds; steps that do not fit are cut, each saying so.")
@click.option("--texts", type=click.IntRange(min=1), default=None,
              help="Texts per trial [default: 300 on a GPU, 32 on a CPU].")
def selfcheck(device: str, model_dir: Path | None, corpus: Path | None, demo_dir: Path, out_dir: Path | None,
              budget_s: float, texts: int | None) -> None:
    """Check, on this host, that the GPU path gives true numbers: PASS, FAIL or SKIP per check.

    The GPU seen (name, UUID, memory, driver, CUDA/ROCm, NVML or amdsmi on
    the same card); host timer against CUDA events, and a queued kernel that
    must not escape the measured region; the pass's shapes in the warm-up;
    allocated and reserved peaks apart, against mem_get_info; a real
    out-of-memory, released, and recorded by a trial as an oom row; fp16
    and bf16 against fp32 by id, with the TF32 setting; the energy counter.
    Runs on this python's torch, without Docker or network. Writes
    selfcheck.json and selfcheck.txt; exits 1 on any FAIL. With --device
    cpu the GPU checks SKIP with their reasons.

    \b
    Example: isocost selfcheck --device cuda --budget-s 300
    Example: isocost selfcheck --device cpu --out results/selfcheck-cpu
    """
    out = out_dir or Path("results") / f"selfcheck-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    request = Request(device=device, out=out, budget_s=budget_s, model=model_dir, corpus=corpus, demo_dir=demo_dir,
                      texts=texts or 0)
    report = run_selfcheck(request)
    click.echo(render_text(report), nl=False)
    click.echo(f"wrote {out / 'selfcheck.json'} and {out / 'selfcheck.txt'} (check log: {out / 'selfcheck.log'})")
    sys.exit(exit_code(report))


COMMANDS = [selfcheck]
