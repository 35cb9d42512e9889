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

from protocol.records.stages import Rental
from runner.analysis.summarize import summarize_campaign
from runner.campaign.run import run_campaign
from runner.cli import main
from runner.launch.kinds.process.launcher import ProcessLauncher
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
    # Nor is one of schema_version 2 (before decide --market): decide again.
    old = json.loads(bundle_members(bundle)["campaign/decision.json"])
    del old["market"]
    old["schema_version"] = 2
    files["campaign/decision.json"] = json.dumps(old).encode()
    tampered = CliRunner().invoke(main, ["verify", str(repack(files, tmp_path / "v2.tar.gz"))])
    assert tampered.exit_code == 1 and "decision.json of schema_version 2 (before decide --market): decide again" \
        in tampered.output, tampered.output

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
    # --market: the replicas priced across providers for the period (MADE-UP rows, not real offers)
    _priced_across_providers(campaign, tmp_path, decided.exit_code)

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



MARKET = ("gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source,billing,minimum_s,increment_s,"
          "provider,region,instance_type,accelerator,card_memory_gib,spot_usd_per_lot\n"
          "rtx-4090,1,,0.50,USD,2026-11-20,MADE-UP row,hourly,3600,3600,acme,r1,1x_4090,RTX 4090,24,\n"
          "rtx-4090,2,,0.90,USD,2026-11-20,MADE-UP row,hourly,3600,3600,bravo,r2,2x_4090,RTX 4090,24,\n")


def _priced_across_providers(campaign: Path, tmp_path: Path, exit_code: int) -> None:
    """``decide --market`` on the server campaign: a section per configuration with its replicas' offers for the
    whole period and each one's cost per million requests, the market columns in the CSV, and a bundle of that
    decision named by ``verify`` as not re-derivable (the market catalogs are not in it)."""
    market = tmp_path / "market.csv"
    market.write_text(MARKET, encoding="utf-8")
    priced = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--market", str(market),
                                       "--out", str(tmp_path / "priced")])
    assert priced.exit_code == exit_code, priced.output
    memo = (tmp_path / "priced" / "decision.md").read_text()
    record = json.loads((tmp_path / "priced" / "decision.json").read_text())
    assert record["schema_version"] == 3 and "## Prices across providers" in memo
    assert [use["dates"] for use in record["market"]["catalogs"]][1:] == [["2026-11-20"]]
    config = record["configurations"][0]
    item = record["market"]["configurations"][0]
    assert item["card"] == "rtx-4090" and item["card_source"].startswith("declared: the rental names rtx-4090")
    if config["replicas"] is not None:  # a capacity: ceil(50 / 20) = 3 cards for 7 × 24 h
        offers = item["pricing"]["offers"]
        # acme: 3 one-card instances × 168 h × 0.50 = 252.00; bravo: 2 two-card instances × 168 h × 0.90 = 302.40
        assert [(o["provider"], o["instances"], o["total_usd"]) for o in offers[:2]] == [
            ("acme", 3, "252.00"), ("bravo", 2, "302.40")], offers
        assert item["pricing"]["needed_h"] == 168.0 and item["pricing"]["cards_needed"] == 3
        # 252.00 USD / (50 qps × 3,600 s × 8 h × 7 days = 10,080,000 requests) × 10⁶ = 25.00 USD per million
        assert "| acme | 1x_4090 | r1 | hourly | on-demand | 3 × 1 | 0.50 | 252.00 | 25.00 | 2026-11-20 |" in memo
        assert "Needed period 168 h on 3 card(s), the replicas, 10,080,000 requests at the peak." in memo, memo
        assert record["market"]["cheapest"]["provider"] == "acme"
    else:  # the loaded VM missed the bound: no capacity, so no replicas to price, and the memo says why
        assert item["pricing"] is None and item["empty_reason"].startswith("no replicas to price: no capacity")
    table = CliRunner().invoke(main, ["decide", str(campaign), *DEMAND, "--market", str(market), "--format", "csv"])
    header, row = table.stdout.splitlines()[:2]
    assert header.endswith(",market_card,market_cheapest_provider,market_cheapest_instance,market_cheapest_capacity,"
                           "market_cheapest_usd,market_cheapest_per_million_requests_usd,market_median_provider_usd,"
                           "market_catalog_date,market_no_offer_because"), header
    if config["replicas"] is not None:
        # the median over the three sellers' cheapest: acme 252.00, bravo 302.40, the plan catalog's 3 × 110.00
        assert row.endswith(",rtx-4090,acme,1x_4090,on-demand,252.00,25.00,302.40,2026-11-20,"), row
    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp_path / "priced" / name, campaign / name)
    packed = CliRunner().invoke(main, ["bundle", str(campaign), "-o", str(tmp_path / "priced.tar.gz")])
    assert packed.exit_code == 0, packed.output
    verified = CliRunner().invoke(main, ["verify", str(tmp_path / "priced.tar.gz")])
    assert verified.exit_code == 1 and "it was priced across providers (decide --market)" in verified.output, \
        verified.output
