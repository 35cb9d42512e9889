"""``isocost decide --market`` on hand-written campaigns: the card measured from the trial manifests (mapped by the
GPU map, memory checked), unknown cards named, the filter recorded, and a decision priced with catalogs of other
dates written beside the earlier one. The market rows are MADE-UP (not real offers)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from recordfiles import manifest_for, sample_spec
from test_decide_cli import run, write_campaign

from protocol.decision.records import Decision
from protocol.io.jsonio import dumps
from protocol.records import codec

COLUMNS = ("gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source,billing,minimum_s,increment_s,"
           "provider,region,instance_type,accelerator,card_memory_gib,spot_usd_per_lot\n")


def _market(path: Path, day: str, price: str) -> Path:
    path.write_text(COLUMNS + f"h100-sxm,1,,{price},USD,{day},MADE-UP row,hourly,3600,3600,acme,r1,1x_h100,"
                    "H100-SXM,80,1.00\n"
                    f"h100-sxm,8,,20.00,USD,{day},MADE-UP row,hourly,3600,3600,bravo,r2,8x_h100,H100-SXM,80,\n",
                    encoding="utf-8")
    return path


def _manifest(gpu_name: str, memory_bytes: int) -> str:
    device = {"gpu_name": gpu_name, "gpu_memory_bytes": memory_bytes, "gpu_uuid": "GPU-1"}
    return dumps(codec.to_dict(manifest_for(sample_spec(), device=device)))


def test_the_measured_card_is_priced_across_providers_and_the_filter_recorded(
        tmp_path: Path, study_text: Callable[..., str]) -> None:
    root = write_campaign(tmp_path / "h100", study_text(minimum=0.5), {"batch_size=1": ["ok", "ok"]},
                          trial_texts={"manifest.json": _manifest("NVIDIA H100 80GB HBM3", 85_520_809_984)})
    market = _market(tmp_path / "market.csv", "2026-11-01", "3.00")
    out = tmp_path / "decision"  # decide writes under --out only
    result = run("decide", str(root), "--market", str(market), "--capacity", "on-demand", "--out", str(out))
    assert result.exit_code == 0, result.output
    memo = result.stdout
    assert "Card: h100-sxm (measured: NVIDIA H100 80GB HBM3, 79.6 GiB (trial manifests))." in memo
    assert "acme 1x_h100, on-demand, 1 instance(s) × 3.00 USD (hourly)" in memo
    assert "Runner-up: bravo 8x_h100, on-demand" in memo  # a 1-card job pays the whole 8-card instance
    written = (out / "decision.json").read_text(encoding="utf-8")
    assert dumps(codec.to_dict(codec.read_record(out / "decision.json", Decision))) == written  # reads back whole
    data = json.loads(written)["market"]
    table = run("decide", str(root), "--market", str(market), "--capacity", "on-demand", "--format", "csv")
    header, row = table.stdout.splitlines()[:2]
    assert header.endswith(",market_card,market_cheapest_provider,market_cheapest_instance,market_cheapest_capacity,"
                           "market_cheapest_usd,market_cheapest_per_accepted_result_usd,market_median_provider_usd,"
                           "market_catalog_date,market_no_offer_because")
    assert row.endswith(",h100-sxm,acme,1x_h100,on-demand,3.00,3.00,11.50,2026-11-01,")
    assert data["market_filter"] == {"capacity": "on-demand", "providers": [], "regions": [],
                                     "schema_version": 1}
    assert data["configurations"][0]["pricing"]["excluded"] == [
        "outside the filter (all providers; all regions; on-demand only) (1 row)"]


def test_an_unknown_or_mismatched_card_is_named_not_guessed(tmp_path: Path, study_text: Callable[..., str]) -> None:
    market = _market(tmp_path / "market.csv", "2026-11-01", "3.00")
    for name, memory, problem in (("NVIDIA H100", 80 * 2**30, "the card 'NVIDIA H100' is not in the GPU map (v1)"),
                                  ("NVIDIA H100 80GB HBM3", 40 * 2**30,
                                   "the card 'NVIDIA H100 80GB HBM3' reports 40.0 GiB, the GPU map's h100-sxm")):
        root = write_campaign(tmp_path / f"c{memory}", study_text(minimum=0.5), {"batch_size=1": ["ok"]},
                              trial_texts={"manifest.json": _manifest(name, memory)})
        result = run("decide", str(root), "--market", str(market))
        assert result.exit_code == 0, result.output
        assert f"No offer for **batch_size=1 on rtx-4090 ×2 lots**: {problem}" in result.stdout


def test_a_newer_catalog_never_re_prices_in_place(tmp_path: Path, study_text: Callable[..., str]) -> None:
    root = write_campaign(tmp_path / "h100", study_text(minimum=0.5), {"batch_size=1": ["ok"]},
                          trial_texts={"manifest.json": _manifest("NVIDIA H100 80GB HBM3", 85_520_809_984)})
    out = tmp_path / "decision"  # decide writes under --out only
    assert run("decide", str(root), "--out", str(out), "--market",
               str(_market(tmp_path / "old.csv", "2026-11-01", "3.00"))).exit_code == 0
    first = {name: (out / name).read_bytes() for name in ("decision.json", "decision.md", "report.html")}
    again = run("decide", str(root), "--out", str(out), "--market",
               str(_market(tmp_path / "old2.csv", "2026-11-01", "3.50")))
    assert again.exit_code == 0 and "earlier decision" not in again.stdout  # same dates: the same pricing, in place
    newer = run("decide", str(root), "--out", str(out), "--market",
               str(_market(tmp_path / "new.csv", "2026-11-20", "2.00")))
    assert newer.exit_code == 0, newer.output
    stamp = "2026-09-24_2026-11-20"
    assert (out / f"decision-priced-{stamp}.json").exists() and (out / f"report-priced-{stamp}.html").exists()
    assert "earlier decision: decision.json beside this one was priced with catalogs dated 2026-09-24; 2026-09-24; " \
           "2026-11-01; this decision is priced with catalogs dated 2026-09-24; 2026-09-24; 2026-11-20" in newer.stdout
    assert (out / "decision.json").read_bytes() != first["decision.json"]  # the same-date rerun rewrote it …
    assert json.loads((out / "decision.json").read_text(encoding="utf-8"))["market"]["catalogs"][1]["dates"] == [
        "2026-11-01"]  # … but the newer catalog never did
