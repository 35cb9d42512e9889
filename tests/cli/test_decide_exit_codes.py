"""``isocost decide`` exits 3 whenever the memo cannot answer the question, with the memo written (issue 38, class 8).

"Nothing fits" (the declared job fits no plan) already exited 3; every other memo that answers no (no configuration
chosen: none accepted, no plan or rental known for the hardware, the deadline out of reach, a campaign with no pass;
or, with a [job], no configuration can do the job) exited 0, as if it had chosen. Each case: exit 3, the memo printed
and written under --out (decision.json's ``chosen`` is null), and stderr saying why in one line; a chosen
configuration still exits 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from test_decide_cli import batches_jsonl, run, write_campaign

from runner.campaign_dir.raw_format import HEADER_LINE

_DEADLINE = '\n[deadline]\nstart = "2026-11-02T09:00"\nend = "2026-11-06T09:00"\ntz = "Europe/Paris"\nwaiting_h = 95\n'
_JOB = "\n[job]\ninputs = 1000\nbootstrap_resamples = 100\n"


@pytest.mark.parametrize(("case", "extra", "passes", "options", "said"), [
    ("no pass accepted", "", {"batch_size=1": ["oom", "oom"]}, {}, "No configuration is chosen"),
    ("a GPU no plan prices", "", {"batch_size=1": ["ok", "ok"]}, {"gpu": "h100", "lots": 1},
     "No configuration is chosen"),
    ("no rental recorded", "", {"batch_size=1": ["ok"]}, {"gpu": None}, "No configuration is chosen"),
    ("the deadline out of reach", _DEADLINE, {"batch_size=1": ["ok", "ok"]}, {"trial_s": 1800},
     "No configuration is chosen"),
    ("a campaign with no pass", "", {"batch_size=1": []}, {}, "No configuration is chosen"),
    ("a job no configuration can do", _JOB, {"batch_size=1": ["ok", "ok"]}, {},
     "No configuration can do the declared job"),
])
def test_a_memo_that_answers_no_exits_3_with_the_memo_written(
        tmp_path: Path, study_text: Callable[..., str], case: str, extra: str, passes: dict[str, list[str]],
        options: dict[str, object], said: str) -> None:
    root = write_campaign(tmp_path / "c", study_text(minimum=0.5) + extra, passes, **options)  # type: ignore[arg-type]
    if not any(passes.values()):  # started, no trial ended yet: raw.csv holds its header alone
        (root / "raw.csv").write_text(HEADER_LINE + "\n", encoding="utf-8")
    out = tmp_path / "decided"
    result = run("decide", str(root), "--out", str(out))
    assert result.exit_code == 3, (case, result.output)
    assert "Traceback" not in result.output and "Error:" not in result.output
    memo = (out / "decision.md").read_text(encoding="utf-8")
    assert memo in result.stdout and f"**{said}" in memo
    decision = json.loads((out / "decision.json").read_text(encoding="utf-8"))
    assert decision["chosen"] is None or decision["job"]["chosen"] is None
    assert said in result.stderr and str(out / "decision.md") in result.stderr, result.stderr
    without_out = run("decide", str(root), "--format", "csv")
    assert without_out.exit_code == 3 and "the memo above" not in without_out.stderr
    assert said in without_out.stderr


def test_a_chosen_configuration_exits_0(tmp_path: Path, study_text: Callable[..., str]) -> None:
    text = study_text(minimum=0.5) + _JOB
    root = write_campaign(tmp_path / "c", text, {"batch_size=1": ["ok", "ok"]},
                          trial_texts={"batches.jsonl": batches_jsonl(0.01)})
    result = run("decide", str(root))
    assert result.exit_code == 0, result.output
    assert "**Chosen:" in result.stdout and "**Cheapest for the job:" in result.stdout
    assert result.stderr.startswith("Nothing written")


def test_decide_help_documents_every_exit_status() -> None:
    text = " ".join(run("decide", "--help").output.split())
    for words in ("0 the memo is written and names a choice", "3 the memo", "no configuration is chosen",
                  "nothing fits", "no configuration can do the declared job", "2 an error"):
        assert words in text, words
