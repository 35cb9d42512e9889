"""A server study's decision printed as CSV and with an expenses ledger (issue 36).

``decide --format csv``: one row per configuration, its capacity, replicas, lots, the cheapest billing option over
the period, the cost per million requests and per million output tokens; a figure that could not be taken is an
empty cell with its reason beside it, never a zero. ``decide --expenses``: the ledger is shown apart in the memo and
recorded in decision.json, never added to a configuration's cost, as in the offline decision. Built from records
and a MADE-UP catalog; the figures are hand-computed in the comments.
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

from protocol.costing.catalog_file import load_catalog
from protocol.decision.capacity import RunFacts, capacities
from protocol.decision.ledger import parse_ledger
from protocol.decision.serving import (
    ServingCampaign,
    ServingConfigInput,
    ServingDecision,
    ServingDemand,
    price_configuration,
    rank_serving,
)
from protocol.records.codec import to_dict
from runner.decision.render.csv_table import SERVING_COLUMNS, render_serving_csv
from runner.decision.serving.memo import render_serving_memo

MADE_UP = "MADE-UP test catalog (not a real offer)"
CATALOG = f"""gpu,cards_per_lot,billing,plan_days,price_usd_per_lot,minimum_s,increment_s,currency,catalog_date,source
rtx-4090,1,flat,7,110.00,,,USD,2026-11-30,{MADE_UP}
rtx-4090,1,hourly,,0.70,3600,3600,USD,2026-11-30,{MADE_UP}
"""
HOOK = "NOT A MEASUREMENT: the test-only fault hook was set when c2 ran (…)"


def _run(config: str, trial: str, accepted: bool) -> RunFacts:
    return RunFacts(trial, f"{config}@20", config, 20.0, "ok", accepted,
                    "" if accepted else "not shown the same result as b=1", "VALID", 50.0, 100.0, True, 20.0, 100, 3000)


def _decision(tmp_path: Path) -> ServingDecision:
    (tmp_path / "catalog.csv").write_text(CATALOG, encoding="utf-8")
    catalog = load_catalog(tmp_path / "catalog.csv")
    demand = ServingDemand(40.0, 8.0, 7)
    first = capacities([_run("b=1", "t1", True), _run("b=4", "t2", False)], (20.0,))
    [second] = capacities([_run("b=8", "t3", True)], (20.0,))
    inputs = [ServingConfigInput(f"{c.configuration} on rtx-4090", c, "rtx-4090", "", 30.0, "", "c1") for c in first]
    inputs.append(ServingConfigInput("b=8 on host vm", second, None, "no rental recorded", 30.0, "", "c2"))
    configs, ranking = rank_serving([price_configuration(item, demand, catalog) for item in inputs])
    return ServingDecision("serve", "Which?", "text-generation", "p99 latency ≤ 100 ms", (20.0,), demand,
                           catalog.path, catalog.dates_text, configs, ranking, ranking[0], (), (),
                           test_hooks=(HOOK,), campaigns=(ServingCampaign("a", "c1", "rtx-4090 ×1 lot"),
                                                          ServingCampaign("b", "c2", "host vm", (HOOK,))))


def test_one_row_per_configuration_with_units_in_the_column_names(tmp_path: Path) -> None:
    text = render_serving_csv(_decision(tmp_path))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(text.splitlines()[0].split(",")) == SERVING_COLUMNS
    assert [r["configuration_id"] for r in rows] == ["b=1 on rtx-4090", "b=4 on rtx-4090", "b=8 on host vm"]
    figures = [c for c in SERVING_COLUMNS if c.endswith(("_qps", "_usd", "_cards", "_days")) or c == "lots"]
    assert {"capacity_qps", "cost_usd", "per_million_requests_usd", "per_million_output_tokens_usd",
            "replicas_cards", "period_days"} <= set(figures)
    one = rows[0]
    # ceil(40 / 20) = 2 cards, 2 one-card lots: a 7-day flat plan each, 2 × 110.00 = 220.00 USD (hourly: 168 h × 2
    # × 0.70 = 235.20, dearer); 40 × 3600 × 8 × 7 = 8,064,000 requests: 220 / 8.064 = 27.28 USD per million;
    # 30 output tokens each: 241,920,000 tokens, 220 / 241.92 = 0.91 USD per million output tokens
    assert (one["rank"], one["capacity_qps"], one["replicas_cards"], one["lots"], one["cost_usd"]) == \
        ("1", "20.0", "2", "2", "220.00")
    assert (one["cost_billing"], one["per_million_requests_usd"], one["per_million_output_tokens_usd"]) == \
        ("flat (7 days)", "27.28", "0.91")
    assert (one["peak_qps"], one["hours_per_day"], one["period_days"]) == ("40.0", "8.0", "7")
    assert (one["answers_accepted"], one["not_ranked_because"], one["not_a_measurement"]) == ("True", "", "")
    assert one["per_million_output_tokens_reason"] == ""


def test_a_figure_not_taken_is_an_empty_cell_with_its_reason_never_a_zero(tmp_path: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(render_serving_csv(_decision(tmp_path)))))
    refused, unrented = rows[1], rows[2]
    assert (refused["rank"], refused["capacity_qps"], refused["replicas_cards"], refused["cost_usd"]) == ("", "", "",
                                                                                                          "")
    assert refused["answers_accepted"] == "False"
    assert refused["capacity_reason"].startswith("outputs not accepted")
    assert refused["cost_reason"].startswith("no capacity: outputs not accepted")
    assert refused["not_ranked_because"].startswith("no capacity")
    assert refused["per_million_requests_usd"] == "" and refused["per_million_output_tokens_usd"] == ""
    assert refused["per_million_output_tokens_reason"] == "no cost: see cost_reason"
    # measured, but its campaign recorded no rental: the replicas are counted, no price is guessed
    assert (unrented["capacity_qps"], unrented["replicas_cards"], unrented["cost_usd"]) == ("20.0", "2", "")
    assert "no rental recorded" in unrented["cost_reason"] and "no price is guessed" in unrented["not_ranked_because"]
    assert unrented["not_a_measurement"] == HOOK  # its campaign ran with the fault hook; the other did not
    for row in rows[1:]:
        assert "0" not in (row["cost_usd"], row["capacity_qps"], row["per_million_requests_usd"])


LEDGER = "date,description,amount_usd,evidence\n2026-11-28,object storage,4.20,invoice STO-11\n" \
         "2026-11-30,egress,10.05,invoice EG-7\n"


def test_the_ledger_is_shown_apart_and_never_added_to_a_cost(tmp_path: Path) -> None:
    plain = _decision(tmp_path)
    with_ledger = replace(plain, ledger=parse_ledger(LEDGER, "ledger.csv"))
    memo = render_serving_memo(with_ledger)
    assert "## Other project expenses\n\nFrom ledger.csv; shown apart, never added to a configuration's cost." in memo
    assert "| 2026-11-28 | object storage | 4.20 | invoice STO-11 |" in memo
    assert "| | total | 14.25 | |" in memo  # 4.20 + 10.05
    assert "220.00 USD over 7 day(s)" in memo  # the chosen configuration's cost, as without the ledger
    assert render_serving_csv(with_ledger) == render_serving_csv(plain)
    assert to_dict(with_ledger)["ledger"]["path"] == "ledger.csv" and to_dict(plain)["ledger"] is None
    assert "None given (pass a ledger with --expenses FILE)" in render_serving_memo(plain)
    assert "- campaign c1 (a): rtx-4090 ×1 lot\n- campaign c2 (b): host vm\n" in memo  # the campaigns weighed
