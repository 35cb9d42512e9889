"""DIR/rentals.jsonl as decide reads it: the latest line wins; a bad line names the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.rentals import latest_rental, read_rentals


def line(**fields: object) -> str:
    base = {"schema_version": 1, "recorded_at": "2026-11-30T21:00:00Z", "gpu": "rtx-4090", "lots": 1,
            "plan_start": None}
    return json.dumps({**base, **fields}) + "\n"


def test_latest_line_wins_and_absent_file_is_none(tmp_path: Path) -> None:
    assert latest_rental(tmp_path) is None
    (tmp_path / "rentals.jsonl").write_text(line() + "\n" + line(gpu="b200", lots=2, host="gpu-1"), encoding="utf-8")
    assert [r["gpu"] for r in read_rentals(tmp_path / "rentals.jsonl")] == ["rtx-4090", "b200"]
    latest = latest_rental(tmp_path)
    assert latest is not None and (latest["gpu"], latest["lots"], latest["host"]) == ("b200", 2, "gpu-1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json\n", "rental line is not JSON"),
        (line(schema_version=2), "no schema_version 1"),
        (line(gpu=""), "rental line has no gpu"),
        (line(lots=0), "rental lots must be a whole number >= 1, got 0"),
        (line(lots=True), "rental lots must be a whole number >= 1, got True"),
    ],
)
def test_bad_rental_line_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "rentals.jsonl"
    path.write_text(line() + text, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_rentals(path)
    assert message in caught.value.message and f"{path}:2" in caught.value.message
