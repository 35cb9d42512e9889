"""A provider catalog in SkyPilot's format (``vms.csv``), read as a stream and checked row by row.

SkyPilot keeps one CSV per provider: ``InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, Price,
Region, GpuInfo, SpotPrice`` (any order, read by name; ``AvailabilityZone`` optional). ``Price`` and
``SpotPrice`` are USD per hour for the whole instance. :func:`read_provider` streams the file (never held whole:
memory grows with the GPU rows kept, at most :data:`MAX_KEPT_ROWS`, never with the file's size) and returns the
GPU offers of one provider, each one instance type in one region:

- a row that is not CSV, has the wrong number of fields, a name with a formula, markup or control character, a
  price that is negative, NaN, zero, not a number or above :data:`MAX_USD_PER_CARD_HOUR` per card, or an
  accelerator count that is not a positive number: refused, naming the file and the line;
- the same instance type, region (and zone) twice with two prices: refused, naming both lines; twice with the
  same prices: the repeat is dropped and counted;
- CPU-only rows, rows without an on-demand price and fractional GPU shares (a count of 0.5 is not a card) are
  skipped and counted by reason;
- an empty ``SpotPrice`` stays empty (``None``), never zero; zones of one region with the same prices become
  one region, zones with different prices stay apart as ``REGION/ZONE``.

The card's memory is read from the row's ``GpuInfo`` (``'SizeInMiB': N``, never evaluated), else from SkyPilot's
``common/metadata.csv`` when given; else it is empty. The isocost catalog is written from these offers by
:mod:`protocol.costing.market_import`.

Example::

    provider = read_provider(Path("catalogs/v7/lambda/vms.csv"), "lambda")
    len(provider.offers), provider.skipped["CPU only"]
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import BinaryIO

from protocol.errors import UserError
from protocol.io.names import BIDI_CONTROLS, unsafe_character
from protocol.io.safe_read import open_binary

REQUIRED_COLUMNS: tuple[str, ...] = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
                                     "Price", "Region", "GpuInfo", "SpotPrice")
ZONE_COLUMN = "AvailabilityZone"
#: The most dollars one card may cost per hour: a price above is a typo (10^30), not an offer.
MAX_USD_PER_CARD_HOUR = Decimal(1000)
#: The most cards one instance may hold.
MAX_CARDS_PER_INSTANCE = 64
#: The most GPU rows kept from one file; a larger one is refused (the file itself may be any size: it is streamed).
MAX_KEPT_ROWS = 200_000
#: The longest field read (a GpuInfo is ~200 characters): a longer one is refused with its line.
MAX_FIELD_CHARS = 8192
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_ACCELERATOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+ -]{0,62}[A-Za-z0-9+]$|^[A-Za-z0-9]$")
_NUMBER = re.compile(r"^[0-9]{1,12}(\.[0-9]{1,12})?$")
_MIB = re.compile(r"'SizeInMiB':\s*([0-9]{1,9})")
#: Control characters (a tab aside) and direction overrides: what :func:`protocol.io.names.unsafe_character` refuses.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f" + "".join(sorted(BIDI_CONTROLS)) + "]")
_CHUNK = 1 << 16
_MAX_LINE_BYTES = 4 * MAX_FIELD_CHARS


@dataclass(frozen=True)
class SourceOffer:
    """One GPU instance type in one region of one provider, as the catalog prices it (USD per instance-hour).

    Example: ``SourceOffer("gpu_1x_h100_pcie", "H100", 1, Decimal("2.49"), None, "us-east-1", 80, 17)``.
    """

    instance_type: str
    accelerator: str
    cards: int
    price_usd_per_hour: Decimal
    spot_usd_per_hour: Decimal | None
    region: str
    card_memory_gib: int | None
    line: int


@dataclass(frozen=True)
class ProviderCatalog:
    """The GPU offers of one provider's file, with its sha256 and what was skipped, by reason.

    Example: ``ProviderCatalog("lambda", "lambda/vms.csv", "6db1…", offers, {"CPU only": 23}, 0, ())``.
    """

    provider: str
    path: str
    sha256: str
    offers: tuple[SourceOffer, ...]
    skipped: Mapping[str, int]
    repeated_rows: int
    notes: tuple[str, ...] = field(default=())


def read_metadata(path: Path) -> dict[str, int]:
    """SkyPilot's ``common/metadata.csv`` (``GPU, MemoryGB, Manufacturer``): accelerator name → memory in GB.

    Example: ``read_metadata(Path("catalogs/v7/common/metadata.csv"))["H100"] == 80``.
    """
    memory: dict[str, int] = {}
    rows = _rows(path, "SkyPilot accelerator metadata")
    header_line, header = next(rows, (1, []))
    columns = _columns(header, ("GPU", "MemoryGB"), f"{path}:{header_line}", "SkyPilot accelerator metadata")
    for line, row in rows:
        cells = _cells(row, columns, f"{path}:{line}")
        name, text = cells["GPU"].strip(), cells["MemoryGB"].strip()
        if not _ACCELERATOR.match(name) or not text.isdigit() or not 0 < int(text) < 100_000:
            raise UserError(f"malformed metadata row (GPU {name[:40]!a}, MemoryGB {text[:20]!a})", f"{path}:{line}",
                            "Each row names a GPU and its memory in whole GB.")
        memory[name] = int(text)
    return memory


def file_sha256(path: Path) -> str:
    """The file's sha256 (read in chunks). Example: ``file_sha256(p) == "6db15100…"``."""
    digest = hashlib.sha256()
    with open_binary(path, "SkyPilot catalog") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_provider(path: Path, provider: str, metadata: Mapping[str, int] | None = None) -> ProviderCatalog:
    """Stream one provider's ``vms.csv`` into its GPU offers; every malformed row refused with file and line."""
    sha = file_sha256(path)
    rows = _rows(path, "SkyPilot catalog")
    first = next(rows, None)
    if first is None:
        raise UserError("the SkyPilot catalog is empty", str(path),
                        f"A SkyPilot vms.csv starts with its header: {', '.join(REQUIRED_COLUMNS)}.")
    columns = _columns(first[1], REQUIRED_COLUMNS, f"{path}:{first[0]}")
    state = _ReadState()
    for line, row in rows:
        _take_row(_cells(row, columns, f"{path}:{line}"), line, f"{path}:{line}", state, metadata or {})
    if state.rows == 0:
        raise UserError("the SkyPilot catalog has a header but no rows", str(path),
                        "Import a catalog with at least one instance type.")
    return ProviderCatalog(provider=provider, path=str(path), sha256=sha, offers=tuple(state.merged()),
                           skipped=dict(state.skipped), repeated_rows=state.repeated, notes=tuple(state.notes()))


