"""Evidence that must not rank unflagged: a campaign run with the test-only fault hook set, and ids that differ
only by Unicode normalisation.

The fault hook (``ISOCOST_FAULT_INJECT``, runner/trial/faults.py) makes a trial sleep, fail or answer wrongly on
purpose; each trial records it in its manifest.json, which raw.csv seals. Every output that ranks or compares
(summary.md/json, decide's memo, decision.json and report.html, compare) says so first. Two ids that are the same
text once normalised (``café`` in NFC and NFD) are refused by every reader of ids, naming both lines.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main as cli

HOOK = "sleep-per-batch:0.01"


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign (real host code, fake trials) run with the fault hook set, its rental recorded."""
    from fakecampaign import FakeLauncher, fake_workspace

    from runner.campaign.run import run_campaign

    root = tmp_path_factory.mktemp("hooked")
    patch = pytest.MonkeyPatch()
    patch.setenv("ISOCOST_FAULT_INJECT", HOOK)
    try:
        run_campaign(fake_workspace(root / "ws", n=6, repetitions=1), root / "out", FakeLauncher())
    finally:
        patch.undo()
    result = CliRunner().invoke(cli, ["rental", str(root / "out"), "--gpu", "rtx-4090"])
    assert result.exit_code == 0, result.output
    return root / "out"


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _says_hook(text: str) -> None:
    assert "NOT A MEASUREMENT" in text and f"ISOCOST_FAULT_INJECT={HOOK}" in text, text[:2000]


def test_the_hook_is_recorded_in_each_sealed_manifest(hooked):
    manifests = [json.loads(p.read_text()) for p in sorted((hooked / "trials").glob("*/manifest.json"))]
    assert manifests and all(m["fault_injection"] == HOOK for m in manifests)
    from runner.campaign_dir.layout import read_rows
    from runner.campaign_dir.seal import file_sha256

    rows = read_rows(hooked / "raw.csv")  # raw.csv seals each manifest (runner/campaign_dir/seal.py)
    assert rows and all(row.manifest_sha256 and row.manifest_sha256 == file_sha256(
        hooked / "trials" / row.trial_id / "manifest.json") for row in rows)


def test_summary_flags_the_hook_first(hooked):
    text = _invoke("summarize", str(hooked))
    assert text.startswith("NOT A MEASUREMENT"), text[:400]
    _says_hook(text)
    summary = json.loads((hooked / "summary.json").read_text())
    _says_hook(summary["warnings"][0])


def test_decide_flags_the_hook_in_the_memo_the_json_and_the_report(hooked, tmp_path):
    memo = _invoke("decide", str(hooked), "--out", str(tmp_path / "d"))
    assert memo.startswith("NOT A MEASUREMENT"), memo[:400]
    decision = json.loads((tmp_path / "d" / "decision.json").read_text())
    _says_hook(" ".join(decision["test_hooks"]))
    _says_hook((tmp_path / "d" / "report.html").read_text())
    as_json = json.loads(_invoke("decide", str(hooked), "--out", str(tmp_path / "j"), "--json"))  # still JSON
    _says_hook(" ".join(as_json["test_hooks"]))
    rows = list(csv.DictReader(io.StringIO(_invoke("decide", str(hooked), "--out", str(tmp_path / "c"),
                                                   "--format", "csv"))))
    assert rows and all(row["not_a_measurement"] for row in rows)
    _says_hook(rows[0]["not_a_measurement"])


def test_compare_flags_the_hook(hooked):
    text = _invoke("compare", str(hooked))
    assert text.startswith("NOT A MEASUREMENT"), text[:300]
    _says_hook(text)
    _says_hook(" ".join(json.loads(_invoke("compare", str(hooked), "--json"))["flags"]))  # still JSON
    rows = list(csv.DictReader(io.StringIO(_invoke("compare", str(hooked), "--format", "csv"))))
    assert rows and all(row["not_a_measurement"] for row in rows)
    _says_hook(rows[0]["not_a_measurement"])


def test_a_campaign_without_the_hook_has_no_flag(tmp_path):
    from fakecampaign import FakeLauncher, fake_workspace

    from runner.campaign.run import run_campaign

    run_campaign(fake_workspace(tmp_path / "ws", n=4, repetitions=1), tmp_path / "out", FakeLauncher())
    assert "NOT A MEASUREMENT" not in _invoke("summarize", str(tmp_path / "out"))


# -- ids that differ only by Unicode normalisation -----------------------------------------------------------------

NFC, NFD = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")


def test_the_two_forms_differ_as_strings():
    assert NFC != NFD and unicodedata.normalize("NFC", NFD) == NFC


def _jsonl(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": f"text {n}", "label": "x"}) + "\n"
                            for n, i in enumerate(ids)), encoding="utf-8")
    return path


def test_the_corpus_reader_refuses_ids_equal_once_normalised(tmp_path):
    from protocol.corpus import read_corpus
    from protocol.errors import UserError

    path = _jsonl(tmp_path / "corpus.jsonl", ["a", NFC, NFD])
    with pytest.raises(UserError) as info:
        read_corpus(path)
    assert "differ only by Unicode normalisation" in info.value.what
    assert "lines 2 and 3" in info.value.what and str(path) in info.value.where
    assert "NFC" in info.value.fix


