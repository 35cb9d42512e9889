"""End-to-end: a real tiny server campaign (one rate, the real tiny classifier, each trial in its own process), then
``isocost decide`` on it with the declared traffic: capacity, replicas, money, the memo and the exit status.

The second variant runs under the test-only ``disagree`` fault (its answers differ from the reference's on half the
ids): it is served, maybe faster, and never ranked. The campaign directory keeps every byte and mtime (decide writes
only under ``--out``). A second campaign, rented as a B200 lot, is then decided with the first: every configuration
compared by id with the one reference, priced on its own card. A second test declares two rates: a configuration
that meets the bound only at the lower rate is counted there (more cards).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from serving_study import TRAFFIC

from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.cli import main
from runner.launch.kinds.process.launcher import ProcessLauncher
from runner.trial.faults import FAULT_ENV

pytestmark = pytest.mark.e2e
pytest.importorskip("mlperf_loadgen")



def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): ("dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest(),
                                       p.lstat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def test_decide_on_a_server_campaign(make_workspace: Callable[..., Path], tmp_path: Path) -> None:
    study = make_workspace("serve", n=12, repetitions=1, batches="[1, 4]", extra=TRAFFIC,
                           replace={'scenario = "offline"': 'scenario = "server"',
                                    "min_agreement = 0.99": "min_agreement = 0.9"})
    out = tmp_path / "out"

    def progress(message: str) -> None:
        if ": ok" in message:
            os.environ[FAULT_ENV] = "disagree:0.5"  # the second trial (not the reference) answers differently

    try:
        run_campaign(study, out, ProcessLauncher(), progress=progress, rental=Rental("rtx-4090", 1))
    finally:
        os.environ.pop(FAULT_ENV, None)
    rows = read_raw(out / "raw.csv")
    assert [r["variant_id"] for r in rows] == ["batch_size=1", "batch_size=4"]
    serving = json.loads((out / "trials" / rows[0]["trial_id"] / "manifest.json").read_text())["serving"]
    held = serving["result"] == "VALID" and serving["latency_within_bound"] is True
    before = _snapshot(out)

    missing = CliRunner().invoke(main, ["decide", str(out)])
    assert missing.exit_code == 2 and "--peak-qps is missing" in missing.output, missing.output
    offline_flags = CliRunner().invoke(main, ["decide", str(out), "--peak-qps", "0", "--hours-per-day", "8",
                                              "--days", "7"])
    assert offline_flags.exit_code == 2 and "--peak-qps must be a finite number above 0" in offline_flags.output

    decided = CliRunner().invoke(main, ["decide", str(out), "--peak-qps", "50", "--hours-per-day", "8", "--days",
                                        "7", "--out", str(tmp_path / "decision")])
    memo = (tmp_path / "decision" / "decision.md").read_text()
    assert decided.output.startswith(memo), decided.output
    record = json.loads((tmp_path / "decision" / "decision.json").read_text())
    assert (tmp_path / "decision" / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert "Declared traffic: 50 queries per second at the peak, 8 h a day, over 7 day(s): 10,080,000 requests" \
        in memo
    # the disagreeing variant: served, never ranked, no capacity (never a zero)
    assert "- batch_size=4 on rtx-4090 ×1 lot: no capacity: outputs not accepted" in memo, memo
    assert "batch_size=4 on rtx-4090 ×1 lot" not in record["ranking"]
    if held:
        # ceil(50 / 20) = 3 replicas, one rtx-4090 card a lot, one 7-day plan each: 3 × 110.00 = 330.00 USD;
        # 330.00 / 10.08 million requests = 32.74 USD per million
        assert decided.exit_code == 0, decided.output
        assert record["chosen"] == "batch_size=1 on rtx-4090 ×1 lot"
        assert ("**Chosen: batch_size=1 on rtx-4090 ×1 lot**: 3 card(s) (3 lot(s) of 1), 330.00 USD over 7 day(s) "
                "(flat (7 days)); 32.74 USD per million requests at the bound.") in memo
        assert "a single rate declared: the bound held at 20 qps" in memo
    else:  # the loaded VM missed the bound or LoadGen said INVALID: nothing is chosen, and it says why
        assert decided.exit_code == 3 and record["chosen"] is None and "**Nothing chosen**" in memo
    assert _snapshot(out) == before  # decide wrote nothing into the campaign it read

    # A second campaign of the same study, rented as one B200 lot (2 cards): every configuration is compared by id
    # with the decision's one reference (batch_size=1 on the first campaign) and priced on its own card.
    other = tmp_path / "b200"
    run_campaign(study, other, ProcessLauncher(), rental=Rental("b200", 1))
    second = json.loads((other / "trials" / read_raw(other / "raw.csv")[0]["trial_id"] / "manifest.json")
                        .read_text())["serving"]
    both = CliRunner().invoke(main, ["decide", str(out), str(other), "--peak-qps", "50", "--hours-per-day", "8",
                                     "--days", "7", "--json"])
    assert both.exit_code in (0, 3), both.output
    record = json.loads(both.stdout)
    configs = {c["configuration_id"]: c for c in record["configurations"]}
    b200 = configs["batch_size=1 on b200 ×1 lot"]
    if second["result"] == "VALID" and second["latency_within_bound"] is True:
        # ceil(50 / 20) = 3 cards, 2 a B200 lot: 2 lots × one 7-day plan at 2071.00 = 4142.00 USD
        assert (b200["replicas"], b200["lots"], b200["cost_usd"]) == (3, 2, "4142.00"), b200
    assert configs["batch_size=4 on rtx-4090 ×1 lot"]["rank"] is None
    assert [c["label"] for c in record["campaigns"]] == [str(out), str(other)]

    # --reference names the other campaign: it is weighed first and the memo says so; the disagreeing variant is
    # still refused (it differs from batch_size=1 on the B200 campaign as from the first one)
    named = CliRunner().invoke(main, ["decide", str(out), str(other), "--peak-qps", "50", "--hours-per-day", "8",
                                      "--days", "7", "--reference", str(other)])
    assert named.exit_code in (0, 3), named.output
    other_id = record["campaigns"][1]["campaign_id"]
    assert f"Reference: the study's reference variant on campaign {other_id} ({other}, " in named.output, named.output
    assert "- batch_size=4 on rtx-4090 ×1 lot: no capacity: outputs not accepted" in named.output, named.output


def test_a_configuration_that_meets_the_bound_only_at_the_lower_rate(make_workspace: Callable[..., Path],
                                                                    tmp_path: Path) -> None:
    """Two rates, 4 and 40 qps, every served batch made 80 ms slower by the test-only ``sleep-per-batch`` fault.
    Batch 1 cannot hold 40 qps (48 queries need at least 3.8 s of service against 1.2 s of arrivals: its p90 waits
    over 2 s, above the 1 s bound), so its capacity is 4 qps and a peak of 80 qps needs ceil(80 / 4) = 20 cards;
    batch 8 takes the queue in batches and may hold 40 qps (2 cards)."""
    traffic = TRAFFIC.replace("rate_qps = 20.0", "rates_qps = [4.0, 40.0]").replace("latency_bound_ms = 5000",
                                                                                    "latency_bound_ms = 1000")
    study = make_workspace("rates", n=12, repetitions=1, batches="[1, 8]", extra=traffic,
                           replace={'scenario = "offline"': 'scenario = "server"'})
    out = tmp_path / "out"
    os.environ[FAULT_ENV] = "sleep-per-batch:0.08"
    try:
        run_campaign(study, out, ProcessLauncher(), rental=Rental("rtx-4090", 1))
    finally:
        os.environ.pop(FAULT_ENV, None)
    serving = {r["variant_id"]: json.loads((out / "trials" / r["trial_id"] / "manifest.json").read_text())["serving"]
               for r in read_raw(out / "raw.csv")}
    assert serving["batch_size=1@rate_qps=40"]["latency_within_bound"] is False  # the physics above
    decided = CliRunner().invoke(main, ["decide", str(out), "--peak-qps", "80", "--hours-per-day", "8", "--days",
                                        "7", "--json"])
    record = json.loads(decided.stdout)
    configs = {c["configuration_id"]: c for c in record["configurations"]}
    one = configs["batch_size=1 on rtx-4090 ×1 lot"]
    low = serving["batch_size=1@rate_qps=4"]
    if low["result"] == "VALID" and low["latency_within_bound"] is True:
        assert (one["capacity"]["capacity_qps"], one["capacity"]["fails_at_qps"]) == (4.0, 40.0), one
        assert (one["replicas"], one["lots"], one["cost_usd"]) == (20, 20, "2200.00")  # 20 one-card 7-day plans
    else:
        assert one["capacity"]["capacity_qps"] is None and one["rank"] is None
    eight = configs["batch_size=8 on rtx-4090 ×1 lot"]
    held = [rate for rate in (4, 40) if serving[f"batch_size=8@rate_qps={rate}"]["latency_within_bound"] is True
            and serving[f"batch_size=8@rate_qps={rate}"]["result"] == "VALID"]
    if held[:1] == [4]:  # the capacity walk: the lower rate first
        capacity = 40.0 if held == [4, 40] else 4.0
        assert eight["capacity"]["capacity_qps"] == capacity and eight["replicas"] == math.ceil(80 / capacity)
    if eight["rank"] == 1 and one["rank"] is not None:
        assert record["chosen"] == "batch_size=8 on rtx-4090 ×1 lot" and eight["replicas"] < one["replicas"]
