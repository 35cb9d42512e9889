"""Issue 38, class 7: no formula reaches a CSV isocost writes.

A corpus label ``=1+1`` was written unquoted into corpus_index.csv. Labels now get what ids get: refused where
they enter (a spreadsheet would run them), and every CSV isocost writes goes through one cell function
(:func:`protocol.io.csvio.safe_cell`, via :func:`protocol.io.csvio.csv_writer`), so a text that slipped through any
other way is shown, never run.
"""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest
from test_hostile_inputs import assert_user_error, invoke, run_args, write_study

FORMULAS = ["=1+1", "+1+1", "@SUM(A1)", "-2+3", "=HYPERLINK(\"http://x\")", "\t=1", "\r=1"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("label", FORMULAS)
@pytest.mark.parametrize("form", ["jsonl", "csv"])
def test_a_corpus_label_starting_like_a_formula_is_refused_where_it_enters(ws, tmp_path, label, form):
    if form == "jsonl":
        lines = [json.dumps({"id": f"a{i}", "text": "market vote", "label": "x"}) for i in range(3)]
        lines[1] = json.dumps({"id": "a1", "text": "market vote", "label": label})
        (ws / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        study = write_study(ws)
    else:
        with open(ws / "corpus.csv", "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerows([["id", "text", "label"], ["a0", "market vote", "x"], ["a1", "market vote", label]])
        study = write_study(ws, corpus="corpus.csv")
    result = invoke(run_args(study, tmp_path / "out"))
    if label in ("\t=1", "\r=1"):  # not printable: refused by the printable-label rule, before this one
        assert_user_error(result, "label")
        return
    assert_user_error(result, f"label {label!r} of id 'a1' starts with {label[0]!r}, which a spreadsheet reads")


def test_a_number_label_is_still_a_label(ws, tmp_path):
    from protocol.corpus import read_corpus

    path = ws / "numbers.jsonl"
    path.write_text("".join(json.dumps({"id": f"n{i}", "text": "market vote", "label": label}) + "\n"
                            for i, label in enumerate(["-1", "+1", "0"])), encoding="utf-8")
    assert [record.label for record in read_corpus(path)] == ["-1", "+1", "0"]


def test_the_corpus_index_writer_neutralises_what_slipped_through(tmp_path):
    """Below the entry check: the writer itself shows a formula as text (defence in depth)."""
    from types import SimpleNamespace

    from protocol.corpus import Record
    from runner.campaign import freeze

    study = SimpleNamespace(task="text-classification", length_buckets=())
    path = tmp_path / "corpus_index.csv"
    freeze._write_corpus_index(path, study, [Record("a", "t", "=1+1")], [3])  # type: ignore[arg-type]
    assert path.read_text(encoding="utf-8").splitlines()[1] == "a,'=1+1,3,"


def test_a_raw_row_note_starting_like_a_formula_is_shown_not_run():
    """raw.csv's free-text cells (a trial's last log line in ``notes``) are cells of a CSV too."""
    from protocol.records.raw_record import RawRecord

    row = RawRecord.from_values({"trial_id": "t", "notes": "=cmd|' /C calc'!A0", "empty_reasons": "-x"})
    cells = dict(zip(RawRecord.__dataclass_fields__, row.cells(), strict=False))
    assert cells["notes"] == "'=cmd|' /C calc'!A0" and cells["empty_reasons"] == "'-x"


#: The writers that may use the csv module directly: the one cell function itself, raw.csv's row text (its cells
#: made by protocol.records.stages.csv_cell, which neutralises), and an in-memory copy handed to pandas (never written).
CSV_MODULE_ALLOWED = {"protocol/io/csvio.py", "runner/campaign_dir/raw_format.py", "runner/campaign_dir/raw_frame.py"}


def test_every_csv_writer_goes_through_the_one_cell_function():
    found = []
    for folder in ("protocol", "runner"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in ("writer", "DictWriter") and \
                        isinstance(node.value, ast.Name) and node.value.id == "csv" and \
                        relative not in CSV_MODULE_ALLOWED:
                    found.append(f"{relative}:{node.lineno} csv.{node.attr}")
    assert found == [], "write CSV with protocol.io.csvio.csv_writer (every cell through safe_cell)"