def test_the_csv_corpus_reader_refuses_them_too(tmp_path):
    from protocol.corpus import read_corpus
    from protocol.errors import UserError

    path = tmp_path / "corpus.csv"
    path.write_text(f"id,text,label\n{NFC},one,x\n{NFD},two,x\n", encoding="utf-8")
    with pytest.raises(UserError) as info:
        read_corpus(path)
    assert "differ only by Unicode normalisation" in info.value.what



def test_a_tuning_id_equal_to_a_final_id_once_normalised_is_shared(tmp_path):
    from protocol.corpus import check_disjoint, read_corpus
    from protocol.errors import UserError

    final = read_corpus(_jsonl(tmp_path / "final.jsonl", [NFC]))
    tuning = read_corpus(_jsonl(tmp_path / "tuning.jsonl", [NFD]))
    with pytest.raises(UserError) as info:
        check_disjoint(final, tuning, "study.toml")
    assert "shares 1 id(s)" in info.value.what


def test_the_query_reader_refuses_ids_equal_once_normalised(tmp_path):
    from protocol.errors import UserError
    from protocol.tasks.embedding.queries import read_queries

    path = tmp_path / "queries.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": "a question", "relevant": ["d1"]}) + "\n"
                            for i in (NFC, NFD)), encoding="utf-8")
    with pytest.raises(UserError) as info:
        read_queries(path, "[embedding] queries")
    assert "line 2: query id 'cafe\\u0301' differs from the id on line 1 only by Unicode normalisation" \
        in info.value.what, info.value.what


def test_a_query_naming_a_document_in_another_form_says_so():
    from protocol.tasks.embedding.queries import Query, relevance_problems

    problems = relevance_problems([Query("q1", "a question", (NFD,))], {NFC})
    assert problems and "the corpus has 'caf\\xe9': the same text in another Unicode normalisation form" \
        in problems[0], problems


def test_a_pass_whose_ids_were_renormalised_says_so():
    from protocol.tasks.pass_check import check_ids, id_problems

    reasons = id_problems([], check_ids(["a", NFD], ["a", NFC]))
    assert any("differ from a corpus id only by Unicode normalisation" in r for r in reasons), reasons


def _hooked_tuning(tmp_path, monkeypatch) -> Path:
    """A study whose tuning run (faked) recorded the fault hook in its manifest; returns the study."""
    from recordfiles import manifest_for, sample_spec
    from test_hostile_inputs import make_model, write_study
    from workspace import write_corpus

    import runner.own.tune as tune
    from protocol.records.codec import write_record

    ws = tmp_path / "ws"
    ws.mkdir()
    write_corpus(ws / "corpus.jsonl", "c", 6, seed=1)
    write_corpus(ws / "tuning.jsonl", "t", 40, seed=2)
    make_model(ws / "model")
    study = write_study(ws)

    def fake_run(study_, variant, tuning, progress, time_limit=None):
        trial = ws / ".isocost" / "tune" / "fake"
        trial.mkdir(parents=True, exist_ok=True)
        (trial / "predictions.jsonl").write_text("".join(
            json.dumps({"id": r.id, "label": r.label, "score": 0.9}) + "\n" for r in tuning), encoding="utf-8")
        write_record(trial / "manifest.json", manifest_for(sample_spec("tune-fake"), fault_injection=HOOK))
        return trial

    monkeypatch.setattr(tune, "_run_reference", fake_run)
    return study


def test_tune_under_the_fault_hook_says_the_rule_is_the_hooks(tmp_path, monkeypatch):
    """The tuning run's manifest records the hook: tune says so before its rule (the model run is faked)."""
    from test_hostile_inputs import invoke

    study = _hooked_tuning(tmp_path, monkeypatch)
    result = invoke(["tune", str(study), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f"warning: NOT A MEASUREMENT: the test-only fault hook ISOCOST_FAULT_INJECT={HOOK} was set for this " \
           "tuning run" in result.output, result.output


def test_tune_under_the_fault_hook_writes_no_rule_into_the_study(tmp_path, monkeypatch):
    """A rule measured under the hook never reaches the study, where every later campaign would judge by it: tune
    refuses to write it (exit 2, the file's bytes unchanged), naming the hook, the manifest and the fix."""
    from test_hostile_inputs import assert_user_error, invoke

    study = _hooked_tuning(tmp_path, monkeypatch)
    before = study.read_bytes()
    result = invoke(["tune", str(study)])
    assert_user_error(result, "NOT A MEASUREMENT", f"ISOCOST_FAULT_INJECT={HOOK}", "not written into",
                      "manifest.json", "without the variable", "--dry-run")
    assert study.read_bytes() == before


def test_a_bundled_decision_of_a_hooked_campaign_verifies(hooked, tmp_path):
    """The flag is part of the decision: verify re-derives decision.json's test_hooks and the memo's first line
    from the sealed manifests, so the honest bundle of a hooked campaign with its decision verifies."""
    import shutil

    campaign = tmp_path / "campaign"
    shutil.copytree(hooked, campaign)
    _invoke("summarize", str(campaign))
    _invoke("decide", str(campaign), "--out", str(tmp_path / "d"))
    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp_path / "d" / name, campaign / name)
    _invoke("bundle", str(campaign), "-o", str(tmp_path / "b.tar.gz"))
    result = CliRunner().invoke(cli, ["verify", str(tmp_path / "b.tar.gz")])
    assert result.exit_code == 0, result.output
    assert "decision re-derived" in result.output
