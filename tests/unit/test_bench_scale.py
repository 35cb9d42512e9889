"""benchmarks.scale at a tiny size: both rows side by side with their baselines, judged on the ratio."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks import scale


def test_validation_row_measures_ours_and_the_baseline_in_the_same_run():
    row = scale.validation_row(predictions=2_000, pairs=2, progress=lambda message: None)
    assert row.key == "5a" and "2,000 predictions" in row.title and "json.loads per line" in row.title
    assert row.ratio.endswith("ours/baseline") and row.baseline.endswith("json.loads/line + sets")
    assert row.target == "≤ 0.5 × baseline"
    details = row.details
    assert details["ours_s"]["n"] == details["baseline_s"]["n"] == 2
    ratios = details["ratio_ours_over_baseline"]["samples"]
    assert ratios == pytest.approx([o / b for o, b in zip(details["ours_s"]["samples"],
                                                          details["baseline_s"]["samples"], strict=True)])


def test_summary_row_measures_ours_and_pandas_in_the_same_run():
    row = scale.summary_row(variants=20, repetitions=2, pairs=2, progress=lambda message: None)
    assert row.key == "5b" and "40 raw rows" in row.title and "pandas" in row.baseline
    assert row.target == "≤ 1.5 × baseline" and row.ratio.endswith("ours/baseline")
    details = row.details
    assert [details[f"ours_{part}_s"]["n"] for part in ("chain", "frame", "summarize")] == [2, 2, 2]
    shares = details["chain_share_of_ours"]["samples"]
    assert shares == pytest.approx([chain / ours for chain, ours in zip(details["ours_chain_s"]["samples"],
                                                                         details["ours_s"]["samples"], strict=True)])
    assert "chain" in row.measured
    assert row.details["absolute_target_s"] == scale.SUMMARY_TARGET_S
    floor = details["ratio_chain_and_frame_over_baseline"]["samples"]
    assert floor == pytest.approx([
        (chain + frame) / base for chain, frame, base in zip(details["ours_chain_s"]["samples"],
                                                             details["ours_frame_s"]["samples"],
                                                             details["baseline_s"]["samples"], strict=True)])
    assert details["chain_and_frame_s"]["n"] == details["chain_and_frame_quoted_s"]["n"] == 2


def test_the_quoted_copy_of_the_raw_table_has_a_quoted_cell_in_every_row_and_the_same_rows(tmp_path):
    from runner.campaign_dir.raw_frame import read_frame

    rows = scale.make_raw_table(6, 2)[0]
    scale.write_raw_table(tmp_path / "raw.csv", rows, quoted=True)
    lines = (tmp_path / "raw.csv").read_text(encoding="utf-8").splitlines()[1:]
    assert len(lines) == 12 and all(f'"{scale.QUOTED_REASON}' in line or f'; {scale.QUOTED_REASON}"' in line
                                    for line in lines)
    frame = read_frame(tmp_path / "raw.csv", ("trial_id", "empty_reasons"))
    assert frame["trial_id"].tolist() == [row["trial_id"] for row in rows]
    assert all(reasons.endswith(scale.QUOTED_REASON) for reasons in frame["empty_reasons"].tolist())


def test_the_synthetic_raw_table_is_the_same_whatever_the_hash_seed():
    # The pass times were once drawn from hash(variant_id), which changes with PYTHONHASHSEED: two runs of the
    # benchmark then summarized different tables (and counted different spread warnings).
    script = ("import hashlib, json; from benchmarks.scale import make_raw_table; "
              "print(hashlib.sha256(json.dumps(make_raw_table(30, 2)[0]).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed},
                              capture_output=True, text=True, check=True).stdout for seed in ("1", "2")}
    assert len(digests) == 1