@dataclass
class _ReadState:
    rows: int = 0
    repeated: int = 0
    spot_above: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    kept: dict[tuple[str, str, str], tuple[SourceOffer, str]] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def notes(self) -> list[str]:
        return [f"{self.spot_above} row(s) price spot above on-demand: kept as published"] if self.spot_above else []

    def merged(self) -> list[SourceOffer]:
        """Zones of one region with the same prices as one region row; zones that differ stay apart."""
        by_region: dict[tuple[str, str], list[tuple[SourceOffer, str]]] = {}
        for (instance, region, _zone), item in self.kept.items():
            by_region.setdefault((instance, region), []).append(item)
        merged = []
        for items in by_region.values():
            prices = {(o.price_usd_per_hour, o.spot_usd_per_hour) for o, _ in items}
            if len(prices) == 1:
                merged.append(min((o for o, _ in items), key=lambda o: o.line))
            else:
                merged += [_with_region(o, f"{o.region}/{zone}") for o, zone in items]
        return sorted(merged, key=lambda o: o.line)


def _with_region(offer: SourceOffer, region: str) -> SourceOffer:
    return SourceOffer(offer.instance_type, offer.accelerator, offer.cards, offer.price_usd_per_hour,
                       offer.spot_usd_per_hour, region, offer.card_memory_gib, offer.line)


