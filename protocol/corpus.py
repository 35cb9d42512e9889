"""Corpora: reading JSONL/CSV with stable ids, fingerprints, token lengths."""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.csvio import read_dicts, safe_cell
from protocol.io.fingerprint import sha256_bytes
from protocol.io.jsonio import DUPLICATE_KEY_FIX, DuplicateKeyError, json_problem, loads_unique
from protocol.io.safe_read import BOM, check_encodable, decode_text, open_binary, read_text

MAX_ID_CHARS = 200
MAX_LABEL_CHARS = 200
#: A tokenizer.json of a real model is a few MiB (large vocabularies ~20 MiB).
MAX_TOKENIZER_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Record:
    """One input: its stable id, its text, its label ("" where the task needs none), and the task's own
    per-input fields (e.g. a generation's ``reference``), as (name, text) pairs in the task's order."""

    id: str
    text: str
    label: str
    fields: tuple[tuple[str, str], ...] = ()

    def field(self, name: str) -> str:
        return dict(self.fields)[name]


def read_corpus(path: Path, *, require_label: bool = True, extra_fields: tuple[str, ...] = ()) -> tuple[Record, ...]:
    """Read a corpus (``.jsonl`` or ``.csv`` with ``id``, ``text``, and ``label`` unless ``require_label`` is
    False; each field of ``extra_fields`` (a task's ``corpus_fields``) is required too, as text, a JSON number
    read as its text as a CSV cell would be: the task parses its own fields).

    Refuses empty corpora, duplicate or malformed ids, empty texts and missing labels: every input must keep one stable
    identity for the whole campaign. A label given where none is required is read (and checked) all the same.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise UserError(f"unsupported corpus format {suffix!r}", str(path), "Use .jsonl or .csv with id, text, label.")
    with open_binary(path, "corpus file", "Check [corpus] path in the study.") as handle:
        data = handle.read()
    if data.startswith(BOM):  # a byte-order mark is not part of the first id or header
        data = data[len(BOM):]
    required = ("id", "text", *(("label",) if require_label else ()), *extra_fields)
    rows = list(_read_jsonl(path, data) if suffix == ".jsonl" else _read_csv(path, data, required))
    if not rows:
        raise UserError("the corpus is empty", str(path), "A corpus needs at least one input.")
    seen: dict[str, int] = {}
    forms: dict[str, tuple[str, int]] = {}  # the NFC form of each id → the id as written, its line
    records = []
    ends = line_end_note(data)
    for line_no, data in rows:
        where = f"{path}, line {line_no}{ends}"
        record = _record(data, where, required, extra_fields)
        if record.id in seen:
            raise UserError(
                f"duplicate id {record.id!r} (first on line {seen[record.id]})",
                where,
                "Every input needs a unique, stable id.",
            )
        other = forms.setdefault(id_form(record.id), (record.id, line_no))
        if other[0] != record.id:
            raise ambiguous_ids(other[0], record.id, f"lines {other[1]} and {line_no}", str(path))
        seen[record.id] = line_no
        records.append(record)
    return tuple(records)


def id_form(ident: str) -> str:
    """An id as Unicode's canonical composition (NFC) writes it: ``café`` typed two ways is one id."""
    return unicodedata.normalize("NFC", ident)


def ambiguous_ids(first: str, second: str, lines: str, where: str) -> UserError:
    """Two ids that are the same text once normalised (``café`` in NFC and in NFD): two inputs that every
    screen, spreadsheet and editor shows as one, and that a tool which normalises on save would merge."""
    return UserError(
        f"ids {ascii(first)} and {ascii(second)} on {lines} differ only by Unicode normalisation (both are "
        f"{id_form(first)!r} once composed): they look like one id but would count as two inputs",
        where,
        "Write each id in one form (NFC, e.g. unicodedata.normalize('NFC', id)), and give distinct inputs "
        "visibly distinct ids.",
    )


def line_end_note(data: bytes) -> str:
    """What a line number needs beside it when the lines end in CR alone (old Mac OS): the reader counts them as
    lines, but ``wc -l``, ``sed -n 3p`` and most editors on Linux see one line."""
    return " (the file's lines end in CR alone, as on old Macs)" if b"\r" in data and b"\n" not in data else ""


def _read_jsonl(path: Path, data: bytes) -> Any:
    ends = line_end_note(data)
    for line_no, raw in enumerate(data.splitlines(), start=1):  # LF, CRLF or CR alone: a JSON text holds no raw CR
        where = f"{path}, line {line_no}{ends}"
        line = decode_text(raw, "corpus line", where)
        if not line.strip():
            continue
        try:  # a key named twice (two labels) is refused: json alone would keep the last one silently
            item = loads_unique(line)
        except DuplicateKeyError as exc:
            raise UserError(f"{exc}: the input would silently take the last value", where, DUPLICATE_KEY_FIX) from None
        except (ValueError, RecursionError) as exc:  # bad JSON, deep nesting, an integer of thousands of digits
            raise UserError(json_problem(exc), where, "Each line is one flat JSON object.") from None
        yield line_no, item


def _read_csv(path: Path, data: bytes, required: tuple[str, ...]) -> Any:
    text = decode_text(data, "corpus file", str(path))
    # A column named twice is refused (csv.DictReader would keep the last one silently).
    yield from read_dicts(text, "CSV", str(path), required=required, line_note=line_end_note(data))


