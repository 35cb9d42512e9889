"""No traceback, anywhere a user can reach: every reader, through the CLI, on hostile content.

Each reader (study, corpus JSONL and CSV, model directory, catalog, hosts file, bundle, window
arguments) gets the same hostile inputs: invalid UTF-8, a lone surrogate, a byte-order mark,
deep nesting, enormous numbers, a huge line, a FIFO, a device behind a symlink, a directory, a
symlink loop. Every one ends in ``Error: <what> (<where>). <fix>`` and exit 2 (a BOM may be
accepted instead), in bounded time: a FIFO or a device is refused, never opened. A refused
``run`` leaves ``--out`` usable. No model weights: a word-level tokenizer is enough, since every
refusal comes before the first trial.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from workspace import STUDY_TEMPLATE, write_corpus

from protocol.io.fingerprint import fingerprint_path
from runner.cli import main as cli

#: Seconds a refusal may take; a reader that opened a FIFO would block for ever.
TIME_LIMIT_S = int(os.environ.get("ISOCOST_TEST_HANG_S", "60"))


class Hung(Exception):
    """The command was still running at the time limit (a blocking read of a FIFO or a device?)."""


def invoke(args: list[str]) -> Result:
    """Run the CLI in this (main) thread under an alarm: a hang fails the test instead of blocking the suite."""
    def expire(signum: int, frame: Any) -> None:
        raise Hung(f"isocost {' '.join(args)[:200]} still running after {TIME_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TIME_LIMIT_S)
    try:
        result = CliRunner().invoke(cli, args, catch_exceptions=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not isinstance(result.exception, Hung), str(result.exception)
    return result


def assert_user_error(result: Result, *fragments: str) -> None:
    text = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"traceback: {result.exception!r}\n{text}")
    assert "Traceback" not in text
    assert result.exit_code == 2, text
    assert "Error: " in text, text
    line = text[text.index("Error: "):].splitlines()[0]
    if "Invalid value for" not in line:  # click's own argument check names the argument instead
        assert "(" in line and ")" in line, f"no <where> in: {line}"
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"


def make_model(folder: Path) -> Path:
    """A model directory with a config.json and a real word-level tokenizer.json (no weights)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True)
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 16, "vocab_size": 3, "max_position_embeddings": 64,
        "id2label": {"0": "x", "1": "y"}, "label2id": {"x": 0, "y": 1}}))
    header = json.dumps({"embeddings.word": {"dtype": "F32", "shape": [3, 8], "data_offsets": [0, 96]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 96)
    return folder


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    write_corpus(root / "corpus.jsonl", "c", 6, seed=1)
    write_corpus(root / "tuning.jsonl", "t", 4, seed=2)
    make_model(root / "model")
    return root


def write_study(root: Path, corpus: str = "corpus.jsonl", model: str = "model", extra: str = "",
                fingerprints: dict[str, str] | None = None, text: str | None = None) -> Path:
    """A study over ``root``'s files; fingerprints computed where the input is a readable file."""
    def fp(name: str) -> str:
        path = root / name
        if fingerprints and name in fingerprints:
            return fingerprints[name]
        try:
            return fingerprint_path(path)
        except Exception:  # a FIFO, a device, a loop: the study names any fingerprint
            return "sha256:" + "0" * 64

    study_text = text if text is not None else STUDY_TEMPLATE.format(
        corpus_fp=fp(corpus), tuning_fp=fp("tuning.jsonl"), model_fp=fp(model), minimum=0.0, repetitions=1,
        batches="[1]", timeout=60, reference=1,
    ).replace('path = "corpus.jsonl"', f'path = "{corpus}"').replace('path = "model"', f'path = "{model}"')
    study = root / "study.toml"
    study.write_text(study_text + extra, encoding="utf-8")
    return study


# -- hostile file contents -----------------------------------------------------------------------

def _jsonl_line(**overrides: Any) -> str:
    item = {"id": "h-1", "text": "market vote", "label": "x"}
    item.update(overrides)
    return json.dumps(item)


#: name -> (bytes of the hostile corpus.jsonl, True if the reader may accept it)
HOSTILE_JSONL: dict[str, tuple[bytes, bool]] = {
    "invalid-utf8": (b'{"id": "a", "text": "caf\xe9", "label": "x"}\n', False),
    "utf8-encoded-surrogate": (b'{"id": "a", "text": "x\xed\xa0\x80y", "label": "x"}\n', False),
    "escaped-lone-surrogate": (b'{"id": "a", "text": "x\\ud800y", "label": "x"}\n', False),
    "surrogate-in-id": (b'{"id": "\\udfff", "text": "t", "label": "x"}\n', False),
    "surrogate-in-label": (b'{"id": "a", "text": "t", "label": "\\ud83d"}\n', False),
    "bom": (b"\xef\xbb\xbf" + _jsonl_line().encode() + b"\n", True),
    "deep-nesting": (b"[" * 200_000 + b"\n", False),
    "deep-object": (b'{"id": "a", "text": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b', "label": "x"}\n',
                    False),
    "enormous-integer-id": (b'{"id": 1' + b"0" * 6000 + b', "text": "t", "label": "x"}\n', False),
    "enormous-float": (b'{"id": "a", "text": "t", "label": "x", "score": 1e999999}\n', True),
    "nan": (b'{"id": "a", "text": NaN, "label": "x"}\n', False),
    "nul-bytes": (b'{"id": "a\\u0000", "text": "t", "label": "x"}\n', False),
    "not-an-object": (b'"just a string"\n', False),
    "huge-line": (b'{"id": "a", "text": "' + b"w " * 1_000_000 + b'", "label": "x"}\n', True),
    "empty": (b"", False),
    "only-bom": (b"\xef\xbb\xbf", False),
}

HOSTILE_CSV: dict[str, tuple[bytes, bool]] = {
    "invalid-utf8": (b"id,text,label\na,caf\xe9,x\n", False),
    "utf8-encoded-surrogate": (b"id,text,label\na,x\xed\xa0\x80,x\n", False),
    "bom": (b"\xef\xbb\xbfid,text,label\na,market vote,x\n", True),
    "nul-byte": (b"id,text,label\na,t\x00t,x\n", True),  # a NUL inside a text is content
    "huge-field": (b"id,text,label\na," + b"w" * 300_000 + b",x\n", True),
    "unclosed-quote": (b'id,text,label\na,"never closed,x\n', False),
    "no-header": (b"a,b,c\n", False),
    "empty": (b"", False),
}


def special_file(kind: str, path: Path) -> None:
    """Make ``path`` a FIFO, a link to a device, a directory or a link loop."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink-loop":
        path.symlink_to(path.name)
    elif kind == "dangling-symlink":
        path.symlink_to(path.parent / "nowhere")
    else:
        raise AssertionError(kind)


SPECIAL_KINDS = ("fifo", "device", "directory", "symlink-loop", "dangling-symlink")


def run_args(study: Path, out: Path) -> list[str]:
    return ["run", str(study), "--out", str(out), "--launcher", "process"]


def assert_out_usable(out: Path) -> None:
    """A refused start leaves --out absent or empty (but for the writer lock, which a retry takes again):
    the same --out works once the input is fixed."""
    from runner.campaign_dir.layout import LOCK_NAME

    left = [p.name for p in out.iterdir() if p.name != LOCK_NAME] if out.exists() else []
    assert not left, left


# -- study ---------------------------------------------------------------------------------------

HOSTILE_STUDY: dict[str, bytes] = {
    "invalid-utf8": b'schema_version = 1\nname = "caf\xe9"\n',
    "utf8-encoded-surrogate": b'schema_version = 1\nname = "\xed\xa0\x80"\n',
    "escaped-surrogate": b'schema_version = 1\nname = "\\ud800"\n',
    "deep-nesting": b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "deep-tables": b"a = " + b"{b = " * 5000 + b"1" + b"}" * 5000 + b"\n",
    "enormous-integer": b"schema_version = 1" + b"0" * 6000 + b"\n",
    "enormous-float": b"schema_version = 1e999999\n",
    "extreme-date": b"schema_version = 1\nname = 9999-12-31T23:59:59.999999+23:59\n",
    "nul": b'schema_version = 1\nname = "a\x00b"\n',
    "huge": b"# " + b"x" * (3 * 2**20) + b"\n",
    "empty": b"",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_STUDY))
def test_hostile_study_files(ws, tmp_path, kind):
    study = ws / "study.toml"
    study.write_bytes(HOSTILE_STUDY[kind])
    out = tmp_path / "out"
    assert_user_error(invoke(run_args(study, out)), str(study))
    assert_out_usable(out)


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_special_study_files_are_refused_without_reading(ws, tmp_path, kind):
    study = ws / "study.toml"
    special_file(kind, study)
    out = tmp_path / "out"
    assert_user_error(invoke(run_args(study, out)), "study")
    assert_out_usable(out)


def test_a_study_with_a_bom_is_accepted_or_named(ws, tmp_path):
    study = write_study(ws)
    study.write_bytes(b"\xef\xbb\xbf" + study.read_bytes())
    from protocol.study.load import load_study

    assert load_study(study).name == "tiny"  # accepted: the mark is not part of the first key


# -- corpus --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(HOSTILE_JSONL))
def test_hostile_jsonl_corpus(ws, tmp_path, kind):
    content, may_accept = HOSTILE_JSONL[kind]
    (ws / "corpus.jsonl").write_bytes(content)
    study = write_study(ws)
    out = tmp_path / "out"
    if may_accept:
        _accepted_or_refused(ws / "corpus.jsonl")
        return
    assert_user_error(invoke(run_args(study, out)), "corpus.jsonl")
    assert_out_usable(out)


@pytest.mark.parametrize("kind", sorted(HOSTILE_CSV))
def test_hostile_csv_corpus(ws, tmp_path, kind):
    content, may_accept = HOSTILE_CSV[kind]
    (ws / "corpus.csv").write_bytes(content)
    study = write_study(ws, corpus="corpus.csv")
    out = tmp_path / "out"
    if may_accept:
        _accepted_or_refused(ws / "corpus.csv")
        return
    assert_user_error(invoke(run_args(study, out)), "corpus.csv")
    assert_out_usable(out)


def _accepted_or_refused(path: Path) -> None:
    """An input the reader may accept (a BOM, a long line): read as text, or refused with a UserError.

    Read directly rather than through `run`, which would go on to start a trial."""
    from protocol.corpus import read_corpus
    from protocol.errors import UserError

    try:
        records = read_corpus(path)
    except UserError as exc:
        assert exc.where and str(path) in exc.where
        return
    assert records and all(not r.id.startswith("\ufeff") for r in records)


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
@pytest.mark.parametrize("command", ["run", "fingerprint"])
def test_special_corpus_files_are_refused_without_reading(ws, tmp_path, kind, command):
    corpus = ws / "special.jsonl"
    special_file(kind, corpus)
    out = tmp_path / "out"
    # The study resolves links: a refusal names the link's target (/dev/zero, the missing file).
    named = {"device": "character device", "dangling-symlink": "not found"}.get(kind, "special.jsonl")
    if command == "fingerprint":
        if kind == "directory":
            pytest.skip("a directory is fingerprinted as a tree (a model folder)")
        assert_user_error(invoke(["fingerprint", str(corpus)]), "special.jsonl")
        return
    study = write_study(ws, corpus="special.jsonl")
    assert_user_error(invoke(run_args(study, out)), named)
    assert_out_usable(out)


# -- model directory -----------------------------------------------------------------------------

HOSTILE_CONFIG: dict[str, bytes] = {
    "invalid-utf8": b'{"model_type": "b\xe9rt"}',
    "deep-nesting": b"[" * 200_000,
    "enormous-number": b'{"hidden_size": 1' + b"0" * 6000 + b"}",
    "not-an-object": b"[1, 2]",
    "wrong-types": b'{"hidden_size": "eight", "num_hidden_layers": null, "vocab_size": [], "id2label": 5}',
    "negative": b'{"hidden_size": -8, "num_hidden_layers": -1, "num_attention_heads": 0, "vocab_size": -3,'
                b' "intermediate_size": 16, "max_position_embeddings": 64}',
    "huge-values": b'{"hidden_size": 1e300, "num_hidden_layers": 1e300, "num_attention_heads": 2,'
                   b' "vocab_size": 1e300, "intermediate_size": 1e300, "max_position_embeddings": 1e300}',
    "empty": b"",
}


def test_the_fake_model_passes_the_memory_estimate(ws):
    result = invoke(["memory", "estimate", "--model", str(ws / "model")])
    assert result.exit_code == 0, result.output  # so that each hostile config below is what is refused


@pytest.mark.parametrize("kind", sorted(HOSTILE_CONFIG))
def test_hostile_model_config(ws, kind):
    (ws / "model" / "config.json").write_bytes(HOSTILE_CONFIG[kind])
    result = invoke(["memory", "estimate", "--model", str(ws / "model")])
    assert_user_error(result, "config.json")


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_special_model_config_is_refused_without_reading(ws, kind):
    (ws / "model" / "config.json").unlink()
    special_file(kind, ws / "model" / "config.json")
    assert_user_error(invoke(["memory", "estimate", "--model", str(ws / "model")]), "config.json")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_special_files_inside_a_model_directory_are_refused(ws, tmp_path, kind):
    special_file(kind, ws / "model" / "extra.bin")
    assert_user_error(invoke(["fingerprint", str(ws / "model")]), "extra.bin")
    out = tmp_path / "out"
    assert_user_error(invoke(run_args(write_study(ws), out)), "extra.bin")
    assert_out_usable(out)


@pytest.mark.parametrize("content", [b"\xff\xfe", b"[" * 100_000, b'{"model": 5}', b""])
def test_hostile_tokenizer_json(ws, tmp_path, content):
    (ws / "model" / "tokenizer.json").write_bytes(content)
    out = tmp_path / "out"
    assert_user_error(invoke(run_args(write_study(ws), out)), "tokenizer.json")
    assert_out_usable(out)


# -- catalog -------------------------------------------------------------------------------------

def _catalog_rows() -> list[list[str]]:
    from protocol.costing.plans import default_catalog_path

    with open(default_catalog_path(), encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _catalog_bytes(mutate: Callable[[list[list[str]]], None]) -> bytes:
    rows = _catalog_rows()
    mutate(rows)
    return "".join(",".join(row) + "\n" for row in rows).encode("utf-8", "surrogatepass")


def _set_cell(column: str, value: str) -> Callable[[list[list[str]]], None]:
    def mutate(rows: list[list[str]]) -> None:
        rows[1][rows[0].index(column)] = value
    return mutate


def _catalog_cases() -> dict[str, bytes]:
    header = _catalog_rows()[0]
    cases = {
        "invalid-utf8": b"\xff\xfe" + _catalog_bytes(lambda rows: None),
        "surrogate": _catalog_bytes(_set_cell(header[0], "\ud800")),
        "nul": _catalog_bytes(lambda rows: None).replace(b",", b"\x00,", 1),
        "huge-field": _catalog_bytes(lambda rows: None).replace(b",", b"," + b"9" * 200_000 + b",", 1),
        "unclosed-quote": _catalog_bytes(lambda rows: None) + b'"never,closed\n',
        "empty": b"",
    }
    for column in header:
        if "price" in column or "date" in column or "_at" in column or "days" in column or "lots" in column:
            cases[f"enormous-{column}"] = _catalog_bytes(_set_cell(column, "9" * 5000))
            cases[f"extreme-{column}"] = _catalog_bytes(_set_cell(column, "9999-12-31T23:59:59+23:59"))
            cases[f"negative-{column}"] = _catalog_bytes(_set_cell(column, "-1e308"))
            cases[f"nan-{column}"] = _catalog_bytes(_set_cell(column, "NaN"))
    return cases


@pytest.mark.parametrize("kind", sorted(_catalog_cases()))
def test_hostile_catalogs(tmp_path, kind):
    catalog = tmp_path / "catalog.csv"
    catalog.write_bytes(_catalog_cases()[kind])
    result = invoke(["cost", "--catalog", str(catalog), "--gpu", "rtx-4090", "--days", "7", "--lots", "1"])
    assert_user_error(result, "catalog.csv")


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_special_catalogs_are_refused_without_reading(tmp_path, kind):
    catalog = tmp_path / "catalog.csv"
    special_file(kind, catalog)
    result = invoke(["cost", "--catalog", str(catalog), "--gpu", "rtx-4090", "--days", "7", "--lots", "1"])
    assert_user_error(result, "catalog")


# -- hosts file ----------------------------------------------------------------------------------

HOSTILE_HOSTS: dict[str, bytes] = {
    "invalid-utf8": b'schema_version = 1\n[[host]]\nname = "\xff"\nurl = "local"\n',
    "escaped-surrogate": b'schema_version = 1\n[[host]]\nname = "\\ud800"\nurl = "local"\n',
    "deep-nesting": b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "enormous-number": b"schema_version = 1" + b"0" * 6000 + b"\n",
    "enormous-reconnect": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\nreconnect_s = 1e999\n',
    "huge-lots": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\nrental = { gpu = "x", lots = '
                 + b"9" * 18 + b" }\n",
    "nul-url": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "ssh://u@h\\u0000x"\n',
    "nul-ssh-config": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\nssh_config = "a\\u0000b"\n',
    "formula-rental-gpu": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\nrental = { gpu = "=1+1" }\n',
    "unclosed-ipv6-url": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "ssh://u@[::1"\n',
    "port-zero": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "ssh://u@h:0"\n',
    "option-as-host": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "ssh://-oProxyCommand=x"\n',
    "lots-over-max": b'schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\n'
                     b'rental = { gpu = "b200", lots = 10001 }\n',
    "empty": b"",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_HOSTS))
def test_hostile_hosts_files(tmp_path, kind):
    hosts = tmp_path / "hosts.toml"
    hosts.write_bytes(HOSTILE_HOSTS[kind])
    assert_user_error(invoke(["hosts", "check", "--hosts-file", str(hosts)]), "hosts.toml")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_special_hosts_files_are_refused_without_reading(tmp_path, kind):
    hosts = tmp_path / "hosts.toml"
    special_file(kind, hosts)
    assert_user_error(invoke(["hosts", "check", "--hosts-file", str(hosts)]), "hosts")


# -- bundle --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_special_bundles_are_refused_without_reading(tmp_path, kind):
    bundle = tmp_path / "b.tar.gz"
    special_file(kind, bundle)
    for args in (["verify", str(bundle)], ["replay", str(bundle), "--out", str(tmp_path / "replay")]):
        result = invoke(args)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert "Error: " in result.output or "FAILED" in result.output or "not" in result.output


# -- window and calendar arguments ---------------------------------------------------------------

@pytest.mark.parametrize("start, end, tz", [
    ("0001-01-01T00:00", "0001-01-02T00:00", "UTC"),
    ("9999-12-31T00:00", "9999-12-31T23:59", "Pacific/Kiritimati"),
    ("9999-12-31T23:59+00:00", "9999-12-31T23:59-23:59", None),
    ("0001-01-01T00:00+23:59", "0001-01-01T00:01", None),
    ("2026-11-02T09:00", "2026-11-02T10:00", "../../../etc/passwd"),
    ("2026-11-02T09:00", "2026-11-02T10:00", "Europe/\x00Paris"),
    ("2026-11-02T09:00", "2026-11-02T10:00", "\ud800"),
    ("2026-11-02T09:00", "2026-11-02T10:00", "x" * 10_000),
    ("2026-11-02T09:00\ud800", "2026-11-02T10:00", "UTC"),
    ("9" * 5000, "2026-11-02T10:00", "UTC"),
    ("+275760-09-13T00:00", "2026-11-02T10:00", "UTC"),
    ("2026-02-30T09:00", "2026-03-01T09:00", "UTC"),
    ("2026-11-02T09:00", "2026-11-02T08:00", "UTC"),
])
def test_hostile_window_arguments(start, end, tz):
    args = ["window", "--start", start, "--end", end] + (["--tz", tz] if tz is not None else [])
    result = invoke(args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert_user_error(result)


# -- a refused start leaves --out usable: the same --out works once the input is fixed ------------

def test_a_refused_start_leaves_out_usable_for_a_clean_retry(ws, tmp_path):
    out = tmp_path / "out"
    (ws / "corpus.jsonl").write_bytes(HOSTILE_JSONL["invalid-utf8"][0])
    assert_user_error(invoke(run_args(write_study(ws), out)), "not UTF-8")
    assert_out_usable(out)
    bad_catalog = ws / "catalog.csv"
    bad_catalog.write_bytes(b"\xff")
    write_corpus(ws / "corpus.jsonl", "c", 6, seed=1)
    study = write_study(ws, extra=f'\n[costing]\ncatalog = "{bad_catalog}"\n')
    assert_user_error(invoke(run_args(study, out)), "catalog")
    assert_out_usable(out)  # refused after the inputs were read: still nothing left behind


# -- a key or a column named twice: an error wherever isocost reads JSON or CSV ----------------------
#
# Python's json keeps the last of two equal keys and csv.DictReader the last of two equal columns, so
# `"label": "x", "label": "y"` (or a header `id,text,label,label`) would silently relabel an input.

def test_a_corpus_line_naming_label_twice_is_refused(ws, tmp_path):
    (ws / "corpus.jsonl").write_text('{"id": "a", "text": "market vote", "label": "x"}\n'
                                     '{"id": "b", "text": "film match", "label": "x", "label": "y"}\n')
    out = tmp_path / "out"
    assert_user_error(invoke(run_args(write_study(ws), out)), "duplicate key 'label'", "corpus.jsonl, line 2")
    assert_out_usable(out)
    assert_user_error(invoke(["init", str(ws / "corpus.jsonl"), str(ws / "model"), "--out", str(tmp_path / "s.toml")]),
                      "duplicate key 'label'", "line 2")


def test_a_csv_corpus_naming_label_twice_is_refused(ws, tmp_path):
    (ws / "corpus.csv").write_text("id,text,label,label\na,market vote,x,y\n", encoding="utf-8")
    out = tmp_path / "out"
    assert_user_error(invoke(run_args(write_study(ws, corpus="corpus.csv"), out)),
                      "names column 'label' twice", "corpus.csv, line 1")
    assert_out_usable(out)
    assert_user_error(invoke(["init", str(ws / "corpus.csv"), str(ws / "model"), "--out", str(tmp_path / "s.toml")]),
                      "names column 'label' twice")


def test_a_csv_corpus_row_with_more_cells_than_the_header_is_refused(ws, tmp_path):
    (ws / "corpus.csv").write_text("id,text,label\na,market, vote,x\n", encoding="utf-8")  # an unquoted comma
    assert_user_error(invoke(run_args(write_study(ws, corpus="corpus.csv"), tmp_path / "out")),
                      "4 cells, the header names 3", "corpus.csv, line 2")


def test_a_tuning_split_naming_a_key_twice_fails_check(ws):
    (ws / "tuning.jsonl").write_text('{"id": "t", "text": "goal team", "label": "x", "text": "vote"}\n')
    result = invoke(["check", str(write_study(ws)), "--launcher", "process"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "duplicate key 'text'" in result.output and "tuning.jsonl, line 1" in result.output


def test_a_model_config_naming_id2label_twice_is_refused(ws):
    config = json.loads((ws / "model" / "config.json").read_text())
    text = json.dumps(config)[:-1] + ', "id2label": {"0": "y", "1": "x"}}'
    (ws / "model" / "config.json").write_text(text)
    assert_user_error(invoke(["memory", "estimate", "--model", str(ws / "model")]), "duplicate key 'id2label'",
                      "config.json")


def test_a_catalog_naming_a_column_twice_is_refused(tmp_path):
    rows = _catalog_rows()
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("\n".join(",".join(row + [row[0]]) for row in rows) + "\n", encoding="utf-8")
    assert_user_error(invoke(["cost", "--catalog", str(catalog), "--gpu", "rtx-4090", "--days", "7", "--lots", "1"]),
                      "repeats column(s) gpu", "catalog.csv")


@pytest.fixture(scope="module")
def built_campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real campaign directory (real host code, fake trials: no model), summarized."""
    from fakecampaign import FakeLauncher, fake_workspace

    from runner.analysis.summarize import summarize_campaign
    from runner.campaign.run import run_campaign

    root = tmp_path_factory.mktemp("campaign")
    run_campaign(fake_workspace(root / "ws", n=6, repetitions=1), root / "out", FakeLauncher())
    summarize_campaign(root / "out")
    return root / "out"


@pytest.fixture
def campaign_dir(built_campaign: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "campaign"
    shutil.copytree(built_campaign, copy)
    return copy


def _repeat_a_key(path: Path) -> str:
    """Name the first key of the JSON object in ``path`` a second time (same value); return the key."""
    text = path.read_text(encoding="utf-8").rstrip()
    data = json.loads(text)
    key = sorted(data)[0]
    path.write_text(text[:-1].rstrip() + f", {json.dumps(key)}: {json.dumps(data[key])}}}\n", encoding="utf-8")
    return key


@pytest.mark.parametrize("command", ["validate", "summarize", "decide", "period", "rental", "bundle"])
def test_campaign_json_naming_a_key_twice_is_refused_by_every_reading_command(campaign_dir, tmp_path, command):
    key = _repeat_a_key(campaign_dir / "campaign.json")
    args = {"rental": ["rental", str(campaign_dir), "--gpu", "rtx-4090"],
            "bundle": ["bundle", str(campaign_dir), "-o", str(tmp_path / "b.tar.gz")]}.get(command,
                                                                                        [command, str(campaign_dir)])
    assert_user_error(invoke(args), f"duplicate key {key!r}", "campaign.json")


@pytest.mark.parametrize("name", ["status.json", "manifest.json", "spec.json"])
def test_a_trial_file_naming_a_key_twice_is_refused_by_bundle(campaign_dir, tmp_path, name):
    trial = sorted((campaign_dir / "trials").iterdir())[0]
    key = _repeat_a_key(trial / name)
    result = invoke(["bundle", str(campaign_dir), "-o", str(tmp_path / "b.tar.gz")])
    assert_user_error(result, f"duplicate key {key!r}", f"{trial.name}/{name}")


@pytest.mark.parametrize("command", ["validate", "summarize", "decide"])
def test_a_status_json_naming_a_key_twice_is_refused(campaign_dir, command):
    trial = sorted((campaign_dir / "trials").iterdir())[0]
    _repeat_a_key(trial / "status.json")  # the seal in raw.csv names the edit first
    assert_user_error(invoke([command, str(campaign_dir)]), f"{trial.name}/status.json")


@pytest.mark.parametrize("command", ["validate", "summarize", "decide"])
def test_a_prediction_line_naming_label_twice_is_refused(campaign_dir, command):
    trial = sorted((campaign_dir / "trials").iterdir())[0]
    path = trial / "predictions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    lines[0] = lines[0][:-1] + f', "label": {json.dumps(first["label"] + "-other")}}}'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_user_error(invoke([command, str(campaign_dir)]), f"{trial.name}/predictions.jsonl")


def test_the_prediction_reader_names_a_label_given_twice(tmp_path):
    """Below the seal: the reader itself makes a key named twice a format error of its line, on every path."""
    from protocol.tasks.classification.predictions import parse_predictions

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": "a", "label": "x", "score": 0.5}\n{"id": "b", "label": "x", "score": 0.5, "label": "y"}\n'
                    '{"id": "c", "label": "y", "score": 1, "n_tokens": 3}\n', encoding="utf-8")
    parsed = parse_predictions(path)
    assert parsed.ids == ("a", "c") and parsed.format_errors == ("line 2: duplicate key 'label' in a JSON object",)


def test_a_ledger_naming_a_column_twice_is_refused(campaign_dir, tmp_path):
    ledger = tmp_path / "ledger.csv"
    ledger.write_text("date,description,amount_usd,amount_usd,evidence\n2026-09-30,storage,12.50,1.00,inv 17\n",
                      encoding="utf-8")
    assert_user_error(invoke(["decide", str(campaign_dir), "--expenses", str(ledger)]), "ledger.csv")


# -- accepted nonsense: a rule from too little data, a rule that accepts anything ---------------------

def test_tune_refuses_a_one_input_tuning_split_before_running(ws, tmp_path):
    write_corpus(ws / "tuning.jsonl", "t", 1, seed=2)
    study = write_study(ws)
    before = study.read_bytes()
    result = invoke(["tune", str(study)])
    assert_user_error(result, "1 input(s), too few", "needs at least 10", "tuning.jsonl")
    assert study.read_bytes() == before and not (ws / ".isocost" / "tune").exists()  # nothing ran, nothing written


def test_tune_refuses_a_measured_metric_the_split_is_too_small_for(ws, monkeypatch):
    """12 inputs, half right: se = sqrt(0.25/12) = 0.144 > 0.1, so the rule needs 25 (the model run is faked)."""
    import runner.own.tune as tune

    write_corpus(ws / "tuning.jsonl", "t", 12, seed=2)
    study = write_study(ws)
    before = study.read_bytes()

    def fake_run(study_, variant, tuning, progress, time_limit=None):
        trial = ws / ".isocost" / "tune" / "fake"
        trial.mkdir(parents=True)
        wrong = {"x": "y", "y": "x"}
        (trial / "predictions.jsonl").write_text("".join(
            json.dumps({"id": r.id, "label": r.label if i % 2 else wrong[r.label], "score": 0.5}) + "\n"
            for i, r in enumerate(tuning)), encoding="utf-8")
        return trial

    monkeypatch.setattr(tune, "_run_reference", fake_run)
    result = invoke(["tune", str(study)])
    assert_user_error(result, "accuracy 0.5000 on 12 tuning input(s)", "needs at least 25 inputs", "tuning.jsonl")
    assert study.read_bytes() == before


@pytest.mark.parametrize("rule, accepts", [
    ("minimum = 0.0\nmax_metric_drop = 1.0\nmin_agreement = 0.0", "accepts every pass"),
    ("minimum = 0.5\nmax_metric_drop = 1.0\nmin_agreement = 0.0", "every variant as equivalent"),
    ("minimum = 0.5\nmax_metric_drop = 2.5\nmin_agreement = 0.9", "max_metric_drop must be between 0 and 1, got 2.5"),
])
def test_check_refuses_a_rule_that_accepts_anything(ws, rule, accepts):
    study = write_study(ws)
    text = study.read_text(encoding="utf-8").replace("minimum = 0.0\n", "").replace("max_metric_drop = 0.01\n", "")
    study.write_text(text.replace("min_agreement = 0.99", rule), encoding="utf-8")
    result = invoke(["check", str(study), "--launcher", "process"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "FAIL  study keys" in result.output and accepts in result.output


# -- every command added since this matrix was written, with absurd values ---------------------------
#
# init, tune, check, rental, decide (several directories, --catalog, --expenses), period, cost, memory
# estimate and hosts check: each absurd value ends in one `Error:` line naming what and where (exit 2)
# or in a correct result; never a traceback, never a hang (the alarm of `invoke`).

HUGE = "9" * 30


@pytest.fixture
def decided(tmp_path: Path, study_text: Callable[..., str]) -> tuple[Path, Path]:
    """Two campaign directories of one study (rtx-4090 ×2 lots), as `isocost run` leaves them."""
    from test_decide_cli import write_campaign

    text = study_text(minimum=0.5)
    a = write_campaign(tmp_path / "a", text, {"batch_size=1": ["ok", "ok"], "batch_size=4": ["ok", "ok"]},
                       campaign_id="aaaa0000")
    b = write_campaign(tmp_path / "b", text, {"batch_size=1": ["ok", "ok"], "batch_size=4": ["ok", "oom"]},
                       gpu="b200", lots=1, campaign_id="bbbb0000")
    return a, b


def _study_args(ws: Path) -> list[str]:
    return [str(write_study(ws))]


#: (name, arguments given the workspace/campaigns, fragments the error names). ``{study}``, ``{a}``, ``{b}``,
#: ``{ws}`` are filled in by the test.
ABSURD: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("cost-lots-30-digits", ["cost", "--gpu", "rtx-4090", "--days", "7", "--lots", HUGE], ("--lots", "10,000")),
    ("cost-lots-negative", ["cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "-3"], ("--lots",)),
    ("cost-accepted-30-digits", ["cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "1", "--accepted-results",
                                 HUGE], ("--accepted-results", "1,000,000")),
    ("cost-gpu-formula", ["cost", "--gpu", "=HYPERLINK(1)", "--days", "7", "--lots", "1"], ("unknown GPU",)),
    ("cost-gpu-ansi", ["cost", "--gpu", "\x1b[2Jrtx", "--days", "7", "--lots", "1"], ("unknown GPU", "\\x1b")),
    ("cost-gpu-not-utf8", ["cost", "--gpu", "\udcff", "--days", "7", "--lots", "1"], ("unknown GPU",)),
    ("rental-lots-30-digits", ["rental", "{a}", "--gpu", "rtx-4090", "--lots", HUGE], ("--lots", "10000")),
    ("rental-lots-zero", ["rental", "{a}", "--gpu", "rtx-4090", "--lots", "0"], ("--lots",)),
    ("rental-gpu-formula", ["rental", "{a}", "--gpu", "=cmd|'/C calc'!A0"], ("not a plain name", "--gpu")),
    ("rental-gpu-empty", ["rental", "{a}", "--gpu", ""], ("GPU name is empty", "--gpu")),
    ("rental-gpu-ansi", ["rental", "{a}", "--gpu", "\x1b]0;owned\x07"], ("not a plain name", "\\x1b")),
    ("rental-host-bad-name", ["rental", "{a}", "--gpu", "rtx-4090", "--host", "a b/../c"], ("host name", "--host")),
    ("rental-plan-start-control", ["rental", "{a}", "--gpu", "rtx-4090", "--plan-start", "2026-12-01\r09:00"],
     ("--plan-start", "\\r")),
    ("rental-plan-start-huge", ["rental", "{a}", "--gpu", "rtx-4090", "--plan-start", "9" * 5000],
     ("--plan-start",)),
    ("run-lots-30-digits", ["run", "{study}", "--out", "{ws}/out", "--gpu", "rtx-4090", "--lots", HUGE],
     ("--lots",)),
    ("run-gpu-formula", ["run", "{study}", "--out", "{ws}/out", "--launcher", "process", "--gpu", "@SUM(1)"],
     ("not a plain name", "--gpu")),
    ("check-target-memory-nan", ["check", "{study}", "--target-memory-gib", "nan"], ("--target-memory-gib", "nan")),
    ("check-target-memory-inf", ["check", "{study}", "--target-memory-gib", "inf"], ("--target-memory-gib", "inf")),
    ("check-target-memory-minus-inf", ["check", "{study}", "--target-memory-gib", "-inf"], ("--target-memory-gib",)),
    ("check-target-memory-negative", ["check", "{study}", "--target-memory-gib", "-1"], ("--target-memory-gib",)),
    ("check-target-memory-1e309", ["check", "{study}", "--target-memory-gib", "1e309"], ("--target-memory-gib",)),
    ("check-target-memory-huge", ["check", "{study}", "--target-memory-gib", "1e300"], ("65536",)),
    ("check-host-bad-ipv6", ["check", "{study}", "--host", "b=ssh://u@[::1"],
     ("ssh://u@[::1", "not USER@HOST[:PORT]", "ssh://USER@[2001:db8::1]:22")),
    ("memory-batch-30-digits", ["memory", "estimate", "--model", "{ws}/model", "--batch", HUGE], ("--batch",)),
    ("memory-max-length-30-digits", ["memory", "estimate", "--model", "{ws}/model", "--max-length", HUGE],
     ("--max-length",)),
    ("decide-expenses-30-digit-amount", ["decide", "{a}", "--expenses", "{ws}/huge-ledger.csv"],
     ("more than 12 digits", "huge-ledger.csv:2")),
    ("decide-expenses-ansi-description", ["decide", "{a}", "--expenses", "{ws}/ansi-ledger.csv"],
     ("control character", "ansi-ledger.csv:2")),
    ("decide-two-dirs-formula-catalog", ["decide", "{a}", "{b}", "--catalog", "{ws}/formula-catalog.csv"],
     ("not a plain name", "formula-catalog.csv:2, column gpu")),
    ("decide-two-dirs-ansi-catalog-source", ["decide", "{a}", "{b}", "--catalog", "{ws}/ansi-catalog.csv"],
     ("control character", "ansi-catalog.csv:2, column source")),
    ("period-formula-catalog", ["period", "{a}", "--catalog", "{ws}/formula-catalog.csv"],
     ("not a plain name", "formula-catalog.csv:2")),
    ("decide-rental-30-digit-lots", ["decide", "{a}", "{b}"], ("lots", "10000", "rentals.jsonl")),
    ("period-rental-30-digit-lots", ["period", "{a}"], ("lots", "10000", "rentals.jsonl")),
    ("init-out-not-utf8", ["init", "{ws}/corpus.jsonl", "{ws}/model", "--out", "{ws}/\udcff/s.toml", "--tuning",
                           "{ws}/tuning.jsonl"], ()),
    ("tune-one-input-split", ["tune", "{ws}/one-tuning.toml"], ("too few", "needs at least 10")),
]


def _absurd_inputs(ws: Path, a: Path) -> None:
    """The hostile files the ABSURD cases name."""
    (ws / "huge-ledger.csv").write_text(f"date,description,amount_usd,evidence\n2026-09-30,storage,{HUGE},inv 1\n",
                                        encoding="utf-8")
    (ws / "ansi-ledger.csv").write_text("date,description,amount_usd,evidence\n2026-09-30,\x1b[2Jstorage,1.00,inv\n",
                                        encoding="utf-8")
    rows = _catalog_rows()
    formula, ansi = [list(r) for r in rows], [list(r) for r in rows]
    formula[1][rows[0].index("gpu")] = "=HYPERLINK(\"http://x\")"
    ansi[1][rows[0].index("source")] = "snapshot \x1b[31mred"
    for name, table in (("formula-catalog.csv", formula), ("ansi-catalog.csv", ansi)):
        with open(ws / name, "w", encoding="utf-8", newline="") as handle:
            csv.writer(handle).writerows(table)
    from runner.campaign_dir.appendlog import append_line
    from runner.campaign_dir.raw_format import genesis
    from runner.campaign_dir.rentals import RENTAL_SCHEMA_VERSION

    append_line(a / "rentals.jsonl", {"gpu": "rtx-4090", "lots": int(HUGE), "plan_start": None,  # chained, as
              "recorded_at": "2026-12-01T09:00:00Z", "schema_version": RENTAL_SCHEMA_VERSION},  # an unbounded
              root=a, chained=True, genesis=genesis(a / "raw.csv"), what="rentals.jsonl")  # isocost wrote it
    write_corpus(ws / "one.jsonl", "o", 1, seed=3)
    one = write_study(ws).read_text(encoding="utf-8").replace('path = "tuning.jsonl"', 'path = "one.jsonl"')
    (ws / "one-tuning.toml").write_text(one.replace(fingerprint_path(ws / "tuning.jsonl"),
                                                    fingerprint_path(ws / "one.jsonl")), encoding="utf-8")


@pytest.mark.parametrize("name, args, fragments", ABSURD, ids=[case[0] for case in ABSURD])
def test_absurd_values_for_every_newer_command(ws, decided, name, args, fragments):
    a, b = decided
    _absurd_inputs(ws, a)
    study = write_study(ws)
    filled = [arg.replace("{study}", str(study)).replace("{a}", str(a)).replace("{b}", str(b))
              .replace("{ws}", str(ws)) for arg in args]
    if not name.startswith(("decide-rental", "period-rental")):
        (a / "rentals.jsonl").unlink()
    result = invoke(filled)
    if name == "init-out-not-utf8":  # a correct result or a clear error, never a traceback
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code in (0, 2) and "Traceback" not in result.output
        return
    if filled[0] == "check" and "Error: " not in result.output:  # check reports each problem as a FAIL line
        assert result.exit_code == 2 and "Traceback" not in result.output and "FAIL" in result.output
        assert all(fragment in result.output for fragment in fragments), result.output
    else:
        assert_user_error(result, *fragments)
    assert "\x1b" not in result.output and "\r" not in result.output  # escaped, never sent to the terminal



@pytest.mark.parametrize("url, fragment", [
    # Stray or unclosed brackets: urllib's own ValueError wording differs between Python releases (3.11.2 says
    # "Invalid IPv6 URL" for all three, 3.11.7 only for the first two); ours names the form and the fix.
    ("ssh://u@[::1", "not USER@HOST[:PORT]"), ("ssh://[", "not USER@HOST[:PORT]"),
    ("ssh://u@[::1]]", "not USER@HOST[:PORT]"),
    ("ssh://u@[zz]:22", "not an IPv6 address"), ("ssh://u@[1.2.3.4]", "not an IPv6 address"),
    ("ssh://u@h:0", "outside 1..65535"),
    ("ssh://u@h:99999", "invalid port"), ("ssh://u@-oProxyCommand=x", "not a host name"),
    ("ssh://-l@h", "not a plain user name"), ("ssh://@h", "not a plain user name"), ("ssh://u@h h", "not a host name"),
    ("ssh://u@h\u202e", "not printable"), ("ssh://\udcff@h", "not text"), ("ssh://u@h/x?y", "path, query"),
    ("tcp://h:2375", "ssh only"), ("ftp://h", "not an engine URL"), ("ssh://" + "a" * 3000, "longer than"),
])
@pytest.mark.parametrize("command", ["hosts", "check", "run"])
def test_malformed_engine_urls_are_refused_by_every_command(ws, tmp_path, url, fragment, command):
    args = {"hosts": ["hosts", "check", "--host", f"b={url}"],
            "check": ["check", str(write_study(ws)), "--host", f"b={url}"],
            "run": ["run", str(write_study(ws)), "--out", str(tmp_path / "out"), "--host", f"b={url}"]}[command]
    result = invoke(args)
    if command == "check" and "Error: " not in result.output:  # check reports it as a FAIL line
        assert result.exit_code == 2 and "Traceback" not in result.output and "FAIL" in result.output
        assert fragment in result.output, result.output
        return
    assert_user_error(result, fragment)
    if fragment == "not USER@HOST[:PORT]":  # the class of error, and the fix
        assert "ssh://USER@[2001:db8::1]:22" in result.output, result.output


@pytest.mark.parametrize("column, value, fragment", [
    ("minimum_s", "9" * 5000, "minimum_s has more than 8 characters"), ("increment_s", "9" * 40, "increment_s has"),
    ("gpu", "@SUM(1)", "not a plain name"), ("gpu", "rtx 4090", "not a plain name"),
    ("source", "ok\u202egnp.exe", "control character"),
])
def test_hostile_metered_catalog_cells(tmp_path, column, value, fragment):
    header = "gpu,cards_per_lot,billing,plan_days,price_usd_per_lot,minimum_s,increment_s,currency,catalog_date,source"
    values = "rtx-4090,1,hourly,,0.70,60,3600,USD,2026-09-24,made-up".split(",")
    cells = dict(zip(header.split(","), values, strict=True))
    cells[column] = value.encode().decode("unicode_escape") if "\\u" in value else value
    catalog = tmp_path / "catalog.csv"
    catalog.write_text(header + "\n" + ",".join(cells.values()) + "\nrtx-4090,1,flat,7,110.00,,,USD,2026-09-24,x\n",
                       encoding="utf-8")
    result = invoke(["cost", "--catalog", str(catalog), "--gpu", "rtx-4090", "--days", "7", "--lots", "1"])
    assert_user_error(result, fragment, "catalog.csv:2")


@pytest.mark.parametrize("extra, fragment", [
    ('\n[deadline]\nstart = "2026-12-01T09:00"\nend = "2026-12-11T09:00"\ntz = "UTC"\nwaiting_h = 1e300\n',
     "waiting_h must be between 0 and 87840"),
    ("\n[job]\ninputs = 10\nbootstrap_resamples = 1000000000\n", "bootstrap_resamples must be between 100 and 20000"),
    ('\n[images]\ncpu = "x@sha256:\\u001b[2J"\n', "is not an image reference"),
    ('\n[images]\ncpu = "BAD REF@sha256:' + "a" * 64 + '"\n', "is not an image reference"),
])
def test_hostile_study_numbers_and_names_fail_check(ws, extra, fragment):
    result = invoke(["check", str(write_study(ws, extra=extra)), "--launcher", "process"])
    assert result.exit_code == 2 and "Traceback" not in result.output and "\x1b" not in result.output
    assert "FAIL  study keys" in result.output and fragment in result.output, result.output


def test_a_bundle_manifest_naming_a_key_twice_fails_verify(campaign_dir, tmp_path):
    """BUNDLE.json lists the files a bundle's hashes cover: a second "files" key must not replace the first."""
    import tarfile

    bundle = tmp_path / "b.tar.gz"
    assert invoke(["bundle", str(campaign_dir), "-o", str(bundle)]).exit_code == 0
    with tarfile.open(bundle) as tar:
        members = {m.name: (m, tar.extractfile(m).read() if m.isfile() else b"") for m in tar.getmembers()}
    info, data = members["BUNDLE.json"]
    text = data.decode().rstrip()
    members["BUNDLE.json"] = (info, (text[:-1].rstrip() + ', "files": []}\n').encode())
    edited = tmp_path / "edited.tar.gz"
    with tarfile.open(edited, "w:gz") as tar:
        for member, content in members.values():
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content) if member.isfile() else None)
    result = invoke(["verify", str(edited)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "BUNDLE.json" in result.output and "duplicate key 'files'" in result.output, result.output


@pytest.mark.parametrize("ref", ["BAD REF@sha256:" + "a" * 64, "Upper/x@sha256:" + "a" * 64, "x\x1b[2J", "-x",
                                 "a" * 600, "\udcff@sha256:" + "a" * 64])
@pytest.mark.parametrize("command", ["run", "hosts", "images-build"])
def test_malformed_image_references_are_refused_before_an_engine_sees_them(ws, tmp_path, ref, command):
    """An engine answers a malformed reference with an HTTP 400 (a docker.errors.APIError traceback, before)."""
    args = {"run": ["run", str(write_study(ws)), "--out", str(tmp_path / "out"), "--image", ref],
            "hosts": ["hosts", "check", "--host", "l=local", "--stack", "cuda", "--image", ref],
            "images-build": ["images", "build", "--stack", "cpu", "--base", ref]}[command]
    result = invoke(args)
    assert_user_error(result, "is not an image reference")
    assert "\x1b" not in result.output
    assert not (tmp_path / "out").exists()


def test_an_engine_refusing_a_base_reference_is_a_user_error(monkeypatch):
    """Below the CLI check: whatever the engine refuses with an HTTP 400 is named, never a traceback."""
    import docker.errors

    from protocol.errors import UserError
    from runner.images.build import _base_facts

    class Images:
        def get(self, ref: str) -> None:
            raise docker.errors.APIError("400 Client Error", explanation="invalid reference format")

    class Client:
        images = Images()

    with pytest.raises(UserError, match="the engine refuses the base image reference 'x': invalid reference format"):
        _base_facts(Client(), "x", override=True, progress=lambda message: None)


GOLDEN_CAMPAIGN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"
GOLDEN_SUMMARY = GOLDEN_CAMPAIGN / "summary.json"


def test_memory_estimate_shows_the_campaigns_measured_peaks(ws, tmp_path):
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN_CAMPAIGN, campaign)
    result = invoke(["memory", "estimate", "--study", str(write_study(ws)), "--campaign", str(campaign), "--json"])
    assert result.exit_code == 0, result.output
    measured = {row["variant"]: row["measured"] for row in json.loads(result.output)}
    golden = {v["variant_id"]: v for v in json.loads(GOLDEN_SUMMARY.read_text(encoding="utf-8"))["variants"]}
    assert any(measured.values()), (measured, sorted(golden))
    for name, peaks in measured.items():
        assert peaks == golden.get(name)


def test_memory_estimate_reads_peaks_from_the_sealed_rows_not_summary_json(ws, tmp_path):
    """Issue 38 class 1: summary.json is derived and unsealed; a 10^30-byte peak written into it is never shown."""
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN_CAMPAIGN, campaign)
    data = json.loads(GOLDEN_SUMMARY.read_text(encoding="utf-8"))
    for variant in data["variants"]:
        variant["peak_rss_bytes"] = variant["peak_allocated_bytes"] = 10**30
    (campaign / "summary.json").write_text(json.dumps(data), encoding="utf-8")
    for args in (["--json"], []):
        result = invoke(["memory", "estimate", "--study", str(write_study(ws)), "--campaign", str(campaign), *args])
        assert result.exit_code == 0, result.output
        assert str(10**30) not in result.output and f"{10**30 / 2**20:,.1f}" not in result.output, result.output
    rows = json.loads(invoke(["memory", "estimate", "--study", str(write_study(ws)), "--campaign", str(campaign),
                              "--json"]).output)
    golden = {v["variant_id"]: v for v in json.loads(GOLDEN_SUMMARY.read_text(encoding="utf-8"))["variants"]}
    assert {row["variant"]: row["measured"] for row in rows if row["measured"]} == \
        {name: golden[name] for name in golden if name in {row["variant"] for row in rows}}


def test_memory_estimate_refuses_a_campaign_whose_evidence_was_edited(ws, tmp_path):
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN_CAMPAIGN, campaign)
    raw = (campaign / "raw.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    raw[1] = raw[1].replace(",ok,", ",oom,", 1)
    (campaign / "raw.csv").write_text("".join(raw), encoding="utf-8")
    result = invoke(["memory", "estimate", "--study", str(write_study(ws)), "--campaign", str(campaign)])
    assert_user_error(result, "raw.csv")


@pytest.mark.parametrize("url", ["ssh://u@[::1", "ssh://[", "ssh://u@[::1]]", "ssh://u@[::1]:22"])
def test_an_engine_url_message_never_depends_on_urllibs_wording(monkeypatch, url):
    """Whatever urllib raises, and in whatever words (they differ between Python releases), the refusal is ours:
    the form the URL must have and the fix, never the interpreter's text."""
    from protocol.errors import UserError
    from runner.launch.daemon import address as engine_url

    def refuses(text: str) -> None:
        raise ValueError("words this test made up")

    monkeypatch.setattr(engine_url, "urlsplit", refuses)
    with pytest.raises(UserError) as caught:
        engine_url.parse_daemon_url(url, "--host b")
    assert "not USER@HOST[:PORT]" in caught.value.message
    assert "ssh://USER@[2001:db8::1]:22" in caught.value.message
    assert "made up" not in caught.value.message


@pytest.mark.parametrize("login", ["ssh://u@[::1", "ssh://[", "ssh://u@[::1]]", "ssh://u@[1.2.3.4]"])
def test_a_slurm_login_with_stray_brackets_is_a_user_error(login):
    """urllib refuses these with a ValueError in words that differ between Python releases: ours instead."""
    from protocol.errors import UserError
    from runner.launch.kinds.slurm.commands import ssh_prefix

    with pytest.raises(UserError, match="is not a login node address"):
        ssh_prefix(login)
