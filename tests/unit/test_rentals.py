"""DIR/rentals.jsonl as decide reads it (runner.campaign_dir.rentals): the latest line wins; a bad line names the
file and line; a torn last line (a crash mid-append) is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from runner.campaign_dir.rentals import latest_rental, read_rentals


def line(**fields: object) -> str:
    base = {"schema_version": 1, "recorded_at": "2026-11-30T21:00:00Z", "gpu": "rtx-4090", "lots": 1,
            "plan_start": None}
    return json.dumps({**base, **fields}) + "\n"


def test_latest_line_wins_and_absent_file_is_none(tmp_path: Path) -> None:
    assert latest_rental(tmp_path) is None
    assert read_rentals(tmp_path) == ()
    (tmp_path / "rentals.jsonl").write_text(line() + line(gpu="b200", lots=2, host="gpu-1"), encoding="utf-8")
    assert [r.gpu for r in read_rentals(tmp_path)] == ["rtx-4090", "b200"]
    latest = latest_rental(tmp_path)
    assert latest is not None and (latest.gpu, latest.lots, latest.host) == ("b200", 2, "gpu-1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json\n", "rentals.jsonl has a line that is not JSON"),
        (line(schema_version=2), "rental line has schema_version 2"),
        (line(lots=0), "rental line needs a gpu name and a positive integer lots"),
        (line(lots=True), "rental line needs a gpu name and a positive integer lots"),
        (line(gpu=3), "rental line needs a gpu name and a positive integer lots"),
        (line(gpu=""), "rental line needs a gpu name"),
        (line(gpu="  "), "rental line needs a gpu name"),
    ],
)
def test_bad_rental_line_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "rentals.jsonl").write_text(line() + text + line(), encoding="utf-8")  # not the last line
    with pytest.raises(UserError) as caught:
        read_rentals(tmp_path)
    assert message in caught.value.message and f"{tmp_path / 'rentals.jsonl'}, line 2" in caught.value.message


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "rentals.jsonl").write_text(line(gpu="b200") + '{"schema_version": 1, "gp', encoding="utf-8")
    latest = latest_rental(tmp_path)
    assert latest is not None and latest.gpu == "b200"
