"""Errors that name the right command, the right cause and the right fix (issue 38, class 9).

Each case asserts the exact fragments: the command the user ran (never another one's name), what is wrong, and
what to do. The refusals come before anything slow (no trial, no check process).
"""

from __future__ import annotations

import json
import time

import pytest
from test_hostile_inputs import assert_user_error, invoke

from runner.cli import main as cli  # noqa: F401  (the CLI the cases run)

# -- selfcheck --corpus: read at once, before the 24 s of checks ----------------------------------------------------

def test_selfcheck_refuses_a_corpus_without_labels_at_once(tmp_path, monkeypatch):
    import runner.selfcheck.host as host

    def never(*args, **kwargs):
        raise AssertionError("the check process started before the corpus was read")

    monkeypatch.setattr(host, "run_checks", never)
    corpus = tmp_path / "texts.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"t{i}", "text": "some words"}) + "\n" for i in range(3)))
    start = time.monotonic()
    result = invoke(["selfcheck", "--device", "cpu", "--corpus", str(corpus), "--out", str(tmp_path / "out")])
    assert time.monotonic() - start < 10
    assert_user_error(result, "missing field 'label'", f"{corpus}, line 1", "isocost selfcheck --corpus",
                      "id, text, label")


def test_selfcheck_refuses_a_corpus_label_its_model_does_not_have(tmp_path, monkeypatch):
    from test_hostile_inputs import make_model

    import runner.selfcheck.host as host

    monkeypatch.setattr(host, "run_checks", lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    model = make_model(tmp_path / "model")  # labels x, y
    corpus = tmp_path / "texts.jsonl"
    corpus.write_text(json.dumps({"id": "t1", "text": "some words", "label": "spam"}) + "\n")
    result = invoke(["selfcheck", "--device", "cpu", "--model", str(model), "--corpus", str(corpus), "--out",
                     str(tmp_path / "out")])
    assert_user_error(result, "'spam'", "not labels of the model")


# -- a CSV corpus with old-Mac CR line ends: the line the file has -------------------------------------------------

@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"])
def test_a_csv_corpus_problem_names_its_real_line_whatever_the_line_ends(tmp_path, newline):
    from protocol.corpus import read_corpus
    from protocol.errors import UserError

    path = tmp_path / "corpus.csv"
    path.write_bytes(newline.join(["id,text,label", "c1,hello world,x", "c2,good day,", "c3,fine,y"]).encode()
                     + newline.encode())
    with pytest.raises(UserError) as info:
        read_corpus(path)
    note = " (the file's lines end in CR alone, as on old Macs)" if newline == "\r" else ""
    assert info.value.where == f"{path}, line 3{note}", info.value.where  # sed -n 3p shows nothing in a CR file
    assert "'label'" in info.value.what and "c2" in info.value.what


def test_a_jsonl_corpus_with_cr_line_ends_reads_line_by_line(tmp_path):
    from protocol.corpus import read_corpus
    from protocol.errors import UserError

    path = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"id": f"c{i}", "text": "some words", "label": "x"}) for i in range(3)]
    path.write_bytes("\r".join(lines).encode() + b"\r")
    assert [r.id for r in read_corpus(path)] == ["c0", "c1", "c2"]  # was: "Extra data" on line 1
    path.write_bytes("\r".join([*lines[:2], json.dumps({"id": "c2", "text": "", "label": "x"})]).encode())
    with pytest.raises(UserError) as info:
        read_corpus(path)
    assert info.value.where == f"{path}, line 3 (the file's lines end in CR alone, as on old Macs)"


# -- compare speaks of compare; --reference names a replay ---------------------------------------------------------

@pytest.fixture
def two(tmp_path, study_text):
    from test_decide_cli import write_campaign

    text = study_text(minimum=0.5)
    a = write_campaign(tmp_path / "a", text, {"batch_size=1": ["ok", "ok"]}, campaign_id="aaaa0000")
    other = study_text(minimum=0.5).replace("Which batch size", "Which other batch size")
    b = write_campaign(tmp_path / "b", other, {"batch_size=1": ["ok", "ok"]}, campaign_id="bbbb0000")
    return a, b


@pytest.mark.parametrize("command", ["compare", "decide"])
def test_campaigns_of_two_studies_are_refused_in_the_commands_own_words(two, command):
    a, b = two
    result = invoke([command, str(a), str(b)])
    assert_user_error(result, "results come from different studies", "study sha256 differs",
                      f"isocost {command} compares configurations of ONE study")
    other = {"compare": "decide", "decide": "compare"}[command]
    assert f"{other} " not in result.output.split("Error: ", 1)[1], result.output


@pytest.mark.parametrize("command", ["compare", "decide"])
def test_a_campaign_given_twice_is_refused_naming_the_command(two, tmp_path, command):
    import shutil

    a, _ = two
    shutil.copytree(a, tmp_path / "copy")
    result = invoke([command, str(a), str(tmp_path / "copy")])
    assert_user_error(result, "campaign aaaa0000 is given twice", f"isocost {command}", "Pass each results directory "
                      "once")
    assert ("decide" if command == "compare" else "compare") not in result.output


@pytest.mark.parametrize("command", ["compare", "decide"])
def test_a_reference_that_is_not_given_names_the_command_and_the_directories(two, tmp_path, command):
    a, _ = two
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = invoke([command, str(a), "--reference", str(elsewhere)])
    assert_user_error(result, f"--reference names a directory that is not among those given to isocost {command}",
                      f"Name one of: {a}")


@pytest.mark.parametrize("command", ["compare", "decide"])
def test_a_replay_directory_as_reference_is_told_what_it_is(two, tmp_path, command):
    import shutil

    a, _ = two
    replay = tmp_path / "replay"
    (replay / "bundle").mkdir(parents=True)
    shutil.copytree(a, replay / "bundle" / "campaign")
    (replay / "replay.json").write_text("{}")
    result = invoke([command, str(a), str(replay), "--reference", str(replay)])
    assert_user_error(result, "--reference names a replay directory", "a replay is compared with the reference",
                      f"isocost {command}", str(replay / "bundle" / "campaign"))
    assert "not among those" not in result.output


# -- the sweep over the newer commands -----------------------------------------------------------------------------

@pytest.mark.parametrize("more", [[], ["--model", "{model}"]])
def test_memory_estimate_campaign_without_study_says_what_is_missing(tmp_path, more):
    from test_hostile_inputs import make_model

    model = make_model(tmp_path / "model")
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    args = [a.replace("{model}", str(model)) for a in more]
    result = invoke(["memory", "estimate", "--campaign", str(campaign), *args])
    assert_user_error(result, "--campaign needs --study", "isocost memory estimate",
                      f"--study {campaign / 'study.toml'}")
    assert "nothing to estimate" not in result.output


@pytest.mark.parametrize("args, where", [
    (["--start", "2026-01-01T00:00", "--end", "2025-01-01T00:00", "--tz", "UTC"], "(--end)"),
    (["--start", "2026-01-01T00:00", "--end", "2026-01-02T00:00", "--tz", "Mars/Olympus"], "(--tz)"),
    (["--start", "yesterday", "--end", "2026-01-02T00:00", "--tz", "UTC"], "(--start)"),
])
def test_window_names_its_options(args, where):
    assert_user_error(invoke(["window", *args]), where)
