"""DIR/rentals.jsonl as decide reads it (runner.campaign_dir.rentals): the latest line wins; every line is
chained; a bad line names the file and line; a cut last line (a crash mid-append) is named and refused, never
skipped, and the next `isocost rental` keeps its bytes in rentals.jsonl.partial-N."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import UserError
from runner.campaign_dir.appendlog import line_digest
from runner.campaign_dir.rentals import latest_rental, read_rentals


def entry(**fields: object) -> dict[str, Any]:
    base: dict[str, Any] = {"schema_version": 2, "recorded_at": "2026-11-30T21:00:00Z", "gpu": "rtx-4090",
                            "lots": 1, "plan_start": None}
    return {**base, **fields}


def chained(*entries: dict[str, Any], genesis: str = "") -> str:
    """The lines as `isocost rental` writes them (no campaign.json beside them: the chain starts at "")."""
    text, previous = "", genesis
    for item in entries:
        previous = line_digest(previous, item)
        text += json.dumps({**item, "chain_sha256": previous}, sort_keys=True) + "\n"
    return text


def test_latest_line_wins_and_absent_file_is_none(tmp_path: Path) -> None:
    assert latest_rental(tmp_path) is None
    assert read_rentals(tmp_path) == ()
    (tmp_path / "rentals.jsonl").write_text(chained(entry(), entry(gpu="b200", lots=2, host="gpu-1")),
                                            encoding="utf-8")
    assert [r.gpu for r in read_rentals(tmp_path)] == ["rtx-4090", "b200"]
    latest = latest_rental(tmp_path)
    assert latest is not None and (latest.gpu, latest.lots, latest.host) == ("b200", 2, "gpu-1")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (entry(schema_version=3), "rental line has schema_version 3"),
        (entry(schema_version=1), "written before rentals were chained"),
        (entry(lots=0), "rental line needs a gpu name and an integer lots from 1 to 10000"),
        (entry(lots=10**30), "rental line needs a gpu name and an integer lots from 1 to 10000"),
        (entry(lots=True), "key 'lots' must be an integer, got true"),
        (entry(gpu=3), "key 'gpu' must be a string, got 3"),
        (entry(gpu=""), "rental line needs a gpu name"),
        (entry(gpu="  "), "rental line needs a gpu name"),
        (entry(extra="x"), "unknown key 'extra'"),
        (entry(plan_start=9), "key 'plan_start' must be a string or null, got 9"),
    ],
)
def test_bad_rental_line_names_file_and_line(tmp_path: Path, bad: dict[str, Any], message: str) -> None:
    (tmp_path / "rentals.jsonl").write_text(chained(entry(), bad, entry()), encoding="utf-8")  # not the last line
    with pytest.raises(UserError) as caught:
        read_rentals(tmp_path)
    assert message in caught.value.message and f"{tmp_path / 'rentals.jsonl'}, line 2" in caught.value.message


def test_a_line_that_is_not_json_is_refused_wherever_it_is(tmp_path: Path) -> None:
    for text in ("{not json\n" + chained(entry()), chained(entry()) + "{not json\n"):
        (tmp_path / "rentals.jsonl").write_text(text, encoding="utf-8")
        with pytest.raises(UserError, match="rentals.jsonl has a line that is not a JSON object"):
            read_rentals(tmp_path)


def test_an_edited_line_breaks_the_chain_at_that_line(tmp_path: Path) -> None:
    text = chained(entry(lots=2), entry(gpu="b200"))
    (tmp_path / "rentals.jsonl").write_text(text.replace('"lots": 2', '"lots": 1', 1), encoding="utf-8")
    with pytest.raises(UserError, match=r"rentals.jsonl line 1 does not match its chain digest"):
        latest_rental(tmp_path)
    lines = text.splitlines(keepends=True)
    (tmp_path / "rentals.jsonl").write_text(lines[1], encoding="utf-8")  # the first rental removed
    with pytest.raises(UserError, match=r"line 1 does not match its chain digest"):
        read_rentals(tmp_path)


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rentals.jsonl").write_text(chained(entry()).replace('"lots": 1', '"lots": 1, "lots": 7'),
                                            encoding="utf-8")
    with pytest.raises(UserError, match="rentals.jsonl has a line with a duplicate key 'lots'"):
        read_rentals(tmp_path)


def test_cut_last_line_is_named_and_refused_never_skipped(tmp_path: Path) -> None:
    """Defect 3: decide priced the previous rental ("latest of 1") without a word."""
    (tmp_path / "rentals.jsonl").write_text(chained(entry(gpu="b200")) + '{"schema_version": 2, "gp',
                                            encoding="utf-8")
    with pytest.raises(UserError) as caught:
        latest_rental(tmp_path)
    assert "rentals.jsonl ends in line 2, cut while it was written" in caught.value.message
    assert "rentals.jsonl.partial-N" in caught.value.message


def test_a_directory_in_its_place_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rentals.jsonl").mkdir()
    with pytest.raises(UserError, match="rentals.jsonl is a directory, not a regular file"):
        read_rentals(tmp_path)
