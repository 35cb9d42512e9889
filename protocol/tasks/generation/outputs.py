"""Reading a generation pass's ``generations.jsonl``: one JSON object per input, as the trial wrote it per batch.

A line is ``{"id", "tokens", "text", "n_tokens", "top_ids", "top_logprobs"}``: the generated token ids (the
end-of-sequence token included when the model stopped on it, padding never), their decoded text (special tokens
skipped), their count, and at each generated position the ``k`` most likely token ids with their
log-probabilities, most likely first. Malformed lines are counted and described, never fatal (the reader
returns what it could read); the checks that need the study (token ids inside the vocabulary, at most
``max_new_tokens``, ``k`` as declared) are :func:`range_problems`, run by the pass check. The vocabulary size
is the one the trial recorded in its ``manifest.json`` (``model.vocab_size``, sealed in the raw row).

Example::

    parsed = parse_generations(Path("trials/t/generations.jsonl"), vocab_size=49152)
    parsed.ids, parsed.items[0].tokens, parsed.format_errors
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.jsonio import DuplicateKeyError, loads_unique
from protocol.io.safe_read import decoded_lines
from protocol.records.codec import read_record
from protocol.records.manifest import Manifest

OUTPUT_FILE = "generations.jsonl"
KEYS = frozenset({"id", "tokens", "text", "n_tokens", "top_ids", "top_logprobs"})
#: A log-probability a little above 0 is rounding (log_softmax in low precision); more is not a log-probability.
LOGPROB_SLACK = 1e-3


@dataclass(frozen=True)
class Generation:
    """One input's generation."""

    id: str
    tokens: tuple[int, ...]
    text: str
    top_ids: tuple[tuple[int, ...], ...]
    top_logprobs: tuple[tuple[float, ...], ...]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class ParsedGenerations:
    """One pass's generations in file order, every malformed line described, and the vocabulary size recorded."""

    items: tuple[Generation, ...]
    format_errors: tuple[str, ...]
    vocab_size: int | None

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(item.id for item in self.items)

    def by_id(self) -> dict[str, Generation]:
        return {item.id: item for item in self.items}


def read_vocab_size(manifest: Path) -> int | None:
    """``model.vocab_size`` of the trial's manifest, or None when absent or not a manifest (the campaign checks name
    an unreadable manifest; the generations are then read without the vocabulary bound)."""
    try:
        record = read_record(manifest, Manifest)
    except UserError:
        return None
    size = (record.model or {}).get("vocab_size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def parse_generations(path: Path, vocab_size: int | None) -> ParsedGenerations:
    """Read ``generations.jsonl``; malformed lines are counted and described, never fatal."""
    try:
        text, invalid = decoded_lines(path.read_bytes())  # an invalid byte is a malformed line, never U+FFFD
    except FileNotFoundError:
        return ParsedGenerations((), (f"{OUTPUT_FILE} missing",), vocab_size)
    complete = text.rfind("\n") + 1
    items: list[Generation] = []
    errors: list[str] = []
    lines = text[:complete].split("\n")[:-1] if complete else []
    for number, line in enumerate(lines, start=1):
        if number in invalid:
            errors.append(f"line {number}: not valid UTF-8")
            continue
        try:
            item = loads_unique(line)
        except DuplicateKeyError as exc:
            errors.append(f"line {number}: {exc}")
            continue
        except (ValueError, RecursionError):
            errors.append(f"line {number}: not JSON")
            continue
        problem = _line_problem(item)
        if problem:
            errors.append(f"line {number}: {problem}")
            continue
        items.append(Generation(id=item["id"], tokens=tuple(item["tokens"]), text=item["text"],
                                top_ids=tuple(map(tuple, item["top_ids"])),
                                top_logprobs=tuple(tuple(map(float, row)) for row in item["top_logprobs"])))
    if complete < len(text):
        errors.append(f"line {len(lines) + 1}: truncated (no final newline)")
    return ParsedGenerations(tuple(items), tuple(errors), vocab_size)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_logprob(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value <= LOGPROB_SLACK
    except OverflowError:
        return False


def _line_problem(item: Any) -> str:
    """Why a parsed line is not one generation ('' when it is)."""
    if not isinstance(item, dict):
        return "not a JSON object"
    if set(item) != KEYS:
        return f"keys {sorted(item)[:8]} are not {sorted(KEYS)}"
    if not isinstance(item["id"], str) or not item["id"]:
        return "missing or non-string id"
    tokens, n_tokens, text = item["tokens"], item["n_tokens"], item["text"]
    if not isinstance(tokens, list) or not all(map(_is_int, tokens)):
        return f"id {item['id']!r}: tokens is not a list of integers"
    if not _is_int(n_tokens) or n_tokens != len(tokens):
        return f"id {item['id']!r}: n_tokens {n_tokens!r} is not the number of tokens ({len(tokens)})"
    if not isinstance(text, str):
        return f"id {item['id']!r}: text is not a string"
    top_ids, top_logprobs = item["top_ids"], item["top_logprobs"]
    if not isinstance(top_ids, list) or not isinstance(top_logprobs, list) or \
            len(top_ids) != len(tokens) or len(top_logprobs) != len(tokens):
        return f"id {item['id']!r}: top_ids and top_logprobs need one row per generated token"
    for ids, logprobs in zip(top_ids, top_logprobs, strict=True):
        if not isinstance(ids, list) or not isinstance(logprobs, list) or len(ids) != len(logprobs) or not ids:
            return f"id {item['id']!r}: a top-k row is not two lists of the same, non-zero length"
        if not all(map(_is_int, ids)) or not all(map(_is_logprob, logprobs)):
            return f"id {item['id']!r}: a top-k row holds a non-integer id or a log-probability that is not ≤ 0"
    return ""


def range_problems(parsed: ParsedGenerations, max_new_tokens: int, top_k: int) -> list[str]:
    """The study's limits on each generation: ids inside the vocabulary, at most ``max_new_tokens`` tokens,
    ``top_k`` candidates per position (fewer only when the vocabulary is smaller)."""
    problems: list[str] = []
    vocab = parsed.vocab_size
    if vocab is None and parsed.items:
        problems.append("the trial's manifest.json records no model.vocab_size: token ids cannot be checked")
    k = min(top_k, vocab) if vocab is not None else top_k
    for item in parsed.items:
        if item.n_tokens > max_new_tokens:
            problems.append(f"id {item.id!r}: {item.n_tokens} tokens, more than max_new_tokens {max_new_tokens}")
        elif vocab is not None and any(t < 0 or t >= vocab for t in item.tokens):
            bad = next(t for t in item.tokens if t < 0 or t >= vocab)
            problems.append(f"id {item.id!r}: token id {bad} outside the vocabulary (0 to {vocab - 1})")
        elif vocab is not None and any(t < 0 or t >= vocab for row in item.top_ids for t in row):
            problems.append(f"id {item.id!r}: a top-k token id outside the vocabulary (0 to {vocab - 1})")
        elif any(len(row) != k for row in item.top_ids):
            problems.append(f"id {item.id!r}: top-k rows are not of the declared k = {k}")
    return problems
