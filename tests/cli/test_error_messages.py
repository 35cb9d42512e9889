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


# -- isocost catalog import: every bad input is `Error: <what> (<where>). <fix>`, exit 2 ---------------------------

_SKYPILOT_HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"


@pytest.fixture
def market_inputs(tmp_path):
    """A good provider folder, and the bad inputs of the sweep beside it."""
    import os

    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "vms.csv").write_text(_SKYPILOT_HEADER + "gpu_1x,H100,1.0,26.0,200.0,2.49,r1,,\n")
    (tmp_path / "latin1.csv").write_bytes(b"InstanceType,Acc\xe9l\n")
    (tmp_path / "columns.csv").write_text("a,b\n1,2\n")
    (tmp_path / "cut.csv").write_bytes(_SKYPILOT_HEADER.encode() + b"gpu_1x,H100,1.0,26.0,200.0,2.49,r1,,\xc3")
    (tmp_path / "empty").mkdir()
    (tmp_path / "plain").write_text("not a folder\n")
    os.mkfifo(tmp_path / "fifo.csv")
    return tmp_path


def _catalog_error(result, *fragments: str) -> None:
    """The house form, on the first line of the error: what, (where), then a fix."""
    import re

    assert_user_error(result, *fragments)
    line = result.output[result.output.index("Error: "):].splitlines()[0]
    assert re.match(r"^Error: .+ \(.+\)\. \S", line), line
    assert "Invalid value for" not in line and "Usage:" not in result.output, result.output


@pytest.mark.parametrize("source, more, fragments", [
    ("nowhere", [], ["the catalog source is not found", "nowhere)", "Name a SkyPilot vms.csv"]),
    ("fifo.csv", [], ["the catalog source is a FIFO", "fifo.csv)", "Name a SkyPilot vms.csv"]),
    ("empty", [], ["no provider catalog found", "empty)", "folders of providers"]),
    ("latin1.csv", [], ["not UTF-8 text", "latin1.csv:1)", "Save the SkyPilot catalog as UTF-8"]),
    ("cut.csv", [], ["not UTF-8 text", "cut.csv:2)", "Save the SkyPilot catalog as UTF-8"]),
    ("columns.csv", [], ["not a SkyPilot catalog: the header lacks column(s) InstanceType", "columns.csv:1)",
                         "first line"]),
    ("acme", ["--date", "2026-02-30"], ["--date '2026-02-30' is not a date", "(--date)", "YYYY-MM-DD"]),
    ("acme", ["--commit", "acme"], ["--commit 'acme' is not PROVIDER=COMMIT", "(--commit)", "--commit lambda="]),
    ("acme", ["--commit", "acme=xyz"], ["commit 'xyz' for acme is not a git commit", "(--commit)", "hex digits"]),
    ("acme", ["--out", "{tmp}/empty"], ["--out names a directory", "empty)", "the catalog CSV file to write"]),
    ("acme", ["--out", "{tmp}/plain/market.csv"], ["plain", "Choose a writable --out"]),
    ("acme", ["--out", "{tmp}/acme/vms.csv"], ["--out is the provider catalog being imported", "vms.csv)",
                                               "another --out"]),
    ("acme", ["--metadata", "{tmp}/columns.csv", "--out", "{tmp}/columns.csv"], [
        "--out is the SkyPilot metadata being read", "columns.csv)", "another --out"]),
    ("acme", ["--metadata", "{tmp}/empty"], ["SkyPilot accelerator metadata is a directory", "empty)",
                                             "isocost catalog import"]),
    ("acme", ["--metadata", "{tmp}/nothing.csv"], ["SkyPilot accelerator metadata not found", "nothing.csv)"]),
    ("acme", ["--metadata", "{tmp}/latin1.csv"], ["not UTF-8 text", "latin1.csv:1)",
                                                  "Save the SkyPilot accelerator metadata as UTF-8"]),
    ("acme", ["--metadata", "{tmp}/columns.csv"], ["not SkyPilot accelerator metadata: the header lacks column(s) "
                                                   "GPU, MemoryGB", "columns.csv:1)"]),
    ("acme", ["--minimum-s", "an hour"], ["--minimum-s 'an hour' is not a whole number of seconds", "(--minimum-s)",
                                          "0 to 86400"]),
    ("acme", ["--increment-s", "0"], ["out of bounds", "(--minimum-s/--increment-s)", "increment 1 to 86400"]),
    ("acme", ["--provider", "zeta"], ["provider(s) zeta not found", "acme)", "Providers there: acme"]),
])
def test_catalog_import_refuses_each_bad_input_in_the_house_form(market_inputs, source, more, fragments):
    tmp = market_inputs
    args = ["--date", "2026-12-03", "--out", str(tmp / "market.csv")]
    for option, value in zip(more[::2], more[1::2], strict=True):
        value = value.replace("{tmp}", str(tmp))
        args = [*args[:args.index(option) + 1], value, *args[args.index(option) + 2:]] if option in args \
            else [*args, option, value]
    _catalog_error(invoke(["catalog", "import", str(tmp / source), *args]), *fragments)


def test_catalog_import_names_an_unreadable_catalog_and_an_unwritable_out(market_inputs, monkeypatch):
    """Permissions cannot be denied to root (the CI user): the refusals of the OS are simulated where they come."""
    import os
    import tempfile

    tmp = market_inputs
    real_open = os.open

    def denied(path, flags, *args, **kwargs):
        if str(path).endswith("vms.csv"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(os, "open", denied)
        _catalog_error(invoke(["catalog", "import", str(tmp / "acme"), "--date", "2026-12-03", "--out",
                               str(tmp / "market.csv")]), "cannot be opened: Permission denied", "vms.csv)",
                       "permissions")

    def unwritable(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", unwritable)
    _catalog_error(invoke(["catalog", "import", str(tmp / "acme"), "--date", "2026-12-03", "--out",
                           str(tmp / "market.csv")]), "Permission denied", "market.csv)", "Choose a writable --out")


@pytest.mark.parametrize("option, name, fragments", [
    ("--market", "empty", ["catalog file is a directory", "empty)", "--market"]),
    ("--market", "nothing.csv", ["catalog file not found", "nothing.csv)", "--market"]),
    ("--gpu-map", "empty", ["GPU map is a directory", "empty)", "--gpu-map"]),
])
def test_the_market_options_name_themselves_in_the_house_form(market_inputs, option, name, fragments):
    """The options `catalog import`'s output is given to (`cost`, `decide`): a wrong path names the option."""
    market = market_inputs / "market.csv"
    assert invoke(["catalog", "import", str(market_inputs / "acme"), "--date", "2026-12-03", "--out",
                   str(market)]).exit_code == 0
    more = ["--market", str(market)] if option != "--market" else []
    result = invoke(["cost", "--gpu", "h100", "--hours", "1", *more, option, str(market_inputs / name)])
    _catalog_error(result, *fragments)
