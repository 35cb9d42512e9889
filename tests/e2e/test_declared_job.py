"""End-to-end: a declared job of 1,000,000 texts projected from real trials and priced under every billing model.

Two real campaigns of one tiny study (the real MiniLM-style model, fresh processes): one rented as the seed's
RTX 4090 plan (``run``'s rental), one as the seed's B200 plan (recorded in ``rentals.jsonl``, the format
``isocost rental`` appends). The catalog holds the seed's two flat prices plus MADE-UP hourly rows for the test.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.campaign_dir.rentals import record_rental
from runner.cli import IsocostGroup, main
from runner.cli.decide import COMMANDS
from runner.launch.kinds.process.launcher import ProcessLauncher

pytestmark = pytest.mark.e2e

JOB = """
[deadline]
start = "2030-01-07T09:00"
end = "2030-02-04T09:00"
tz = "UTC"

[job]
inputs = 1000000
bootstrap_resamples = 500
bootstrap_seed = 7
"""

MADE_UP = "MADE-UP hourly price for the isocost test (not a real offer)"
SEED = "IteraGPU catalog snapshot (2026-09-24 edition) as quoted in the original problem statement"
CATALOG = (
    "gpu,cards_per_lot,billing,plan_days,price_usd_per_lot,minimum_s,increment_s,currency,catalog_date,source\n"
    f"rtx-4090,1,flat,7,110.00,,,USD,2026-09-24,{SEED}\n"
    f"b200,2,flat,7,2071.00,,,USD,2026-09-24,{SEED}\n"
    f"rtx-4090,1,hourly,,0.70,3600,3600,USD,2026-09-24,{MADE_UP}\n"
    f"b200,2,per-second,,9.00,60,1,USD,2026-09-24,{MADE_UP}\n"
)


def isocost() -> click.Group:
    if all(command.name in main.commands for command in COMMANDS):
        return main
    return IsocostGroup(name="isocost", commands={**main.commands, **{c.name: c for c in COMMANDS if c.name}})


def job_campaigns(make_workspace: Callable[..., Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two campaigns of one study with a [job], the RTX 4090 and the B200 rentals, and a made-up catalog."""
    study = make_workspace(n=16, repetitions=2, batches="[4]", extra=JOB)
    rtx, b200 = tmp_path / "rtx4090", tmp_path / "b200"
    run_campaign(study, rtx, ProcessLauncher(), rental=Rental("rtx-4090", 1))
    run_campaign(study, b200, ProcessLauncher())
    record_rental(b200, "b200", 1)  # chained, as `isocost rental` writes it
    catalog = tmp_path / "made-up-catalog.csv"
    catalog.write_text(CATALOG, encoding="utf-8")
    return rtx, b200, catalog


def test_declared_job_is_projected_priced_and_ranked(make_workspace: Callable[..., Path], tmp_path: Path) -> None:
    rtx, b200, catalog = job_campaigns(make_workspace, tmp_path)
    result = CliRunner().invoke(isocost(), ["decide", str(rtx), str(b200), "--catalog", str(catalog), "--out",
                                            str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    memo = result.stdout
    assert "## The declared job" in memo
    assert "Job: 1,000,000 inputs × 1 accepted corpus" in memo
    assert "**Cheapest for the job: batch_size=4 on " in memo
    assert "projected " in memo and " h (interval " in memo
    assert "P(fits plan)" in memo and "P(fits deadline)" in memo and "cost per validated corpus" in memo
    for option in ("flat 7-day", "hourly", "per-second"):
        assert f"| {option}" in memo
    assert "### How sure" in memo and "bootstrap seed '7:batch_size=4 on " in memo
    assert "CPU: " in memo and "GPU: empty (CPU trial: no GPU energy counter)" in memo

    data = json.loads((tmp_path / "d" / "decision.json").read_text(encoding="utf-8"))
    job = data["job"]
    configs = {c["configuration_id"]: c for c in job["configurations"]}
    assert set(configs) == {"batch_size=4 on rtx-4090 ×1 lot", "batch_size=4 on b200 ×1 lot"}
    for config in configs.values():
        projection = config["projection"]
        low, high = projection["interval_h"]
        assert low <= projection["job_h"] <= high
        assert projection["fit"]["batches"] == 2 * 4  # 2 passes × 16 inputs / batch 4
        assert len(projection["checks"]) == 2
        assert config["chosen_option"] is not None and config["per_corpus_usd"] is not None
    # B200 lot = 2 cards → 2 workers; the job's hours halve against one worker at the same speed.
    assert configs["batch_size=4 on b200 ×1 lot"]["workers"] == 2
    assert job["chosen"] in configs and job["ranking"][0] == job["chosen"]
    assert job["pareto"] and set(job["pareto"]) <= set(configs)

    again = CliRunner().invoke(isocost(), ["decide", str(rtx), str(b200), "--catalog", str(catalog), "--json"])
    assert json.loads(again.stdout)["job"]["configurations"] == job["configurations"]  # the recorded seed

    table = CliRunner().invoke(isocost(), ["decide", str(rtx), str(b200), "--catalog", str(catalog), "--format",
                                           "csv"])
    assert table.exit_code == 0, table.output
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert {r["configuration_id"] for r in rows} == set(configs)
    assert all(r["job_h"] and r["job_per_validated_corpus_usd"] for r in rows)
