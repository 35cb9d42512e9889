"""The predictions reader (protocol.tasks.classification.predictions): its fast paths give what a line-by-line
json.loads gives."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from protocol.tasks.classification.predictions import ParsedPredictions, Prediction, parse_predictions


def _not_json(name: str) -> float:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: Python's extension, refused (issue 38)


def naive(text: str) -> tuple[list[tuple[str, str, float]], list[str]]:
    """The textbook reader: json.loads per line, every rule checked by hand."""
    rows, errors = [], []
    lines = text.split("\n")
    truncated = lines.pop() if lines else ""
    for number, line in enumerate(lines, start=1):
        try:
            item = json.loads(line, parse_constant=_not_json)
        except ValueError:
            errors.append(f"line {number}: not valid JSON")
            continue
        score = item.get("score") if isinstance(item, dict) else None
        if not isinstance(item, dict):
            errors.append(f"line {number}: not a JSON object")
        elif not isinstance(item.get("id"), str):
            errors.append(f"line {number}: missing or non-string id")
        elif not isinstance(item.get("label"), str):
            errors.append(f"line {number}: missing or non-string label")
        elif isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            errors.append(f"line {number}: missing or non-finite score")
        elif not 0.0 <= score <= 1.0:
            errors.append(f"line {number}: score {score} outside [0, 1]")
        else:
            rows.append((item["id"], item["label"], float(score)))
    if truncated:
        errors.append(f"line {len(lines) + 1}: truncated (no final newline)")
    return rows, errors


SCORE_TEXTS = ["0", "1", "0.5", "0.0", "1.0", "1.000", "1e-05", "5.960464477539063e-08", "2e-1", "1E-3",
               "1.5", "1e5", "1e-0", "0e0", "-0.0", "0.5e-3", "00.5", "0.", "NaN", "Infinity", "true", '"0.5"']


@pytest.mark.parametrize("score", SCORE_TEXTS)
def test_every_score_text_reads_as_json_loads_does(tmp_path: Path, score: str) -> None:
    runner_line = json.dumps({"id": "a", "label": "x", "score": 0.25})
    text = f'{runner_line}\n{{"id": "b", "label": "y", "score": {score}}}\n{runner_line.replace(chr(97), "c", 1)}\n'
    path = tmp_path / "predictions.jsonl"
    path.write_text(text, encoding="utf-8")
    parsed = parse_predictions(path)
    rows, errors = naive(text)
    assert list(zip(parsed.ids, parsed.labels, parsed.scores, strict=True)) == rows
    assert list(parsed.format_errors) == errors
    assert all(type(score) is float for score in parsed.scores)


@pytest.mark.parametrize("line", [
    {"id": "café", "label": "x", "score": 0.5},  # json.dumps escapes it: not the runner's fast path
    {"id": 'quo"te', "label": "x", "score": 0.5},
    {"id": "tab\there", "label": "x", "score": 0.5},
    {"label": "x", "id": "swapped", "score": 0.5},
    {"id": "a", "label": "x", "score": 0.5, "extra": 1},
])
def test_lines_off_the_runner_shape_read_as_json_loads_does(tmp_path: Path, line: dict[str, object]) -> None:
    text = "".join(json.dumps(item) + "\n" for item in ({"id": "0", "label": "x", "score": 0.1}, line))
    text += json.dumps(line, ensure_ascii=False) + "\n"
    path = tmp_path / "predictions.jsonl"
    path.write_text(text, encoding="utf-8")
    parsed = parse_predictions(path)
    rows, errors = naive(text)
    assert list(zip(parsed.ids, parsed.labels, parsed.scores, strict=True)) == rows
    assert list(parsed.format_errors) == errors


def test_columns_and_objects_are_the_same_record() -> None:
    objects = (Prediction("a", "x", 0.5), Prediction("b", "y", 1.0))
    from_objects = ParsedPredictions(objects, ("line 3: not valid JSON",))
    from_columns = ParsedPredictions.from_columns(["a", "b"], ["x", "y"], ["0.5", 1.0], ["line 3: not valid JSON"])
    assert from_columns == from_objects and hash(from_columns) == hash(from_objects)
    assert from_columns.predictions == objects
    assert from_columns.scores == (0.5, 1.0) and from_columns.ids == ("a", "b") and from_columns.labels == ("x", "y")
    assert from_objects.predictions is not None and from_objects.format_errors == ("line 3: not valid JSON",)
    assert "2 predictions, 1 format error(s)" in repr(from_columns)
    assert ParsedPredictions() != from_objects


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="columns differ in length: 2 ids, 1 labels, 2 scores"):
        ParsedPredictions.from_columns(["a", "b"], ["x"], [0.1, 0.2])


def test_a_long_pass_crosses_chunks_and_keeps_line_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import protocol.tasks.classification.predictions as module

    monkeypatch.setattr(module, "_CHUNK_CHARS", 200)  # a few lines per chunk
    lines = [json.dumps({"id": f"doc-{i}", "label": "x", "score": i / 100}) for i in range(40)]
    lines[17] = '{"id": "doc-17", "label": "x", "score": 1.5}'
    lines[33] = "{not json"
    text = "\n".join(lines) + "\n"
    path = tmp_path / "predictions.jsonl"
    path.write_text(text, encoding="utf-8")
    parsed = parse_predictions(path)
    rows, errors = naive(text)
    assert list(zip(parsed.ids, parsed.labels, parsed.scores, strict=True)) == rows
    assert list(parsed.format_errors) == errors == ["line 18: score 1.5 outside [0, 1]", "line 34: not valid JSON"]
