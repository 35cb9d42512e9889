"""Reading a pass's ``predictions.jsonl``: one JSON object per line, ``{"id", "label", "score"}``.

Malformed lines are counted and described, never fatal: the reader returns what it could read
and one message per problem line, exactly as a line-by-line ``json.loads`` reader would. The
result is kept by column (:class:`ParsedPredictions`), so checking a pass, which needs only the
ids and labels, makes no per-line object.

Fast paths, in order (each one exact, or it hands the chunk to the next):

1. lines exactly as the runner writes them (``json.dumps`` of id, label, score in [0, 1]): one
   regular expression per chunk of lines; the scores stay text until ``scores`` is read;
2. any well-formed chunk: one ``json.loads`` over the chunk joined into an array;
3. line by line, describing every problem.

An object that names a key twice (two labels for one id) is a format error of its line, on every path:
``json.loads`` alone would keep the last value silently (:func:`protocol.io.jsonio.loads_unique`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from protocol.io.gc_pause import collection_paused
from protocol.io.jsonio import DuplicateKeyError, loads_unique
from protocol.io.safe_read import decoded_lines, name_invalid_lines


@dataclass(frozen=True)
class Prediction:
    id: str
    label: str
    score: float


class ParsedPredictions:
    """One pass's predictions in file order, and the description of every malformed line.

    ``ParsedPredictions(predictions, format_errors)`` builds one from objects, :meth:`from_columns`
    from columns. ``ids``, ``labels`` and ``scores`` are the columns; the :class:`Prediction`
    objects (``predictions``) and the float scores are made on first use.
    """

    __slots__ = ("_format_errors", "_ids", "_labels", "_raw_scores", "_scores", "_predictions")

    def __init__(self, predictions: Iterable[Prediction] = (), format_errors: Iterable[str] = ()) -> None:
        items = tuple(predictions)
        self._ids = tuple(p.id for p in items)
        self._labels = tuple(p.label for p in items)
        self._raw_scores: tuple[float | str, ...] = tuple(p.score for p in items)
        self._scores: tuple[float, ...] | None = None
        self._format_errors = tuple(format_errors)
        self._predictions: tuple[Prediction, ...] | None = items

    @classmethod
    def from_columns(cls, ids: Sequence[str], labels: Sequence[str], scores: Sequence[float | str],
                     format_errors: Iterable[str] = ()) -> ParsedPredictions:
        """Columns of one length; a score may be the text of a JSON number (its ``float`` is the score)."""
        if not len(ids) == len(labels) == len(scores):
            raise ValueError(f"columns differ in length: {len(ids)} ids, {len(labels)} labels, {len(scores)} scores")
        parsed = cls()
        parsed._ids, parsed._labels, parsed._raw_scores = tuple(ids), tuple(labels), tuple(scores)
        parsed._format_errors = tuple(format_errors)
        parsed._predictions = None
        return parsed

    @property
    def ids(self) -> tuple[str, ...]:
        return self._ids

    @property
    def labels(self) -> tuple[str, ...]:
        return self._labels

    @property
    def scores(self) -> tuple[float, ...]:
        if self._scores is None:
            self._scores = tuple(map(float, self._raw_scores))
        return self._scores

    @property
    def format_errors(self) -> tuple[str, ...]:
        return self._format_errors

    @property
    def predictions(self) -> tuple[Prediction, ...]:
        if self._predictions is None:
            self._predictions = tuple(map(Prediction, self._ids, self._labels, self.scores))
        return self._predictions

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ParsedPredictions):
            return NotImplemented
        return (self.ids, self.labels, self.scores, self.format_errors) == (
            other.ids, other.labels, other.scores, other.format_errors)

    def __hash__(self) -> int:
        return hash((self.ids, self.labels, self.scores, self.format_errors))

    def __repr__(self) -> str:
        return f"ParsedPredictions({len(self._ids)} predictions, {len(self._format_errors)} format error(s))"


class _Columns:
    """The columns being filled, and the format errors."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.labels: list[str] = []
        self.scores: list[float | str] = []
        self.errors: list[str] = []

    def extend(self, ids: Iterable[str], labels: Iterable[str], scores: Iterable[float | str]) -> None:
        self.ids.extend(ids)
        self.labels.extend(labels)
        self.scores.extend(scores)


