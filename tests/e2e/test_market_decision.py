"""End-to-end: a real tiny campaign (the real MiniLM-style model, fresh processes) priced across providers with an
imported catalog, then priced again with a newer one: the first decision is kept, the second written beside it.

The market catalog is the real SkyPilot snapshot of 2026-12-03 (``../shared``, imported by ``isocost catalog
import``) when it is beside the clone, else a MADE-UP SkyPilot file written here; the older catalog is always
MADE-UP (dated 2026-11-20). The campaign runs on the CPU: its card is the rental's (rtx-4090), declared, and the
memo says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from skypilot_snapshot import COMMITS, SNAPSHOT, check_snapshot

from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.cli import main
from runner.launch.kinds.process.launcher import ProcessLauncher

pytestmark = pytest.mark.e2e

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
OLDER = (HEADER + "1x_RTX4090_MADEUP,RTX4090,1.0,8.0,32.0,0.99,eu-1,,\n"
         "8x_RTX4090_MADEUP,RTX4090,8.0,64.0,256.0,7.00,eu-1,,\n")
NEWER = HEADER + "1x_RTX4090_MADEUP,RTX4090,1.0,8.0,32.0,0.59,eu-1,,0.25\n"


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def _import(source: Path, day: str, out: Path, *more: str) -> Path:
    run("catalog", "import", str(source), "--date", day, "--out", str(out), *more)
    return out


def _newer_catalog(tmp_path: Path) -> tuple[Path, str, str]:
    """The real snapshot imported (or a MADE-UP one), and the provider and instance the memo must name."""
    if SNAPSHOT is not None:
        commits = [arg for provider, commit in COMMITS.items() for arg in ("--commit", f"{provider}={commit}")]
        return _import(check_snapshot(), "2026-12-03", tmp_path / "market-2026-12-03.csv", *commits), "runpod", \
            "1x_RTX4090_SECURE"
    source = tmp_path / "newer" / "madeup" / "vms.csv"
    source.parent.mkdir(parents=True)
    source.write_text(NEWER, encoding="utf-8")
    return _import(source, "2026-12-03", tmp_path / "market-2026-12-03.csv"), "madeup", "1x_RTX4090_MADEUP"


def test_a_real_campaign_priced_across_providers_and_never_re_priced_in_place(
        make_workspace: Callable[..., Path], tmp_path: Path) -> None:
    study = make_workspace(n=12, repetitions=2, batches="[1, 4]")
    campaign = tmp_path / "rtx4090"
    run_campaign(study, campaign, ProcessLauncher(), rental=Rental("rtx-4090", 1))
    older_source = tmp_path / "older" / "madeup" / "vms.csv"
    older_source.parent.mkdir(parents=True)
    older_source.write_text(OLDER, encoding="utf-8")
    older = _import(older_source, "2026-11-20", tmp_path / "market-2026-11-20.csv")

    decided = tmp_path / "decided"  # decide writes only under --out, never into the campaign it reads
    first = run("decide", str(campaign), "--market", str(older), "--out", str(decided)).stdout
    assert "## Prices across providers" in first
    assert "**Cheapest across providers for batch_size=" in first and "madeup 1x_RTX4090_MADEUP, on-demand" in first
    assert "Runner-up: IteraGPU catalog snapshot rtx-4090 lot of 1, flat" in first  # the shipped flat plan
    assert "madeup 8x_RTX4090_MADEUP: more cards than the job needs" in first  # whole instances: the 1x wins
    assert "Provider choice: for batch_size=" in first and "Configuration choice: the configuration changes" in first
    assert "dated **2026-11-20**" in first and "dated **2026-09-24**" in first
    assert "declared: the rental names rtx-4090 (the trials recorded no GPU" in first
    kept = (decided / "decision.json").read_bytes()
    data = json.loads(kept)
    assert [use["dates"] for use in data["market"]["catalogs"]] == [["2026-09-24"], ["2026-11-20"]]
    assert data["market"]["cheapest"]["provider"] == "madeup"
    assert '<svg class="plot market"' in (decided / "report.html").read_text(encoding="utf-8")

    newer, provider, instance = _newer_catalog(tmp_path)
    second = run("decide", str(campaign), "--market", str(newer), "--capacity", "on-demand", "--out", str(decided))
    memo = second.stdout
    assert "**Cheapest across providers for batch_size=" in memo and f"{provider} {instance}, on-demand" in memo
    assert "Runner-up: " in memo and "dated **2026-12-03**" in memo
    assert "earlier decision: decision.json beside this one was priced with catalogs dated 2026-09-24; 2026-09-24; " \
           "2026-11-20" in memo
    beside = decided / "decision-priced-2026-09-24_2026-12-03.json"
    assert f"Wrote {decided / 'decision-priced-2026-09-24_2026-12-03.md'}" in second.stderr
    assert beside.exists() and (decided / "report-priced-2026-09-24_2026-12-03.html").exists()
    assert (decided / "decision.json").read_bytes() == kept  # the earlier pricing is never rewritten
    assert json.loads(beside.read_text(encoding="utf-8"))["market"]["market_filter"]["capacity"] == "on-demand"
    assert not (campaign / "decision.json").exists()
