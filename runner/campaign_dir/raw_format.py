"""raw.csv's format: which one this isocost reads, what a row's chain digest is, and what a table's first row
chains to.

isocost 1.x reads raw formats 5 (1.0's: 1.0 kept the number it had, so that no number ever names two formats), 6
and 7 (1.1's: the variant's ``engine``, then its ``rate_qps``), and writes the current one
(:data:`~protocol.records.raw_columns.RAW_SCHEMA_VERSION`): a row's digest is the sha256 of the previous digest, a
newline, and the row's text as written up to its last comma (:func:`row_text`), so any sha256 tool checks it over
the file's bytes.

Every other format is refused with what to do, never read as another one (its rows would all look edited):
formats 1 to 4 (isocost 0.x before release: 1 and 2 without chain or seals, 3 and 4 chained by each row's cells as a
JSON list; a campaign.json that declares no format is a format-3 one) and any format above the current one (a
newer isocost's).

A table chains by the format its ``campaign.json`` declares (``raw_schema_version``), and its first row chains to
the sha256 of that campaign.json's frozen facts (:data:`ANCHOR_FIELDS`, the declared format among them, so a
changed one breaks row 1). A host's campaign of a multi-host run also seals the names of every host of that run
(campaign.json ``launcher.campaign_hosts``, :data:`SEALED_HOSTS_KEY`): an anchor fact only where it is written, so
every other campaign keeps the anchor it always had. :mod:`runner.campaign_dir.raw_table` reads and appends the rows.

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
from protocol.io.jsonio import loads_unique
from protocol.records.raw_columns import FORMAT_COLUMNS, RAW_COLUMNS, RAW_SCHEMA_VERSION

CHAIN_COLUMN = RAW_COLUMNS[-1]
#: The raw formats this isocost reads: 1.0's (5) and 1.1's (6, and 7 with rate_qps); it appends to the current one
#: only.
READABLE_FORMATS = tuple(FORMAT_COLUMNS)
#: The formats isocost 0.x wrote before the release (refused, naming the version and what to do).
PRE_RELEASE_FORMATS = (1, 2, 3, 4)
#: The header this isocost writes; and the header of each format it reads.
HEADER_LINE = ",".join(RAW_COLUMNS)
HEADER_LINES = {version: ",".join(columns) for version, columns in FORMAT_COLUMNS.items()}
#: The frozen facts of campaign.json the first row chains to (not paths or notes a later move may change).
ANCHOR_FIELDS = ("campaign_id", "created_at", "setup_started_at", "study_sha256", "corpus", "tuning", "model",
                 "warmup", "variants", "repetitions", "catalog", "raw_schema_version")
#: The launcher fact of campaign.json that lists, in a multi-host run, the names of all its hosts as at the start
#: (:mod:`runner.hosts.record` checks hosts.json against it); part of the anchor where it is written.
SEALED_HOSTS_KEY = "campaign_hosts"

#: What to do with a campaign in a pre-release raw format.
PRE_RELEASE_FIX = ("isocost 1.x reads raw table formats 5, 6 and {current} only. Re-run with isocost 0.x (the version "
                   "that started it{started_by}) to finish or read it, or start a new campaign: `isocost run STUDY "
                   "--out NEW_DIR`.")
_NEWER_FIX = (f"This isocost reads raw table format {RAW_SCHEMA_VERSION}. Read or finish this campaign with the "
              "isocost version that started it{started_by}, or run the study again into a new --out.")


def genesis(path: Path) -> str:
    """What the first row chains to: the frozen facts of the campaign.json beside the table ("" if none)."""
    return anchor(path)[0]


def anchor(path: Path) -> tuple[str, int]:
    """:func:`genesis`, and the raw format the rows chain by: the one campaign.json declares, the current one
    where there is no campaign.json. A declared format this isocost does not read is refused (UserError)."""
    where = path.parent / "campaign.json"
    try:
        description = loads_unique(where.read_bytes())
    except (OSError, ValueError, RecursionError):
        return "", RAW_SCHEMA_VERSION
    if not isinstance(description, dict):
        return "", RAW_SCHEMA_VERSION
    version = declared_format(description.get("raw_schema_version"), str(where), description.get("isocost_version"))
    facts = {key: description.get(key) for key in ANCHOR_FIELDS}
    launcher = description.get("launcher")
    if isinstance(launcher, dict) and SEALED_HOSTS_KEY in launcher:  # a multi-host run's host list, sealed
        facts[SEALED_HOSTS_KEY] = launcher[SEALED_HOSTS_KEY]
    return hashlib.sha256(json.dumps(facts, sort_keys=True, ensure_ascii=False).encode()).hexdigest(), version


def declared_format(declared: object, where: str, started_by: object = "") -> int:
    """The raw format a campaign.json's ``raw_schema_version`` declares; any format this isocost does not read is
    refused (UserError naming it, and ``started_by``: the campaign.json's ``isocost_version``): a pre-release one
    (None: format 3, which did not say) with :data:`PRE_RELEASE_FIX`."""
    if type(declared) is int and declared in READABLE_FORMATS:
        return declared
    started = f", {started_by} by its campaign.json" if started_by else ""
    if declared is None or (type(declared) is int and declared in PRE_RELEASE_FORMATS):
        named = "no raw table format (pre-release format 3)" if declared is None else f"raw table format {declared}"
        raise UserError(f"campaign.json declares {named}: a pre-release format (isocost 0.x) that isocost 1.x no "
                        "longer reads", where, PRE_RELEASE_FIX.format(current=RAW_SCHEMA_VERSION, started_by=started))
    newer = type(declared) is int and declared > RAW_SCHEMA_VERSION
    raise UserError(f"campaign.json declares raw table format {declared!r}, which this isocost does not read"
                    + (" (a newer isocost wrote it)" if newer else ""), where, _NEWER_FIX.format(
                        started_by=f" ({started_by}, by its campaign.json)" if started_by else ""))


def check_header(cells: list[str], where: str, version: int = RAW_SCHEMA_VERSION) -> tuple[str, ...]:
    """The header's columns when they are those of the format its campaign.json declares (``version``); else
    what it is, and what to do."""
    if tuple(cells) == FORMAT_COLUMNS.get(version):
        return FORMAT_COLUMNS[version]
    if tuple(cells) in FORMAT_COLUMNS.values():
        raise UserError(f"raw.csv's header is not that of raw table format {version}, which its campaign.json "
                        "declares", where, "Restore raw.csv (or campaign.json) from a backup or bundle.")
    fix = PRE_RELEASE_FIX.format(current=RAW_SCHEMA_VERSION, started_by="")
    if CHAIN_COLUMN not in cells:
        raise UserError(f"raw.csv has no {CHAIN_COLUMN} column: it was written before raw rows were chained (raw "
                        "table format 1, isocost 0.x)", where, fix)
    if "outputs_sha256" not in cells:
        raise UserError("raw.csv has no seal columns (outputs_sha256 …): it was written before trial files were "
                        "sealed (raw table format 2, isocost 0.x)", where, fix)
    if "queue_s" not in cells:
        raise UserError("raw.csv has no Slurm columns (queue_s …): it was written by isocost 0.x (raw table "
                        "format 3)", where, fix)
    raise UserError("raw.csv has unexpected columns", where, "It was written by another isocost version.")


#: A cell without these characters is written by JSON as itself in quotes, and by CSV without quotes.
PLAIN_CELL = re.compile(r'[\x00-\x1f"\\]')


def row_digest(previous: str, cells: Sequence[str]) -> str:
    """The chain digest of a row whose cells (without the digest column) are ``cells``: of :func:`row_text`."""
    return text_digest(previous, row_text(cells))


def row_text(cells: Sequence[str]) -> str:
    """``cells`` as raw.csv writes them on a row, without the line end (quoted by the csv module where a cell
    needs it)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue()[:-1]


def text_digest(previous: str, text: str) -> str:
    """The digest of a row whose hashed text is ``text``, chained to ``previous``."""
    return hashlib.sha256(f"{previous}\n{text}".encode()).hexdigest()
