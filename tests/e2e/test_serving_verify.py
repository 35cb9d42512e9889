"""End-to-end: a real tiny server campaign (one configuration, one rate, the real tiny classifier in its own
process, under a test-only fault hook that changes nothing but flags every output) decided with the declared
traffic, its decision files copied into the campaign and bundled: ``isocost verify`` re-derives the serving
decision.json, decision.md and report.html from the bundle's sealed evidence and passes the honest bundle; a
decision.json or decision.md edited with BUNDLE.json's hashes recomputed (a careful forger) is named, as are a
schema-1 serving decision and one that weighs an expenses ledger (not re-derivable from the bundle). The same
decision printed as CSV (``decide --format csv``) has one row per configuration.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from bundle_forge import bundle_members, repack
from click.testing import CliRunner
from serving_study import SERVER, TRAFFIC

from protocol.records import Rental
from runner.analysis.summary import summarize_campaign
from runner.campaign.run import run_campaign
from runner.cli import main
from runner.launch.process import ProcessLauncher
from runner.trial.faults import FAULT_ENV

pytestmark = pytest.mark.e2e
pytest.importorskip("mlperf_loadgen")

DEMAND = ["--peak-qps", "50", "--hours-per-day", "8", "--days", "7"]


def test_verify_re_derives_a_serving_decision(make_workspace: Callable[..., Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    study = make_workspace("serve", n=12, repetitions=1, batches="[1]", extra=TRAFFIC, replace=SERVER)
    campaign = tmp_path / "campaign"
    monkeypatch.setenv(FAULT_ENV, "sleep-per-batch:0")  # a hook that changes nothing, but flags every output
    run_campaign(study, campaign, ProcessLauncher(), rental=Rental("rtx-4090", 1))
    monkeypatch.delenv(FAULT_ENV)
    summarize_campaign(campaign)  # verdicts.csv/json and summary.md/json, as `isocost run` writes them
    monkeypatch.chdir(tmp_path)  # decided as typed in a shell: a relative DIR (the frozen catalog's path is absolute)
    decided = CliRunner().invoke(main, ["decide", "campaign", *DEMAND, "--out", str(tmp_path / "decision")])
    assert decided.exit_code in (0, 3), decided.output  # 3: the loaded VM missed the bound; still a decision
    record = json.loads((tmp_path / "decision" / "decision.json").read_text())
    assert decided.output.startswith("NOT A MEASUREMENT") and record["test_hooks"], decided.output
    assert record["schema_version"] >= 1 and record["demand"]["peak_qps"] == 50.0

    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp_path / "decision" / name, campaign / name)
    bundle = tmp_path / "bundle.tar.gz"
    packed = CliRunner().invoke(main, ["bundle", str(campaign), "-o", str(bundle)])
    assert packed.exit_code == 0, packed.output
    verified = CliRunner().invoke(main, ["verify", str(bundle)])
    assert verified.exit_code == 0, verified.output
    assert "verdicts, summary and decision re-derived" in verified.output

    # A forger makes the decision cheaper (decision.json only, hashes recomputed): named, exit 1.
    files = bundle_members(bundle)
    forged = json.loads(files["campaign/decision.json"])
    forged["demand"]["days"] = 1
    files["campaign/decision.json"] = (json.dumps(forged, sort_keys=True, indent=2, ensure_ascii=False)
                                       + "\n").encode()
    tampered = CliRunner().invoke(main, ["verify", str(repack(files, tmp_path / "forged.tar.gz"))])
    assert tampered.exit_code == 1, tampered.output
    assert tampered.output.startswith(f"FAILED: {tmp_path / 'forged.tar.gz'}: campaign/decision.json: "), \
        tampered.output
    memo = files["campaign/decision.md"] = bundle_members(bundle)["campaign/decision.md"]
    files["campaign/decision.json"] = bundle_members(bundle)["campaign/decision.json"]
    files["campaign/decision.md"] = memo.replace(b"# Decision:", b"# Decision (forged):", 1)
    tampered = CliRunner().invoke(main, ["verify", str(repack(files, tmp_path / "forged-md.tar.gz"))])
    assert tampered.exit_code == 1 and ": campaign/decision.md: " in tampered.output.splitlines()[0], \
        tampered.output

    # A serving decision of schema_version 1 named no campaigns: named as not re-derivable, not as a forgery.
    files["campaign/decision.md"] = memo
    old = json.loads(files["campaign/decision.json"])
    del old["campaigns"]
    old["schema_version"] = 1
    files["campaign/decision.json"] = json.dumps(old).encode()
    tampered = CliRunner().invoke(main, ["verify", str(repack(files, tmp_path / "v1.tar.gz"))])
    assert tampered.exit_code == 1 and "names no campaigns (schema_version 1" in tampered.output, tampered.output

    # With --expenses the ledger is shown apart (never added to a cost); the bundle does not hold it: named.
    (tmp_path / "ledger.csv").write_text("date,description,amount_usd,evidence\n2026-11-28,storage,4.20,inv 11\n",
                                         encoding="utf-8")
    ledgered = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--expenses", str(tmp_path / "ledger.csv"),
                                         "--out", str(tmp_path / "with-ledger")])
    assert ledgered.exit_code == decided.exit_code, ledgered.output
    with_ledger = (tmp_path / "with-ledger" / "decision.md").read_text()
    assert "## Other project expenses" in with_ledger and "| | total | 4.20 | |" in with_ledger
    assert json.loads((tmp_path / "with-ledger" / "decision.json").read_text())["configurations"] == \
        record["configurations"]  # the same costs: the ledger is never added
    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp_path / "with-ledger" / name, campaign / name)
    packed = CliRunner().invoke(main, ["bundle", str(campaign), "-o", str(tmp_path / "ledger.tar.gz")])
    assert packed.exit_code == 0, packed.output
    verified = CliRunner().invoke(main, ["verify", str(tmp_path / "ledger.tar.gz")])
    assert verified.exit_code == 1 and "it weighs an expenses ledger the bundle does not hold" in verified.output

    # Priced with --catalog FILE: the bundle carries that catalog (catalog/), and verify prices with it again
    shutil.copyfile(campaign / "catalog.csv", tmp_path / "my-catalog.csv")
    own = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--catalog", str(tmp_path / "my-catalog.csv"),
                                    "--out", str(tmp_path / "own-catalog")])
    assert own.exit_code == decided.exit_code, own.output
    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp_path / "own-catalog" / name, campaign / name)
    packed = CliRunner().invoke(main, ["bundle", str(campaign), "-o", str(tmp_path / "own.tar.gz")])
    assert packed.exit_code == 0, packed.output
    assert "catalog/my-catalog.csv" in bundle_members(tmp_path / "own.tar.gz")
    verified = CliRunner().invoke(main, ["verify", str(tmp_path / "own.tar.gz")])
    assert verified.exit_code == 0, verified.output

    # --reference names the campaign whose reference variant is the decision's one reference: with one campaign,
    # that campaign (the same decision); a directory not among the DIRs is refused by name, nothing written
    named = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--reference", str(campaign), "--json"])
    assert named.exit_code == decided.exit_code, named.output
    assert json.loads(named.stdout)["configurations"] == record["configurations"]
    elsewhere = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--reference", str(tmp_path),
                                          "--out", str(tmp_path / "not-written")])
    assert elsewhere.exit_code == 2, elsewhere.output
    assert "--reference names a directory that is not among those given to isocost decide" in elsewhere.output
    assert not (tmp_path / "not-written").exists()
    # --market is not wired for a server study: refused by name, with what to do instead
    market = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--market", str(campaign / "catalog.csv")])
    assert market.exit_code == 2, market.output
    assert "--market is not wired for a server study's decision yet" in market.output
    assert "one dated plan catalog" in market.output

    # The same decision as CSV: one row per configuration, as decision.json lists them.
    as_csv = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--format", "csv"])
    assert as_csv.exit_code == decided.exit_code, as_csv.output
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert as_csv.stdout.startswith("rank,configuration_id,campaign_id,capacity_qps,"), as_csv.stdout
    assert [row["configuration_id"] for row in rows] == [c["configuration_id"] for c in record["configurations"]]
    assert rows[0]["cost_usd"] == (record["configurations"][0]["cost_usd"] or "")
    assert rows[0]["per_million_output_tokens_usd"] == ""  # a classifier: no output tokens, and it says so
    assert rows[0]["per_million_output_tokens_reason"].startswith("not a generation task")
    assert rows[0]["not_a_measurement"] == record["test_hooks"][0]

