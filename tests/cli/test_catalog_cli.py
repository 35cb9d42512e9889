"""``isocost catalog import`` and ``isocost cost --market`` through click's runner: what they print, and a clear
``Error:`` (exit 2, no traceback) on bad input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result
from skypilot_snapshot import COMMITS, check_snapshot, requires_snapshot

from runner.cli import main

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@requires_snapshot
def test_import_the_real_snapshot_and_price_a_job_across_providers(tmp_path: Path) -> None:
    folder = check_snapshot()
    out = tmp_path / "market-2026-12-03.csv"
    commits = [arg for provider, commit in COMMITS.items() for arg in ("--commit", f"{provider}={commit}")]
    result = run("catalog", "import", str(folder), "--date", "2026-12-03", "--out", str(out), *commits)
    assert result.exit_code == 0, result.output
    assert "lambda: " in result.output and "306 GPU offers kept; skipped: 17 CPU only" in result.output
    assert "runpod: " in result.output and "639 GPU offers kept; skipped: 750 CPU only" in result.output
    assert "repeated rows dropped: 14" in result.output
    assert f"Wrote {out}: 945 rows" in result.output and "dated 2026-12-03" in result.output

    priced = run("cost", "--gpu", "h100-sxm", "--hours", "2.5", "--market", str(out), "--capacity", "on-demand")
    assert priced.exit_code == 0, priced.output
    lines = priced.output.splitlines()
    assert lines[1].split()[:3] == ["8.97", "USD", "runpod"] and "1x_H100-SXM_SECURE" in lines[1]
    assert "lambda gpu_1x_h100_sxm5 (17 regions, on-demand)" in lines[2] and "9.87 USD" in lines[2]
    assert "median provider: 9.42 USD (0.45 USD above the cheapest)" in priced.output
    data = json.loads(run("cost", "--gpu", "h100-sxm", "--hours", "2.5", "--market", str(out), "--json").output)
    assert data["cheapest_usd"] == "8.07" and data["offers"][0]["risk"].startswith("spot: interruptible")


def test_import_refuses_bad_input_with_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "acme" / "vms.csv"
    source.parent.mkdir()
    source.write_text(HEADER + "gpu_1x,H100,1.0,26.0,200.0,1000000000000,r1,,\n", encoding="utf-8")
    result = run("catalog", "import", str(source), "--date", "2026-12-03", "--out", str(tmp_path / "o.csv"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Error: Price '1000000000000' is not a decimal number" in result.output and "vms.csv:2" in result.output
    source.write_text(HEADER + "gpu_1x,H100,1.0,26.0,200.0,2.49,r1,,\n", encoding="utf-8")
    bad_date = run("catalog", "import", str(source), "--date", "today", "--out", str(tmp_path / "o.csv"))
    assert bad_date.exit_code == 2 and "--date 'today' is not a date" in bad_date.output
    no_date = run("catalog", "import", str(source), "--out", str(tmp_path / "o.csv"))
    assert no_date.exit_code == 2 and "Missing option '--date'" in no_date.output  # never today by default
    ok = run("catalog", "import", str(source), "--date", "2026-12-03", "--out", str(tmp_path / "o.csv"))
    assert ok.exit_code == 0 and "acme: " in ok.output
    unknown = run("cost", "--gpu", "tpu-v9", "--hours", "1", "--market", str(tmp_path / "o.csv"))
    assert unknown.exit_code == 2 and "the rented GPU 'tpu-v9' is not in the GPU map (v1)" in unknown.output
    no_hours = run("cost", "--gpu", "h100-sxm", "--market", str(tmp_path / "o.csv"))
    assert no_hours.exit_code == 2 and "--hours must be above 0" in no_hours.output
