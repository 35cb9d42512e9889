"""End-to-end: a text-generation campaign with the real SmolLM2 checkpoint, each trial in a fresh process.

Tiny on purpose (3 stories, 4 new tokens, batch 1 and 3, one pass each): CPU generation is slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.campaign_dir.layout import read_raw
from runner.cli import main

pytestmark = pytest.mark.e2e


def test_generation_campaign_rows_outputs_verdicts_and_validation(make_generation_workspace, tmp_path: Path) -> None:
    study = make_generation_workspace()
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    rows = read_raw(out / "raw.csv")
    assert [r["variant_id"] for r in rows] == ["batch_size=1", "batch_size=3"]
    for row in rows:
        assert (row["status"], row["ids_match"], row["corpus_accepted"], row["metric"]) == ("ok", "true", "true",
                                                                                            "rouge_l")
        assert row["predictions_path"] == f"trials/{row['trial_id']}/generations.jsonl"
        assert row["outputs_sha256"].startswith("generations.jsonl=")
        trial = out / "trials" / row["trial_id"]
        lines = [json.loads(line) for line in (trial / "generations.jsonl").read_text().splitlines()]
        assert [line["id"] for line in lines] == ["c0", "c1", "c2"]
        for line in lines:
            assert 1 <= line["n_tokens"] == len(line["tokens"]) <= 4
            assert len(line["top_ids"]) == line["n_tokens"] and all(len(k) == 5 for k in line["top_ids"])
            assert line["tokens"][0] == line["top_ids"][0][0]  # greedy: the most likely token
        batches = [json.loads(line) for line in (trial / "batches.jsonl").read_text().splitlines()]
        # Tokens reported per batch equal tokens counted independently from the output file.
        assert sum(b["generated_tokens"] for b in batches) == sum(line["n_tokens"] for line in lines)
        assert all(b["prefill_s"] > 0 and b["decode_s"] >= 0 for b in batches)
        manifest = json.loads((trial / "manifest.json").read_text())
        assert manifest["model"]["vocab_size"] == 49152 and manifest["model"]["decoding"] == "greedy"
        assert manifest["truncation"]["truncated_count"] == 0
    assert "reference" in (out / "corpus_index.csv").read_text().splitlines()[0]

    validated = CliRunner().invoke(main, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output
    verdicts = json.loads((out / "verdicts.json").read_text())["verdicts"]
    details = verdicts[1]["agreement_details"]
    assert set(details) >= {"identical_share", "near_tie_share", "length_ratio", "mean_generated_tokens"}
    assert details["near_tie_share"] >= details["identical_share"]
    summary = CliRunner().invoke(main, ["summarize", str(out)])
    assert summary.exit_code == 0 and "| batch_size=3 |" in summary.output
    figures = json.loads((out / "summary.json").read_text())["task_figures"]["batch_size=3"]["median"]
    assert figures["generated_tokens"] == sum(len(json.loads(line)["tokens"]) for line in
                                              (out / rows[1]["predictions_path"]).read_text().splitlines())
    assert figures["output_tokens_per_s"] == pytest.approx(figures["generated_tokens"] / float(rows[1]["pass_s"]))
    summary_md = (out / "summary.md").read_text()
    assert "## Generation per accepted pass" in summary_md
    # The rule's promise: the identical and near-tie shares, for every variant; and no word of labels.
    assert "identical token sequences" in summary_md and "near tie" in summary_md
    assert "| batch_size=3 | " in summary_md.split("## Agreement with the reference variant")[1]
    assert "yields labels" not in summary_md and "yields generated token sequences" in summary_md
    shares = json.loads((out / "summary.json").read_text())["task_figures"]["batch_size=3"]["agreement"]
    assert shares["identical_share"]["median"] == details["identical_share"]
    assert shares["near_tie_share"]["median"] == details["near_tie_share"]
    bundle = tmp_path / "gen.tar.gz"
    packed = CliRunner().invoke(main, ["bundle", str(out), "-o", str(bundle)])
    assert packed.exit_code == 0, packed.output
    verified = CliRunner().invoke(main, ["verify", str(bundle)])
    assert verified.exit_code == 0, verified.output


def test_a_prompt_longer_than_max_length_is_truncated_and_counted(make_generation_workspace, tmp_path: Path) -> None:
    study = make_generation_workspace(batches="[2]", replace={"max_length = 128": "max_length = 40"})
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    row = read_raw(out / "raw.csv")[0]
    assert row["status"] == "ok" and int(row["truncated_count"]) >= 1