def _take_row(cells: dict[str, str], line: int, where: str, state: _ReadState, metadata: Mapping[str, int]) -> None:
    """Check one row; keep it, count it as skipped, or refuse it."""
    state.rows += 1
    if _UNSAFE.search("".join(cells.values())):  # one C-level scan per row; the column named only when one is found
        for column, text in cells.items():
            bad = unsafe_character(text)
            if bad is not None:
                raise UserError(f"column {column} holds the control character {bad!a}", where,
                                "A catalog cell holds no control character: fix the row or the export.")
    accelerator, count_text = cells["AcceleratorName"].strip(), cells["AcceleratorCount"].strip()
    if not accelerator and not count_text:
        state.skip("CPU only (no accelerator)")
        return
    instance = _name(cells["InstanceType"], "InstanceType", where)
    region = _name(cells["Region"], "Region", where)
    zone = _name(cells[ZONE_COLUMN], ZONE_COLUMN, where) if cells.get(ZONE_COLUMN, "").strip() else ""
    if not _ACCELERATOR.match(accelerator):
        raise UserError(f"AcceleratorName {accelerator[:60]!a} is not a plain name", where,
                        "Letters, digits, spaces, '.', '_', '+' and '-' only: no formula, markup or control character.")
    cards = _count(count_text, where)
    if cards is None:
        state.skip("fractional GPU share (not a whole card)")
        return
    if not cells["Price"].strip():
        state.skip("no on-demand price")
        return
    price = _price(cells["Price"], "Price", cards, where)
    spot = _price(cells["SpotPrice"], "SpotPrice", cards, where) if cells["SpotPrice"].strip() else None
    state.spot_above += spot is not None and spot > price
    offer = SourceOffer(instance, accelerator, cards, price, spot, region, _memory(cells, accelerator, metadata), line)
    _keep(offer, zone, where, state)


def _keep(offer: SourceOffer, zone: str, where: str, state: _ReadState) -> None:
    key = (offer.instance_type, offer.region, zone)
    earlier = state.kept.get(key)
    if earlier is None:
        if len(state.kept) >= MAX_KEPT_ROWS:
            raise UserError(f"more than {MAX_KEPT_ROWS:,} GPU rows in one file", where,
                            "Split the catalog by provider; isocost keeps at most that many GPU offers per file.")
        state.kept[key] = (offer, zone)
        return
    first = earlier[0]
    if (first.price_usd_per_hour, first.spot_usd_per_hour, first.cards) == (
            offer.price_usd_per_hour, offer.spot_usd_per_hour, offer.cards):
        state.repeated += 1
        return
    place = f"region {offer.region}" + (f" zone {zone}" if zone else "")
    raise UserError(
        f"{offer.instance_type} in {place} is listed twice with two prices: line {first.line} "
        f"({first.price_usd_per_hour} USD/h, spot {first.spot_usd_per_hour or 'none'}) and line {offer.line} "
        f"({offer.price_usd_per_hour} USD/h, spot {offer.spot_usd_per_hour or 'none'})", where,
        "Keep one price per instance type and region: nothing is picked between two prices.")


def _name(text: str, column: str, where: str) -> str:
    name = text.strip()
    if not _NAME.match(name):
        raise UserError(f"{column} {name[:60]!a} is not a plain name", where,
                        "Letters, digits, '.', '_', '+' and '-' only, starting with a letter or digit: no formula "
                        "(=, +, -, @), markup or control character.")
    return name


def _count(text: str, where: str) -> int | None:
    """Cards per instance: a whole positive number; ``None`` for a fractional share below one card."""
    value = _decimal(text, "AcceleratorCount", where)
    if value <= 0 or value > MAX_CARDS_PER_INSTANCE:
        raise UserError(f"AcceleratorCount {text.strip()[:20]!a} is not 1 to {MAX_CARDS_PER_INSTANCE}", where,
                        "An instance holds a positive number of cards.")
    if value != value.to_integral_value():
        if value < 1:
            return None
        raise UserError(f"AcceleratorCount {text.strip()!a} is not a whole number of cards", where,
                        "The price per card is the instance price over a whole number of cards.")
    return int(value)


