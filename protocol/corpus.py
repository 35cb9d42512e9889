"""Corpora: reading JSONL/CSV with stable ids, fingerprints, token lengths."""

from __future__ import annotations

import csv
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.fingerprint import sha256_bytes

MAX_ID_CHARS = 200


@dataclass(frozen=True)
class Record:
    id: str
    text: str
    label: str


def read_corpus(path: Path) -> tuple[Record, ...]:
    """Read a corpus (``.jsonl`` or ``.csv`` with ``id``, ``text``, ``label``).

    Refuses empty corpora, duplicate or malformed ids, empty texts and missing labels:
    every input must keep one stable identity for the whole campaign.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError("corpus file not found", str(path), "Check [corpus] path in the study.")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = list(_read_jsonl(path))
    elif suffix == ".csv":
        rows = list(_read_csv(path))
    else:
        raise UserError(f"unsupported corpus format {suffix!r}", str(path), "Use .jsonl or .csv with id, text, label.")
    if not rows:
        raise UserError("the corpus is empty", str(path), "A corpus needs at least one input.")
    seen: dict[str, int] = {}
    records = []
    for line_no, data in rows:
        where = f"{path}, line {line_no}"
        record = _record(data, where)
        if record.id in seen:
            raise UserError(
                f"duplicate id {record.id!r} (first on line {seen[record.id]})",
                where,
                "Every input needs a unique, stable id.",
            )
        seen[record.id] = line_no
        records.append(record)
    return tuple(records)


def _read_jsonl(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"not valid JSON: {exc.msg}", f"{path}, line {line_no}") from None
            yield line_no, data


def _read_csv(path: Path) -> Any:
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"id", "text", "label"} - set(reader.fieldnames or [])
        if missing:
            raise UserError(f"CSV header lacks {sorted(missing)}", str(path), "The header must name id, text, label.")
        for data in reader:
            yield reader.line_num, data


def _record(data: Any, where: str) -> Record:
    if not isinstance(data, dict):
        raise UserError("each line must be a JSON object", where)
    for key in ("id", "text", "label"):
        if key not in data:
            raise UserError(f"missing field {key!r}", where, "Each input needs id, text and label.")
    ident, text, label = data["id"], data["text"], data["label"]
    if isinstance(ident, int) and not isinstance(ident, bool):
        ident = str(ident)
    if not isinstance(ident, str) or not ident or len(ident) > MAX_ID_CHARS or not ident.isprintable():
        raise UserError(f"invalid id {ident!r}", where, f"Ids are printable strings of 1 to {MAX_ID_CHARS} chars.")
    if ident != ident.strip():
        raise UserError(f"id {ident!r} has surrounding spaces", where, "Strip ids so they stay stable.")
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"empty or non-text 'text' for id {ident!r}", where)
    if not isinstance(label, str) or not label:
        raise UserError(f"empty or non-string 'label' for id {ident!r}", where)
    return Record(id=ident, text=text, label=label)


def content_fingerprint(records: tuple[Record, ...]) -> str:
    """sha256 of the canonical content (one sorted JSON object per line, in corpus order).

    Equal for the same inputs whether they came from JSONL or CSV.
    """
    lines = (
        json.dumps({"id": r.id, "label": r.label, "text": r.text}, sort_keys=True, ensure_ascii=False)
        for r in records
    )
    return sha256_bytes(("\n".join(lines) + "\n").encode("utf-8"))


def normalise_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def check_disjoint(final: tuple[Record, ...], tuning: tuple[Record, ...], where: str) -> None:
    """Tuning data must share neither ids nor (normalised) texts with the final corpus."""
    final_ids = {r.id for r in final}
    shared_ids = sorted(final_ids & {r.id for r in tuning})
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
    if not path.is_file():
        raise UserError(
            "the model directory has no tokenizer.json",
            str(model_dir),
            "Save a fast tokenizer with the checkpoint (tokenizer.save_pretrained(DIR)).",
        )
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return [len(encoding.ids) for encoding in tokenizer.encode_batch(texts)]
