"""``isocost check`` predicts ``run`` and ``decide``: what they refuse from the study, the inputs and the host alone
is refused by ``check`` first, with the same message, before any rental time is spent.

Each case makes one such input, then asserts that ``check`` fails naming the cause, and (where ``run`` is the one
that refuses) that ``run`` refuses with the same text. No model weights: every refusal comes before the first trial.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_hostile_inputs import assert_out_usable, assert_user_error, invoke, run_args, write_study
from test_hostile_inputs import ws as ws  # noqa: F401  (the fixture)


def _check(study: Path, *more: str) -> str:
    result = invoke(["check", str(study), "--launcher", "process", *more])
    assert result.exit_code != 0, result.output
    assert "isocost run would not start" in result.output, result.output
    return result.output


def _run_error(study: Path, out: Path) -> str:
    result = invoke(run_args(study, out))
    assert_user_error(result)
    assert_out_usable(out)
    return result.output[result.output.index("Error: "):].splitlines()[0].removeprefix("Error: ")


def _same_refusal(ws: Path, tmp_path: Path, study: Path, *fragments: str) -> None:
    """check FAILs and run refuses, both with run's own words (the what of run's error is in check's report)."""
    said = _check(study)
    run_said = _run_error(study, tmp_path / "out")
    for fragment in fragments:
        assert fragment in said and fragment in run_said, (fragment, said, run_said)
    what = run_said.split(" (", 1)[0]
    assert what in said, (what, said)


def _set_id2label(ws: Path, id2label: dict[str, str]) -> Path:
    config = json.loads((ws / "model" / "config.json").read_text())
    config["id2label"] = id2label
    config["label2id"] = {v: int(k) for k, v in id2label.items()}
    (ws / "model" / "config.json").write_text(json.dumps(config))
    return write_study(ws)


def test_check_refuses_an_id2label_with_gaps_as_run_does(ws, tmp_path):
    study = _set_id2label(ws, {"0": "x", "2": "y"})  # every trial would die at the first prediction of id 1
    _same_refusal(ws, tmp_path, study, "id2label ids must be 0 to 1", "missing: 1", "not allowed: 2")


def test_check_refuses_an_id2label_with_a_negative_id(ws, tmp_path):
    study = _set_id2label(ws, {"-1": "x", "0": "y"})
    _same_refusal(ws, tmp_path, study, "id2label ids must be 0 to 1", "missing: 1", "not allowed: -1")


def _deadline_study(ws: Path, start: datetime, end: datetime, job: bool = True) -> Path:
    fmt = "%Y-%m-%dT%H:%M"
    extra = (f'\n[deadline]\nstart = "{start.strftime(fmt)}"\nend = "{end.strftime(fmt)}"\ntz = "UTC"\n')
    if job:
        extra += "\n[job]\ninputs = 1000\n"
    return write_study(ws, extra=extra)


def test_check_refuses_a_deadline_already_past_with_decides_message(ws):
    now = datetime.now(UTC)
    study = _deadline_study(ws, now - timedelta(days=3), now - timedelta(days=1))
    said = _check(study)
    assert "FAIL  deadline: the deadline is already past: the window ended" in said, said
    assert "move the [deadline] window forward, or drop [job]" in said


def test_check_warns_of_a_past_deadline_without_a_job(ws):
    now = datetime.now(UTC)
    study = _deadline_study(ws, now - timedelta(days=3), now - timedelta(days=1), job=False)
    result = invoke(["check", str(study), "--launcher", "process"])
    assert "warn  deadline: the deadline is already past" in result.output, result.output


def test_check_accepts_a_deadline_ahead(ws):
    now = datetime.now(UTC)
    study = _deadline_study(ws, now + timedelta(days=1), now + timedelta(days=3))
    result = invoke(["check", str(study), "--launcher", "process"])
    assert "ok    deadline:" in result.output and result.exit_code == 0, result.output


def test_check_and_run_give_the_same_fingerprint_message(ws, tmp_path):
    study = write_study(ws, fingerprints={"corpus.jsonl": "sha256:" + "1" * 64})
    _same_refusal(ws, tmp_path, study, "corpus fingerprint sha256:", "differs from the study's")


def test_check_and_run_give_the_same_warmup_message(ws, tmp_path):
    study = write_study(ws)
    study.write_text(study.read_text().replace("inputs = 2", "inputs = 9"))
    _same_refusal(ws, tmp_path, study, "the warm-up needs 9 inputs but the tuning corpus has 4")


def test_check_and_run_give_the_same_missing_catalog_message(ws, tmp_path):
    (ws / "nowhere.csv").write_text("x")
    study = write_study(ws, extra='\n[costing]\ncatalog = "nowhere.csv"\n')
    (ws / "nowhere.csv").unlink()
    _same_refusal(ws, tmp_path, study, "the plan catalog named by the study is not found")


def test_check_and_run_give_the_same_missing_input_message(ws, tmp_path):
    study = write_study(ws)
    (ws / "tuning.jsonl").unlink()
    _same_refusal(ws, tmp_path, study, "tuning not found at")


# -- run's own options, given to check: the same refusals --------------------------------------------------------

def _both(ws: Path, tmp_path: Path, *flags: str, out: Path | None = None) -> tuple[str, str]:
    study = write_study(ws)
    out = out or tmp_path / "out"
    checked = invoke(["check", str(study), "--launcher", "process", "--out", str(out), *flags])
    assert checked.exit_code == 2 and "isocost run would not start" in checked.output, checked.output
    ran = invoke([*run_args(study, out), *flags])
    assert_user_error(ran)
    return checked.output, ran.output


def test_check_refuses_an_out_that_holds_something_as_run_does(ws, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    said, run_said = _both(ws, tmp_path, out=out)
    assert "FAIL  out: the results directory is not empty and holds no campaign" in said
    assert "the results directory is not empty and holds no campaign" in run_said


def test_check_refuses_lots_without_gpu_and_a_bad_gpu_name_as_run_does(ws, tmp_path):
    said, run_said = _both(ws, tmp_path, "--lots", "2")
    assert "--lots needs --gpu" in said and "--lots needs --gpu" in run_said
    said, run_said = _both(ws, tmp_path, "--gpu", "=HYPERLINK(1)")
    what = run_said[run_said.index("Error: ") + 7:].split(" (")[0]
    assert what in said, (what, said)


def test_check_warns_of_a_gpu_the_catalog_cannot_price(ws):
    study = write_study(ws)
    result = invoke(["check", str(study), "--launcher", "process", "--gpu", "imaginary-9000"])
    assert "warn  rental: " in result.output and "imaginary-9000" in result.output, result.output
    assert "decide will price no plan" in result.output


def test_check_refuses_an_input_outside_the_allowed_roots_as_run_does(ws, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    said, run_said = _both(ws, tmp_path, "--allowed-root", str(elsewhere))
    what = run_said[run_said.index("Error: ") + 7:].split(" (")[0]
    assert "FAIL  allowed roots: " + what in said, (what, said)


def test_check_refuses_a_malformed_image_reference_as_run_does(ws, tmp_path):
    said, run_said = _both(ws, tmp_path, "--image", "UPPER/Case::bad")
    what = run_said[run_said.index("Error: ") + 7:].split(" (")[0]
    assert what in said, (what, said)