def _price(text: str, column: str, cards: int, where: str) -> Decimal:
    value = _decimal(text, column, where)
    if value <= 0:
        raise UserError(f"{column} {text.strip()!a} is not above zero", where, "A GPU instance has a positive price.")
    if value / cards > MAX_USD_PER_CARD_HOUR:
        raise UserError(f"{column} {text.strip()[:30]!a} is {value / cards:.2f} USD per card-hour, above the "
                        f"bound of {MAX_USD_PER_CARD_HOUR} USD", where,
                        "A price that high is a typo or a unit error (cents, per month): fix the row.")
    return value


def _decimal(text: str, column: str, where: str) -> Decimal:
    cleaned = text.strip()
    if not _NUMBER.match(cleaned):
        raise UserError(f"{column} {cleaned[:30]!a} is not a decimal number", where,
                        "Write a plain number, e.g. 2.49: no sign, NaN, infinity or exponent.")
    try:
        return Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the pattern admits only plain decimals
        raise UserError(f"{column} {cleaned!a} is not a decimal number", where) from None


def _memory(cells: Mapping[str, str], accelerator: str, metadata: Mapping[str, int]) -> int | None:
    """The card's memory in GiB: the row's GpuInfo (one card's SizeInMiB), else the metadata file, else None."""
    found = _MIB.search(cells["GpuInfo"])
    if found:
        return round(int(found.group(1)) / 1024)
    return metadata.get(accelerator)


def _columns(header: list[str], required: tuple[str, ...], where: str, what: str = "a SkyPilot catalog") \
        -> dict[str, int]:
    names = [cell.strip().lstrip("\ufeff") for cell in header]
    missing = [name for name in required if name not in names]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if missing or repeated:
        problem = f"lacks column(s) {', '.join(missing)}" if missing else f"repeats column(s) {', '.join(repeated)}"
        raise UserError(f"not {what}: the header {problem}", where,
                        f"A SkyPilot file names these columns on its first line: {', '.join(required)}.")
    return {name: names.index(name) for name in names}


def _cells(row: list[str], columns: Mapping[str, int], where: str) -> dict[str, str]:
    if len(row) != len(columns):
        raise UserError(f"the row has {len(row)} fields, the header {len(columns)}", where,
                        "Give every row the header's columns; quote a cell that holds a comma.")
    return {name: row[index] for name, index in columns.items()}


def _rows(path: Path, what: str) -> Iterator[tuple[int, list[str]]]:
    """The non-blank CSV rows with their line numbers, decoded and parsed as the bytes stream in."""
    handle = open_binary(path, what, "Check the path given to `isocost catalog import`.")
    decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
    reader = csv.reader(_lines(handle, decoder, path, what))
    limit = csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise UserError(f"not valid CSV: {exc}", f"{path}:{reader.line_num}",
                                "Export the catalog as plain CSV.") from None
            if any(cell.strip() for cell in row):
                yield reader.line_num, row
    finally:
        csv.field_size_limit(limit)
        handle.close()


def _lines(handle: BinaryIO, decoder: codecs.IncrementalDecoder, path: Path, what: str) -> Iterator[str]:
    """Lines of text (CRLF or LF) from a binary handle, each read with a bound; an invalid byte refused by line."""
    line = 1
    while raw := handle.readline(_MAX_LINE_BYTES + 1):
        if len(raw) > _MAX_LINE_BYTES:
            raise UserError(f"line longer than {_MAX_LINE_BYTES} bytes", f"{path}:{line}",
                            "A catalog row is one short line: this is not a SkyPilot catalog.")
        try:
            text = decoder.decode(raw)
        except UnicodeDecodeError as exc:
            raise UserError(f"not UTF-8 text ({exc.reason})", f"{path}:{line}", f"Save the {what} as UTF-8.") from None
        line += 1
        yield text
    try:
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:  # a file cut inside a character: its last line's
        raise UserError(f"not UTF-8 text ({exc.reason})", f"{path}:{max(line - 1, 1)}",
                        f"Save the {what} as UTF-8.") from None