def _record(data: Any, where: str, required: tuple[str, ...], extra_fields: tuple[str, ...]) -> Record:
    if not isinstance(data, dict):
        raise UserError("each line must be a JSON object", where)
    for key in required:
        if key not in data:
            raise UserError(f"missing field {key!r}", where, f"Each input needs {', '.join(required)}.")
    ident, text = data["id"], data["text"]
    label = data.get("label", "") if "label" in required or data.get("label") not in (None, "") else ""
    if isinstance(ident, int) and not isinstance(ident, bool):
        ident = str(ident)
    if not isinstance(ident, str) or not ident or len(ident) > MAX_ID_CHARS or not ident.isprintable():
        raise UserError(f"invalid id {ident!r}", where, f"Ids are printable strings of 1 to {MAX_ID_CHARS} chars.")
    if ident != ident.strip():
        raise UserError(f"id {ident!r} has surrounding spaces", where, "Strip ids so they stay stable.")
    if safe_cell(ident) != ident:  # corpus_index.csv, verdicts and reports list ids: never a spreadsheet formula
        raise UserError(f"id {ident!r} starts with {ident[0]!r}, which a spreadsheet reads as a formula", where,
                        "Start ids with a letter or a digit (a number such as -1 is fine).")
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"empty or non-text 'text' for id {ident!r}", where)
    if not isinstance(label, str) or (not label and "label" in required):
        raise UserError(f"empty or non-string 'label' for id {ident!r}", where)
    if len(label) > MAX_LABEL_CHARS or not label.isprintable():  # labels head tables on terminals and pages
        raise UserError(f"label {label[:80]!a} of id {ident!r} is not printable text of at most {MAX_LABEL_CHARS} "
                        "characters", where, "A label is a class name: no control characters, one short line.")
    if safe_cell(label) != label:  # like ids: corpus_index.csv and every table list labels, never a formula
        raise UserError(f"label {label!r} of id {ident!r} starts with {label[0]!r}, which a spreadsheet reads as a "
                        "formula", where, "Start labels with a letter or a digit (a number such as -1 is fine).")
    check_encodable(text, f"the text of id {ident!r}", where)
    check_encodable(label, f"the label of id {ident!r}", where)
    fields = []
    for name in extra_fields:
        value = data[name]
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            value = json.dumps(value)  # a number as its text, as a CSV corpus gives it: the task reads it
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"empty or non-text {name!r} for id {ident!r}", where, f"Each input needs a {name} text.")
        check_encodable(value, f"the {name} of id {ident!r}", where)
        fields.append((name, value))
    return Record(id=ident, text=text, label=label, fields=tuple(fields))


def content_fingerprint(records: tuple[Record, ...]) -> str:
    """sha256 of the canonical content (one sorted JSON object per line, in corpus order).

    Equal for the same inputs whether they came from JSONL or CSV.
    """
    lines = (  # a task's own fields count too; a corpus without them hashes as it always did
        json.dumps({"id": r.id, "label": r.label, "text": r.text, **dict(r.fields)}, sort_keys=True,
                   ensure_ascii=False)
        for r in records
    )
    return sha256_bytes(("\n".join(lines) + "\n").encode("utf-8"))


def normalise_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def check_disjoint(final: tuple[Record, ...], tuning: tuple[Record, ...], where: str) -> None:
    """Tuning data must share neither ids nor (normalised) texts with the final corpus."""
    final_ids = {id_form(r.id) for r in final}  # café in NFC and in NFD is one id (read_corpus)
    shared_ids = sorted(final_ids & {id_form(r.id) for r in tuning})
    if shared_ids:
        raise UserError(
            f"the tuning corpus shares {len(shared_ids)} id(s) with the final corpus, e.g. {shared_ids[0]!r}",
            where,
            "Keep tuning data separate from the final comparison corpus.",
        )
    final_texts = {normalise_text(r.text): r.id for r in final}
    for record in tuning:
        other = final_texts.get(normalise_text(record.text))
        if other is not None:
            raise UserError(
                f"tuning text {record.id!r} is the same text as final input {other!r}",
                where,
                "Keep tuning data separate from the final comparison corpus.",
            )


def token_lengths(model_dir: Path, texts: list[str]) -> list[int]:
    """Token counts (special tokens included, no truncation) with the model's own tokenizer.

    Uses the ``tokenizers`` library on ``tokenizer.json``: no torch needed on the host.
    """
    from tokenizers import Tokenizer

    path = Path(model_dir) / "tokenizer.json"
    fix = "Save a fast tokenizer with the checkpoint (tokenizer.save_pretrained(DIR))."
    if not path.exists() and not path.is_symlink():
        raise UserError("the model directory has no tokenizer.json", str(model_dir), fix)
    text = read_text(path, "the model's tokenizer.json", max_bytes=MAX_TOKENIZER_BYTES, fix=fix)
    try:
        tokenizer = Tokenizer.from_str(text)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return [len(encoding.ids) for encoding in tokenizer.encode_batch(texts)]
    except Exception as exc:  # the tokenizers library raises a bare Exception on a malformed file
        raise UserError(f"the model's tokenizer.json cannot be used: {str(exc)[:160]}", str(path), fix) from None
