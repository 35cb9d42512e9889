from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.corpus import Record, check_disjoint, content_fingerprint, read_corpus
from protocol.errors import UserError


def jsonl(tmp_path: Path, rows: list[object], name: str = "c.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_and_csv_give_the_same_content_fingerprint(tmp_path):
    rows = [{"id": "a", "text": "hello, world", "label": "x"}, {"id": "b", "text": 'say "hi"', "label": "y"}]
    from_jsonl = read_corpus(jsonl(tmp_path, rows))
    csv_path = tmp_path / "c.csv"
    csv_path.write_text('id,text,label\na,"hello, world",x\nb,"say ""hi""",y\n', encoding="utf-8")
    from_csv = read_corpus(csv_path)
    assert from_jsonl == from_csv
    assert content_fingerprint(from_jsonl) == content_fingerprint(from_csv)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "the corpus is empty"),
        ([{"id": "a", "text": "t", "label": "x"}, {"id": "a", "text": "u", "label": "x"}], "duplicate id 'a'"),
        ([{"id": "", "text": "t", "label": "x"}], "invalid id"),
        ([{"id": " a", "text": "t", "label": "x"}], "surrounding spaces"),
        ([{"id": "a", "text": "  ", "label": "x"}], "empty or non-text"),
        ([{"id": "a", "text": "t"}], "missing field 'label'"),
        (["just a string"], "must be a JSON object"),
    ],
)
def test_bad_corpora(tmp_path, rows, message):
    with pytest.raises(UserError, match=message):
        read_corpus(jsonl(tmp_path, rows))


def test_broken_json_line_names_the_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "t", "label": "x"}\n{"id": \n', encoding="utf-8")
    with pytest.raises(UserError, match="line 2"):
        read_corpus(path)


def test_tuning_overlap_by_id_or_normalised_text():
    final = (Record("a", "The Market rose", "x"),)
    with pytest.raises(UserError, match="shares 1 id"):
        check_disjoint(final, (Record("a", "other", "x"),), "study.toml")
    with pytest.raises(UserError, match="same text as final input 'a'"):
        check_disjoint(final, (Record("t1", "  the market   ROSE ", "x"),), "study.toml")
    check_disjoint(final, (Record("t1", "the market fell", "x"),), "study.toml")
