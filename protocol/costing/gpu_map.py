"""The declared, versioned GPU map: a card as the driver names it → the catalogs' accelerator names, memory checked.

A trial records its card as the driver names it (``NVIDIA H100 80GB HBM3``) with its memory; catalogs name cards
their own way (``H100``, ``H100-SXM``, ``A100-80GB-SXM``, and isocost's ``rtx-4090``). The shipped table
(``protocol/data/gpu-map-v1.csv``, :data:`MAP_VERSION`) says which is which, one row per card:

- ``card``: isocost's name for the card; ``memory_gib``: its memory (the measured memory must be within
  :data:`MEMORY_TOLERANCE` of it, and so must a catalog row's, when the catalog states one);
- ``driver_names``: the exact names the driver reports (``|`` between them; compared ignoring case and repeated
  spaces, never by similarity);
- ``catalog_names``: the accelerator names that are this card: ``NAME`` in any catalog, ``provider:NAME`` in one
  provider's rows only, ``provider:NAME:TEXT`` only on that provider's instance types that contain ``TEXT``
  (Lambda lists its PCIe and SXM5 H100 instances both as ``H100``).

A user file of the same columns (``--gpu-map FILE``) extends it: a row with a shipped card's name replaces it. A
driver name claimed by two cards is ambiguous and refused by name; a card the map does not know is named and
refused (never guessed).

Example::

    gpu_map = load_gpu_map()
    gpu_map.card_for_driver("NVIDIA H100 80GB HBM3", 85_520_809_984).card == "h100-sxm"
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from protocol.costing.plans import Plan
from protocol.errors import UserError
from protocol.io.names import check_gpu_name, check_plain_text
from protocol.io.safe_read import read_text

MAP_VERSION = 1
MAP_FILE = f"gpu-map-v{MAP_VERSION}.csv"
MAP_COLUMNS: tuple[str, ...] = ("card", "memory_gib", "driver_names", "catalog_names", "note")
#: A measured or listed memory matches the declared one when within this share of it (drivers report a little
#: less than the marketing size: an L4 "24 GB" reports 22.5 GiB).
MEMORY_TOLERANCE = 0.10
_TOKEN = re.compile(r"^(?:([a-z0-9][a-z0-9._-]*):)?([A-Za-z0-9][A-Za-z0-9._+-]*)(?::([A-Za-z0-9._+-]+))?$")
_MAX_MAP_BYTES = 1 << 20


@dataclass(frozen=True)
class CatalogName:
    """One accelerator name a card goes by: anywhere, in one provider, or on that provider's matching instances."""

    name: str
    provider: str | None = None
    instance_text: str | None = None

    def matches(self, plan: Plan) -> bool:
        """Is ``plan`` (a catalog row) this card? Plain plans match on their gpu key, market rows on provider too."""
        if self.provider is not None and (plan.offer is None or plan.offer.provider != self.provider):
            return False
        if self.instance_text is not None and (plan.offer is None
                                               or self.instance_text not in plan.offer.instance_type.lower()):
            return False
        return plan.gpu == self.name

    @property
    def text(self) -> str:
        """Example: ``"lambda:h100:sxm5"``."""
        return ":".join(part for part in (self.provider, self.name, self.instance_text) if part)


@dataclass(frozen=True)
class Card:
    """One row of the map. Example: ``Card("h100-sxm", 80, ("nvidia h100 80gb hbm3",), names, "", "gpu-map-v1")``."""

    card: str
    memory_gib: int
    driver_names: tuple[str, ...]
    catalog_names: tuple[CatalogName, ...]
    note: str
    origin: str

    def memory_matches(self, memory_gib: float) -> bool:
        """Example: an H100 reporting 79.6 GiB matches 80; an A100 of 40 GiB does not match 80."""
        return abs(memory_gib - self.memory_gib) <= MEMORY_TOLERANCE * self.memory_gib

    def offers(self, plan: Plan) -> bool:
        """Does the catalog row sell this card? Example: a Lambda ``gpu_1x_h100_sxm5`` row sells ``h100-sxm``."""
        return any(name.matches(plan) for name in self.catalog_names)


