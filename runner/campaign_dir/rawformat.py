"""raw.csv's formats: which ones this isocost reads, what a row's chain digest is in each, and what a table's
first row chains to.

- Format 5 (current): a row's digest is the sha256 of the previous digest, a newline, and the row's text as
  written up to its last comma (:func:`row_text`), so any sha256 tool checks it over the file's bytes.
- Formats 3 and 4: of the row's cells as a JSON list. Format 3 gained the Slurm block without a bump (a format-3
  table may lack it); format 4 names it.
- Formats 1 and 2 (no chain, no seals), and any format above the current one (a newer isocost's), are refused
  with what to do, never read as another format: their rows would all look edited.

A table chains by the format its ``campaign.json`` declares (``raw_schema_version``; absent: format 3, which did
not say), and its first row chains to the sha256 of that campaign.json's frozen facts (:data:`ANCHOR_FIELDS`, the
declared format among them, so a changed one breaks row 1). :mod:`runner.campaign_dir.rawtable` reads and
appends the rows.

Example::

    row_digest(genesis(Path("results/quick/raw.csv")), cells)   # the first row's chain_sha256
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path

from protocol.errors import UserError
from protocol.jsonio import loads_unique
from protocol.raw_columns import RAW_COLUMNS, RAW_SCHEMA_VERSION

CHAIN_COLUMN = RAW_COLUMNS[-1]
#: The raw formats this isocost reads (and appends to, in their own format).
READABLE_FORMATS = tuple(range(3, RAW_SCHEMA_VERSION + 1))
#: The first raw format whose digests are of the row's text (:func:`row_digest`).
TEXT_CHAIN = 5
#: The Slurm block, appended within format 3 (format 4 names it): a format-3 table may lack it.
SLURM_COLUMNS = ("queue_s", "node", "job_id", "allocated_gpu")
#: The headers this isocost reads: the current one, and format 3's without the Slurm block (its rows are read
#: with those four cells empty; nothing is appended to it).
READABLE_HEADERS: dict[tuple[str, ...], int] = {
    RAW_COLUMNS: RAW_SCHEMA_VERSION, tuple(c for c in RAW_COLUMNS if c not in SLURM_COLUMNS): 3}
HEADER_LINES = {",".join(columns): columns for columns in READABLE_HEADERS}
#: The frozen facts of campaign.json the first row chains to (not paths or notes a later move may change).
ANCHOR_FIELDS = ("campaign_id", "created_at", "setup_started_at", "study_sha256", "corpus", "tuning", "model",
                 "warmup", "variants", "repetitions", "catalog", "raw_schema_version")

_OTHER_FORMAT_FIX = (f"This isocost reads raw table formats {READABLE_FORMATS[0]} to {READABLE_FORMATS[-1]}. Read "
                     "or finish this campaign with the isocost version that started it{started_by}, or run the "
                     "study again into a new --out.")


def genesis(path: Path) -> str:
    """What the first row chains to: the frozen facts of the campaign.json beside the table ("" if none)."""
    return anchor(path)[0]


def anchor(path: Path) -> tuple[str, int]:
    """:func:`genesis`, and the raw format the rows chain by: the one campaign.json declares (none: format 3,
    which did not say), the current one where there is no campaign.json. A declared format this isocost does not
    read is refused (UserError)."""
    where = path.parent / "campaign.json"
    try:
        description = loads_unique(where.read_bytes())
    except (OSError, ValueError, RecursionError):
        return "", RAW_SCHEMA_VERSION
    if not isinstance(description, dict):
        return "", RAW_SCHEMA_VERSION
    version = declared_format(description.get("raw_schema_version"), str(where), description.get("isocost_version"))
    facts = {key: description.get(key) for key in ANCHOR_FIELDS}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, ensure_ascii=False).encode()).hexdigest(), version


def declared_format(declared: object, where: str, started_by: object = "") -> int:
    """The raw format a campaign.json's ``raw_schema_version`` declares (None: format 3, which did not say); a
    format this isocost does not read is refused (UserError naming it, and ``started_by``: the campaign.json's
    ``isocost_version``)."""
    if declared is None:
        return 3
    if type(declared) is int and declared in READABLE_FORMATS:
        return declared
    newer = type(declared) is int and declared > RAW_SCHEMA_VERSION
    raise UserError(f"campaign.json declares raw table format {declared!r}, which this isocost does not read"
                    + (" (a newer isocost wrote it)" if newer else ""), where, _OTHER_FORMAT_FIX.format(
                        started_by=f" ({started_by}, by its campaign.json)" if started_by else ""))


def check_header(cells: list[str], where: str) -> tuple[str, ...]:
    """The header's columns when this isocost reads them (:data:`READABLE_HEADERS`); else what it is, and what
    to do."""
    if tuple(cells) in READABLE_HEADERS:
        return tuple(cells)
    if CHAIN_COLUMN not in cells:
        raise UserError(
            f"raw.csv has no {CHAIN_COLUMN} column: it was written before raw rows were chained (raw table "
            "format 1)", where, _OTHER_FORMAT_FIX.format(started_by=""))
    if "outputs_sha256" not in cells:
        raise UserError(
            "raw.csv has no seal columns (outputs_sha256 …): it was written before trial files were sealed "
            "(raw table format 2)", where, _OTHER_FORMAT_FIX.format(started_by=""))
    raise UserError("raw.csv has unexpected columns", where, "It was written by another isocost version.")


#: A cell without these characters is written by JSON as itself in quotes, and by CSV without quotes.
PLAIN_CELL = re.compile(r'[\x00-\x1f"\\]')
_canonical = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def row_digest(previous: str, cells: Sequence[str], version: int = RAW_SCHEMA_VERSION) -> str:
    """The chain digest of a row whose cells (without the digest column) are ``cells``, in raw format
    ``version``: from 5 on, of :func:`row_text`; formats 3 and 4, of the cells as a JSON list."""
    if version >= TEXT_CHAIN:
        return text_digest(previous, row_text(cells))
    if PLAIN_CELL.search("".join(cells)) is None:  # the common row: its JSON list is its cells in quotes
        canonical = '["' + '","'.join(cells) + '"]' if cells else "[]"
    else:
        canonical = _canonical(list(cells))
    return text_digest(previous, canonical)


def row_text(cells: Sequence[str]) -> str:
    """``cells`` as raw.csv writes them on a row, without the line end (quoted by the csv module where a cell
    needs it)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue()[:-1]


def text_digest(previous: str, text: str) -> str:
    """The digest of a row whose hashed text is ``text``, chained to ``previous``."""
    return hashlib.sha256(f"{previous}\n{text}".encode()).hexdigest()