def parse_predictions(path: Path) -> ParsedPredictions:
    """Read ``predictions.jsonl``; malformed lines are counted and described, never fatal."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ParsedPredictions((), ("prediction file missing",))
    text, invalid = decoded_lines(data)  # a line of invalid UTF-8 is a malformed line, never U+FFFD in a label
    del data
    complete = text.rfind("\n") + 1  # text[:complete] is whole lines; anything after is a truncated line
    columns = _Columns()
    with collection_paused():
        lines_read = _parse_complete_lines(text, complete, columns)
    if complete < len(text):
        columns.errors.append(f"line {lines_read + 1}: truncated (no final newline)")
    return ParsedPredictions.from_columns(columns.ids, columns.labels, columns.scores,
                                          name_invalid_lines(columns.errors, invalid))


#: Characters per chunk on the fast paths (about 60,000 runner-written lines; bounds the memory).
_CHUNK_CHARS = 4 * 2**20


def _parse_complete_lines(text: str, complete: int, columns: _Columns) -> int:
    """Fill ``columns`` from ``text[:complete]`` (whole lines); returns the number of lines.

    The text is taken in chunks of whole lines. A chunk of lines exactly as the runner writes them is read by one
    regular expression; another well-formed chunk by one ``json.loads`` and checks by column; a chunk with any problem
    line by line, which describes every problem exactly as a line-by-line reader does.
    """
    lines_before = 0
    start = 0
    while start < complete:
        stop = text.find("\n", min(start + _CHUNK_CHARS, complete) - 1) + 1
        body = text[start : stop - 1]  # the chunk's lines, without the last newline
        count = body.count("\n") + 1
        if not _runner_lines(body, count, columns):
            items = _parse_chunk(body, count)
            if items is None or not _columns_from_items(items, columns):
                _line_by_line(body, lines_before, items, columns)
        lines_before += count
        start = stop
    return lines_before


def _line_by_line(body: str, lines_before: int, items: list[Any] | None, columns: _Columns) -> None:
    """Read each line of ``body`` (``items``: what ``json.loads`` gives for each, if known), describing problems."""
    for number, line in enumerate(body.split("\n"), start=lines_before + 1):
        if items is not None:
            item = items[number - lines_before - 1]  # what json.loads(line) gives (see _parse_chunk)
        else:
            try:
                item = loads_unique(line)
            except DuplicateKeyError as exc:  # two labels for one id: never the last one silently
                columns.errors.append(f"line {number}: {exc}")
                continue
            except (ValueError, RecursionError):  # bad JSON, integers over the digit limit, deep nesting
                columns.errors.append(f"line {number}: not valid JSON")
                continue
        problem = _prediction_problem(item)
        if problem:
            columns.errors.append(f"line {number}: {problem}")
            continue
        columns.extend((item["id"],), (item["label"],), (float(item["score"]),))


#: One line exactly as the runner writes it (``json.dumps`` of id, label, score): strings without
#: escapes or control characters (so the text between the quotes IS the value), and a score that
#: can only be a JSON number in [0, 1]: 0, 0.DIGITS, 1, 1.0…, or D.DIGITS e-K with K ≥ 1 (Python's
#: ``repr`` of a small float). ``float`` of its text is what ``json.loads`` makes of it. Any other
#: number goes to the JSON path, which reads and range-checks it.
_RUNNER_LINE = re.compile(
    r'^\{"id": "([^"\\\x00-\x1f]*)", "label": "([^"\\\x00-\x1f]*)", '
    r'"score": (0(?:\.[0-9]+)?|1(?:\.0+)?|[1-9](?:\.[0-9]+)?[eE]-0*[1-9][0-9]*)\}$',
    re.MULTILINE,
)


def _runner_lines(body: str, count: int, columns: _Columns) -> bool:
    """Add the chunk's columns if all ``count`` lines are runner-written and well-formed; else add nothing."""
    rows = _RUNNER_LINE.findall(body)
    if len(rows) != count:  # a line can match at most once, so every line matched
        return False
    columns.extend(map(_FIRST, rows), map(_SECOND, rows), map(_THIRD, rows))  # faster than zip(*rows)
    return True


_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)


def _parse_chunk(body: str, count: int) -> list[Any] | None:
    """Parse ``count`` newline-separated JSON lines with one ``json.loads``, or None when not exact.

    The lines become one array with ``",\n"`` between them. When every line starts with ``{`` and the text holds no
    ``[``, each separator can only be read as a top-level array comma: a string cannot run across it (strict JSON
    refuses a raw newline inside a string), numbers and literals end at a comma, and inside an object a comma must be
    followed by a key, never by the ``{`` that starts the next line. So if the array parses and has exactly one item per
    line, item k is exactly what ``json.loads`` of line k returns; otherwise None, and the caller reads line by line.
    """
    if not body.startswith("{") or body.count("\n{") != count - 1 or "[" in body:
        return None
    try:  # a key named twice raises here too: the line-by-line reader then names its line
        items = loads_unique("[" + body.replace("\n", ",\n") + "]")
    except (ValueError, RecursionError):
        return None
    if len(items) != count:
        return None
    return items


def _columns_from_items(items: list[Any], columns: _Columns) -> bool:
    """Add the columns of parsed lines when every line is well-formed; else add nothing (checked item by item)."""
    try:
        ids = list(map(itemgetter("id"), items))
        labels = list(map(itemgetter("label"), items))
        scores = list(map(itemgetter("score"), items))
    except (KeyError, TypeError):  # a missing key, or not an object
        return False
    if set(map(type, ids)) != {str} or set(map(type, labels)) != {str}:
        return False
    score_types = set(map(type, scores))
    if not score_types <= {float, int}:  # bool is its own type here, as in _prediction_problem
        return False
    try:
        if not all(map(math.isfinite, scores)):
            return False
    except OverflowError:  # an integer too large for a float: the item-by-item path describes it
        return False
    if min(scores) < 0.0 or max(scores) > 1.0:
        return False
    columns.extend(ids, labels, map(float, scores) if int in score_types else scores)
    return True


def _finite(score: int | float) -> bool:
    try:
        return math.isfinite(score)
    except OverflowError:  # an integer beyond the float range
        return False


def _prediction_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return "not a JSON object"
    if not isinstance(item.get("id"), str):
        return "missing or non-string id"
    if not isinstance(item.get("label"), str):
        return "missing or non-string label"
    score = item.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not _finite(score):
        return "missing or non-finite score"
    if not 0.0 <= score <= 1.0:
        return f"score {score} outside [0, 1]"
    return ""