@dataclass(frozen=True)
class GpuMap:
    """The cards, the shipped map's version and the user files that extended it."""

    cards: tuple[Card, ...]
    version: int
    sources: tuple[str, ...]

    def card_named(self, name: str) -> Card | None:
        """A card by isocost's name. Example: ``gpu_map.card_named("rtx-4090").memory_gib == 24``."""
        return next((card for card in self.cards if card.card == name), None)

    def card_for_driver(self, driver_name: str, memory_bytes: int | None, where: str = "the trial's manifest") -> Card:
        """The one card the driver's name is, its memory checked; unknown, ambiguous or mismatched: refused by name."""
        key = _driver_key(driver_name)
        found = [card for card in self.cards if key in card.driver_names]
        shown = check_plain_text(driver_name, "the driver's GPU name", where, max_chars=200)
        if not found:
            raise UserError(f"the card {shown!r} is not in the GPU map (v{self.version})", where,
                            f"Add a row for it (columns {','.join(MAP_COLUMNS)}) to your own map and pass it with "
                            "--gpu-map FILE; isocost never guesses which catalog name a card goes by.")
        if len(found) > 1:
            raise UserError(f"the card {shown!r} is ambiguous in the GPU map: it is "
                            f"{' and '.join(f'{c.card} ({c.origin})' for c in found)}", where,
                            "Keep one row per driver name in your --gpu-map file.")
        card = found[0]
        if memory_bytes is not None and not card.memory_matches(memory_bytes / 2**30):
            raise UserError(f"the card {shown!r} reports {memory_bytes / 2**30:.1f} GiB, the GPU map's {card.card} "
                            f"has {card.memory_gib} GiB", where,
                            "A card of another memory size is another card: add a row for it with --gpu-map FILE.")
        return card

    def card_for_rental(self, gpu: str) -> Card:
        """The card a rental names (no GPU recorded by the trials): by card name, else by an unqualified catalog
        name held by exactly one card."""
        named = self.card_named(gpu)
        if named is not None:
            return named
        found = [c for c in self.cards if any(n.provider is None and n.name == gpu for n in c.catalog_names)]
        if len(found) == 1:
            return found[0]
        what = ("is ambiguous in the GPU map: " + " and ".join(c.card for c in found)) if found else \
            f"is not in the GPU map (v{self.version})"
        raise UserError(f"the rented GPU {gpu!r} {what}", "the campaign's rental",
                        "Name the card in your own map (--gpu-map FILE), or record the rental with a card of the map.")


def default_map_path() -> Path:
    """The shipped map. Example: ``default_map_path().name == "gpu-map-v1.csv"``."""
    return Path(__file__).resolve().parents[1] / "data" / MAP_FILE


def load_gpu_map(extra: list[Path] | tuple[Path, ...] = ()) -> GpuMap:
    """The shipped map, extended by each user file in turn (a row naming a known card replaces it)."""
    cards: dict[str, Card] = {}
    sources = []
    for path in (default_map_path(), *extra):
        origin = MAP_FILE if path == default_map_path() else str(path)
        sources.append(origin)
        for card in _read_map(path, origin):
            cards[card.card] = card
    return GpuMap(cards=tuple(cards.values()), version=MAP_VERSION, sources=tuple(sources))


def _read_map(path: Path, origin: str) -> list[Card]:
    text = read_text(path, "GPU map", max_bytes=_MAX_MAP_BYTES, fix="Check the path given with --gpu-map.")
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    if not rows or [cell.strip() for cell in rows[0][1]] != list(MAP_COLUMNS):
        raise UserError("not a GPU map: the header is wrong", f"{path}:1",
                        f"The first line must be exactly: {','.join(MAP_COLUMNS)}.")
    cards, seen = [], set()
    for line, row in rows[1:]:
        where = f"{path}:{line}"
        if len(row) != len(MAP_COLUMNS):
            raise UserError(f"the row has {len(row)} fields, the header {len(MAP_COLUMNS)}", where,
                            "Quote a cell that holds a comma.")
        card = _card(dict(zip(MAP_COLUMNS, (cell.strip() for cell in row), strict=True)), where, origin)
        if card.card in seen:
            raise UserError(f"the card {card.card} is named twice", where, "Keep one row per card.")
        seen.add(card.card)
        cards.append(card)
    return cards


def _card(cells: dict[str, str], where: str, origin: str) -> Card:
    name = check_gpu_name(cells["card"], f"{where}, column card")
    if not cells["memory_gib"].isdigit() or not 1 <= int(cells["memory_gib"]) <= 100_000:
        raise UserError(f"memory_gib {cells['memory_gib'][:20]!a} is not a whole number of GiB", where,
                        "Write the card's memory, e.g. 80.")
    drivers = tuple(_driver_key(check_plain_text(text, "a driver name", where, max_chars=200))
                    for text in cells["driver_names"].split("|") if text.strip())
    names = []
    for token in cells["catalog_names"].split():
        found = _TOKEN.match(token)
        if not found:
            raise UserError(f"catalog name {token[:60]!a} is not NAME, provider:NAME or provider:NAME:TEXT", where,
                            "Write e.g. H100-SXM, runpod:H100 or lambda:H100:sxm5.")
        names.append(CatalogName("-".join(found.group(2).lower().split()), found.group(1),
                                 found.group(3).lower() if found.group(3) else None))
    if not names:
        raise UserError(f"the card {name} has no catalog name", where, "Name at least one, e.g. H100-SXM.")
    check_plain_text(cells["note"], "the note", where, max_chars=300)
    return Card(name, int(cells["memory_gib"]), drivers, tuple(dict.fromkeys(names)), cells["note"], origin)


def _driver_key(name: str) -> str:
    return " ".join(name.split()).casefold()
