"""Names checked where they enter and neutralised where they leave; numbers bounded; keys and columns named once.

Hand-made inputs for each rule of protocol/io/names.py, protocol/io/csvio.py and the read side of protocol/io/jsonio.py,
and the bounds of the costing functions and of the study's tables, each error naming what and where.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from decimal import Decimal
from pathlib import Path

import pytest
from test_decide import campaign

from protocol.costing.catalog_file import load_catalog
from protocol.costing.plans import MAX_LOTS, charge, check_lots, default_catalog_path, format_usd, quote
from protocol.decision.ledger import parse_ledger
from protocol.decision.plan_fit import plan_cost
from protocol.decision.rank import decide
from protocol.errors import UserError
from protocol.io.csvio import check_header, read_dicts, safe_cell, safe_row
from protocol.io.jsonio import DuplicateKeyError, loads_unique, parse_json, read_json
from protocol.io.names import check_gpu_name, check_plain_text, markdown_text, terminal_text
from protocol.study.load import load_study

# -- JSON: a key named twice -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, key", [('{"a": 1, "a": 2}', "a"), ('[{"x": {"b": 1, "b": 1}}]', "b"),
                                       ('{"label": "x", "id": "1", "label": "y"}', "label")])
def test_a_json_key_named_twice_is_refused_at_any_depth(text, key):
    with pytest.raises(DuplicateKeyError) as caught:
        loads_unique(text)
    assert caught.value.key == key
    with pytest.raises(UserError, match=f"duplicate key '{key}' in a JSON object \\(f.json, line 3\\)"):
        parse_json(text, "f.json, line 3")


@pytest.mark.parametrize("content, what", [
    (b'{"a": 1, "a": 2}', "duplicate key 'a'"), (b"\xff\xfe{}", "not UTF-8"), (b"[" * 100_000, "nested too deeply"),
    (b"1" + b"0" * 5000, "not valid JSON here"), (b'{"a": 1', "not valid JSON"),
    (b'\xff\xfe{\x00"\x00a\x00"\x00:\x001\x00}\x00', "not UTF-8"),  # UTF-16: json.loads alone would accept it
])
def test_read_json_refuses_every_malformed_file_by_name(tmp_path, content, what):
    path = tmp_path / "campaign.json"
    path.write_bytes(content)
    with pytest.raises(UserError, match=what) as caught:
        read_json(path)
    assert str(path) in caught.value.message


def test_read_json_names_a_directory_in_place_of_a_file(tmp_path):
    (tmp_path / "status.json").mkdir()
    with pytest.raises(UserError, match="cannot be read") as caught:
        read_json(tmp_path / "status.json")
    assert str(tmp_path / "status.json") in caught.value.message


# -- CSV: a column named twice, a formula cell ----------------------------------------------------------


@pytest.mark.parametrize("header, message", [(["id", "label", "label"], "names column 'label' twice"),
                                             (["id", " text ", "text"], "names column 'text' twice"),
                                             (["id", "", "label"], "empty column name \\(column 2\\)")])
def test_a_csv_header_names_each_column_once(header, message):
    with pytest.raises(UserError, match=message):
        check_header(header, "corpus", "c.csv, line 1")


def test_read_dicts_refuses_extra_cells_and_fills_missing_ones():
    rows = list(read_dicts("id,text,label\na,t,x\nb,u\n\n", "corpus", "c.csv", required=("id", "text")))
    assert rows == [(2, {"id": "a", "text": "t", "label": "x"}), (3, {"id": "b", "text": "u", "label": ""})]
    with pytest.raises(UserError, match="row has 4 cells, the header names 3 \\(c.csv, line 2\\)"):
        list(read_dicts("id,text,label\na,b,c,d\n", "corpus", "c.csv"))
    with pytest.raises(UserError, match="lacks \\['label'\\]"):
        list(read_dicts("id,text\na,b\n", "corpus", "c.csv", required=("id", "label")))


@pytest.mark.parametrize("value, expected", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    ("-12.50", "-12.50"), ("+1e3", "+1e3"), ("batch_size=1 on rtx-4090", "batch_size=1 on rtx-4090"),
    (-3, -3), (1.5, 1.5), (None, None), ("", ""),
])
def test_safe_cell_neutralises_formulas_and_keeps_numbers(value, expected):
    assert safe_cell(value) == expected
    assert safe_row([value]) == [expected]


def test_decide_csv_writes_no_formula_cell(study_text, tmp_path):
    """Names are checked where they enter, so no configuration id starts like a formula; if one ever did (a name
    from a reader without the check), its cell starts with "'" and numbers stay numbers."""
    from runner.decision.render.csv_table import render_csv

    path = tmp_path / "study.toml"
    path.write_text(study_text(), encoding="utf-8")
    study = load_study(path)
    decision = decide([campaign(study, {"batch_size=1": [("ok", 30.0)] * 2})], study,
                      load_catalog(default_catalog_path()))
    hostile = dataclasses.replace(decision.configurations[0], configuration_id="=HYPERLINK(\"http://evil\")",
                                  hardware="@SUM(1)", exclusions=("-2+3", "+cmd|' /C calc'!A0"))
    rows = list(csv.reader(io.StringIO(render_csv(dataclasses.replace(decision, configurations=(hostile,))))))
    assert rows[1][0] == "'=HYPERLINK(\"http://evil\")" and rows[1][2] == "'@SUM(1)"
    assert rows[1][rows[0].index("not_ranked_because")] == "'-2+3; +cmd|' /C calc'!A0"
    assert not [cell for row in rows for cell in row if cell[:1] in ("=", "+", "@", "\t", "\r")]


# -- names and free text -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["=x", "+x", "-x", "@x", "a b", "a|b", "<b>", "a\x1b[2J", "\udcff", "x" * 65, "",
                                  "  ", "rtx\u202e4090"])
def test_gpu_names_are_plain(name):
    with pytest.raises(UserError) as caught:
        check_gpu_name(name, "catalog.csv:2, column gpu")
    assert "catalog.csv:2, column gpu" in caught.value.message and "\x1b" not in caught.value.message


@pytest.mark.parametrize("name, key", [(" RTX-4090 ", "rtx-4090"), ("h100-sxm", "h100-sxm"), ("gh200+", "gh200+"),
                                       ("mi300x", "mi300x"), ("a100_80gb", "a100_80gb")])
def test_real_gpu_names_pass(name, key):
    assert check_gpu_name(name, "w") == key


@pytest.mark.parametrize("text", ["a\x1b[31mb", "a\x00b", "a\rb", "a\u202eb", "a\x7fb", "a\x85b", "a\nb"])
def test_plain_text_holds_no_control_character(text):
    with pytest.raises(UserError, match="control character"):
        check_plain_text(text, "the description", "ledger.csv:2")


def test_plain_text_bounds_and_allowances():
    assert check_plain_text("Object storage, 2 TB — €", "d", "w") == "Object storage, 2 TB — €"
    assert check_plain_text("two\nlines\tand a tab", "d", "w", newlines=True).startswith("two")
    with pytest.raises(UserError, match="longer than 5 characters"):
        check_plain_text("abcdef", "d", "w", max_chars=5)


def test_terminal_and_markdown_text():
    assert terminal_text("ok\x1b[2J\u202e\r\nnext\tline") == "ok\\x1b[2J\\u202e\\r\nnext\tline"
    assert markdown_text("a|b <img src=x onerror=1> [l](javascript:1) `c` *e* snake_case") == (
        "a\\|b \\<img src=x onerror=1\\> \\[l\\](javascript:1) \\`c\\` \\*e\\* snake_case")
    assert markdown_text("two\nlines\n# heading") == "two lines # heading"


def test_the_memo_and_the_report_show_ledger_text_as_written(study_text, tmp_path):
    from runner.decision.offline.memo import render_memo
    from runner.decision.offline.report import render_report

    path = tmp_path / "study.toml"
    path.write_text(study_text().replace('question = "Which', 'question = "<script>x</script> [a](javascript:1) Which'),
                    encoding="utf-8")
    study = load_study(path)
    ledger = parse_ledger("date,description,amount_usd,evidence\n"
                          "2026-09-30,<img src=x>|cell,1.00,[inv](javascript:1)\n", "ledger.csv")
    decision = decide([campaign(study, {"batch_size=1": [("ok", 30.0)]})], study, load_catalog(default_catalog_path()),
                      ledger)
    memo, report = render_memo(decision), render_report(decision)
    assert "| 2026-09-30 | \\<img src=x\\>\\|cell | 1.00 | \\[inv\\](javascript:1) |" in memo
    assert "Question: \\<script\\>x\\</script\\> \\[a\\](javascript:1) Which" in memo
    assert "<script>" not in report and "<img" not in report and "&lt;img src=x&gt;|cell" in report


# -- numbers: lots, money, the ledger, the [job] table ---------------------------------------------------


@pytest.mark.parametrize("lots", [0, -1, MAX_LOTS + 1, 10**30, True, 2.0])
def test_lots_are_bounded_everywhere_money_is_computed(lots):
    catalog = load_catalog(default_catalog_path())
    plan = catalog.find("rtx-4090", 7)
    assert plan is not None
    for call in (lambda: check_lots(lots, "--lots"), lambda: quote(catalog, "rtx-4090", 7, lots),
                 lambda: charge(plan, 10.0, lots)):
        with pytest.raises(UserError, match="lots must be a positive whole number"):
            call()


def test_max_lots_is_priced_exactly_and_a_huge_amount_formats():
    catalog = load_catalog(default_catalog_path())
    assert quote(catalog, "b200", 7, MAX_LOTS, accepted_results=3).total_usd == Decimal("20710000.00")
    assert format_usd(Decimal("9" * 40)) == "9" * 40 + ".00"  # 28-digit arithmetic would raise InvalidOperation


def test_a_recorded_rental_beyond_max_lots_is_refused_by_the_decision():
    catalog = load_catalog(default_catalog_path())
    with pytest.raises(UserError, match="names 10{30} lots of rtx-4090, not 1 to 10,000") as caught:
        plan_cost(catalog, "rtx-4090", 10**30, 10.0, 1)
    assert "isocost rental DIR --gpu rtx-4090 --lots N" in caught.value.message


@pytest.mark.parametrize("amount, message", [("9" * 30, "more than 12 digits"), ("1.1234567", "6 after"),
                                             ("1e3", "not a decimal number"), ("-" + "9" * 13, "more than 12")])
def test_ledger_amounts_are_bounded(amount, message):
    with pytest.raises(UserError, match=message) as caught:
        parse_ledger(f"date,description,amount_usd,evidence\n2026-09-30,storage,{amount},inv\n", "ledger.csv")
    assert "ledger.csv:2, column amount_usd" in caught.value.message


def test_a_ledger_of_too_many_lines_is_refused():
    text = "date,description,amount_usd,evidence\n" + "2026-09-30,s,1.00,i\n" * 100_001
    with pytest.raises(UserError, match="more than 100,000"):
        parse_ledger(text, "ledger.csv")


@pytest.mark.parametrize("job, message", [
    ("inputs = 10\nbootstrap_resamples = 1000000000",
     "bootstrap_resamples must be between 100 and 20000, got 1000000000"),
    ("inputs = 10000000000000", "inputs must be between 1 and 1000000000000"),
    ("inputs_per_day = 1000000000000\ndays = 3000",
     "inputs_per_day × days (1000000000000 × 3000) must be between 1 and"),
    ("inputs_per_day = 10\ndays = 100000", "days must be between 1 and 3650"),
    ("inputs = 10\ncorpora = 10000000", "corpora must be between 1 and 1000000"),
    ("inputs = 10\ncards_per_lot = 100000", "cards_per_lot must be between 1 and 1024"),
    ("inputs = 10\nbootstrap_seed = 100000000000000000000",
     "bootstrap_seed must be between 0 and 18446744073709551615"),
])
def test_job_numbers_are_bounded_with_the_bound_in_the_error(tmp_path, study_text, job, message):
    path = tmp_path / "study.toml"
    path.write_text(study_text() + "\n[job]\n" + job + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)")) as caught:
        load_study(path)
    assert "key job." in caught.value.message


# -- study names -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("old, new, message", [
    ('name = "tiny"', 'name = "-tiny"', "starting with a letter or digit"),
    ('name = "batch"', 'name = "=HYPERLINK(1)"', "a series name must be"),
    ('name = "short"', 'name = "<b>short</b>"', "a length bucket name must be"),
    ('question = "Which', 'question = "\\u001b[2JWhich', "the question holds the control character"),
])
def test_names_a_study_gives_its_outputs_are_plain(tmp_path: Path, study_text, old, new, message):
    text = study_text()
    assert old in text
    path = tmp_path / "study.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(UserError, match=message.replace("[", "\\[")):
        load_study(path)
