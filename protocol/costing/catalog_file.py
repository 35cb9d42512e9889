"""The dated plan catalog as a CSV file: read, validate, and refuse with the line that is wrong.

One row per plan: ``gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source``,
optionally ``billing,minimum_s,increment_s`` (a catalog without them holds flat
plans only, like the shipped snapshot), and the market columns an imported catalog adds
(``provider,region,instance_type,accelerator,card_memory_gib,spot_usd_per_lot``, read by
:mod:`protocol.costing.market_columns`; ``isocost catalog import`` writes them). Every cell is checked before it is
converted (a bound on its length, then its form), one currency per catalog,
one row per (gpu, billing, plan_days); the error names the file, the line and
the column, and says how to fix it. A GPU name is a plain name and a source
holds no control character (:mod:`protocol.io.names`): both reach CSV, Markdown,
HTML and terminals. The plans themselves and their arithmetic are in
:mod:`protocol.costing.plans`.

Example: ``load_catalog(default_catalog_path()).gpus == ("b200", "rtx-4090")``.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import date
from decimal import Decimal
from pathlib import Path

from protocol.costing.market_columns import with_offers
from protocol.costing.plans import (
    BILLING_FLAT,
    BILLING_HOURLY,
    BILLINGS,
    CATALOG_CURRENCY,
    METERED,
    PLAN_LENGTHS_DAYS,
    Catalog,
    Plan,
    gpu_key,
    join_days,
)
from protocol.errors import UserError
from protocol.io.names import check_gpu_name, check_plain_text
from protocol.io.safe_read import check_encodable, read_text

CATALOG_COLUMNS: tuple[str, ...] = ("gpu", "cards_per_lot", "plan_days", "price_usd_per_lot", "currency",
                                    "catalog_date", "source")
#: Optional columns (an old catalog without them holds flat plans only).
BILLING_COLUMNS: tuple[str, ...] = ("billing", "minimum_s", "increment_s")
#: The columns of an imported market catalog (`isocost catalog import`): where each row is sold, the card's
#: memory and the spot price (empty: no spot offer; a spot row becomes a second, interruptible plan).
MARKET_COLUMNS: tuple[str, ...] = ("provider", "region", "instance_type", "accelerator", "card_memory_gib",
                                   "spot_usd_per_lot")
OPTIONAL_COLUMNS: tuple[str, ...] = BILLING_COLUMNS + MARKET_COLUMNS
#: A catalog is a few hundred rows; a larger file is refused before it is parsed.
MAX_CATALOG_BYTES = 16 * 2**20
#: A source names a catalog and its edition: one line.
MAX_SOURCE_CHARS = 500

#: Longest text accepted in each numeric column (12-digit prices, 6-digit counts, 8-digit seconds): far above any
#: real plan, and checked before int() or Decimal() sees the text.
_MAX_DIGITS = {"cards_per_lot": 6, "plan_days": 6, "price_usd_per_lot": 16, "minimum_s": 8, "increment_s": 8,
               "spot_usd_per_lot": 16, "card_memory_gib": 6}
_DECIMAL_RE = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_INT_RE = re.compile(r"^[0-9]+$")
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def load_catalog(path: str | Path) -> Catalog:
    """Read and validate a dated catalog CSV.

    Example: ``load_catalog("protocol/data/catalog-2026-09-24.csv").gpus == ("b200", "rtx-4090")``.
    """
    path = Path(path)
    numbered = _read_rows(path)
    header_line, header = numbered[0]
    columns = [cell.strip() for cell in header]
    _check_header(columns, f"{path}:{header_line}")

    plans: list[Plan] = []
    first_line: dict[tuple[object, ...], int] = {}
    first_currency: tuple[str, int] | None = None
    for line, row in numbered[1:]:
        where = f"{path}:{line}"
        if len(row) != len(columns):
            raise UserError(f"row has {len(row)} fields, the header has {len(columns)}", where,
                            "Give every row the header's columns; quote a source text that contains commas.")
        cells = {name: cell.strip() for name, cell in zip(columns, row, strict=True)}
        first_currency = first_currency or (cells["currency"], line)
        _check_same_currency(cells["currency"], line, first_currency, where)
        for plan in with_offers(_parse_row(cells, where), cells, where):
            _check_unique(plan, line, first_line, path)
            plans.append(plan)
    if not plans:
        raise UserError("catalog has a header but no plans", str(path), "Add one row per (gpu, plan_days).")
    return Catalog(path=str(path), plans=tuple(plans))


def _read_rows(path: Path) -> list[tuple[int, list[str]]]:
    """The non-blank CSV rows with their line numbers; at least the header."""
    # A regular UTF-8 file (BOM accepted), never a FIFO or a device; invalid bytes named by line.
    text = read_text(path, "catalog file", max_bytes=MAX_CATALOG_BYTES,
                     fix="Check the path given (--catalog, --market, or the study's [costing] catalog).")
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        numbered = [(reader.line_num, row) for row in reader if any(c.strip() for c in row)]
    except csv.Error as exc:
        raise UserError(f"catalog is not valid CSV: {exc}", str(path), "Export the catalog as plain CSV.") from None
    for line, row in numbered:
        for cell in row:
            check_encodable(cell, "a catalog cell", f"{path}:{line}")
    if not numbered:
        raise UserError("catalog is empty", str(path),
                        f"The first line must name the columns: {','.join(CATALOG_COLUMNS)}.")
    return numbered


def _check_header(columns: list[str], where: str) -> None:
    missing = [name for name in CATALOG_COLUMNS if name not in columns]
    unknown = [name for name in columns if name not in CATALOG_COLUMNS + OPTIONAL_COLUMNS]
    repeated = sorted({name for name in columns if columns.count(name) > 1})
    expected = (f"The header must be exactly: {','.join(CATALOG_COLUMNS)} (optionally also "
                f"{','.join(OPTIONAL_COLUMNS)}).")
    if missing:
        raise UserError(f"catalog lacks column(s) {', '.join(missing)}", where, expected)
    if unknown:
        raise UserError(f"catalog has unknown column(s) {', '.join(unknown)}", where, expected)
    if repeated:
        raise UserError(f"catalog repeats column(s) {', '.join(repeated)}", where, expected)


def _check_same_currency(currency: str, line: int, first: tuple[str, int], where: str) -> None:
    if currency != first[0]:
        raise UserError(f"catalog mixes currencies: {first[0]!r} on line {first[1]}, {currency!r} on line {line}",
                        f"{where}, column currency",
                        "One catalog holds one currency; convert with a dated rate recorded elsewhere.")


def _check_unique(plan: Plan, line: int, first_line: dict[tuple[object, ...], int], path: Path) -> None:
    """Refuse a second row for one (gpu, billing, plan_days[, provider, region, instance, spot]); remember the first."""
    key: tuple[object, ...] = (plan.gpu, plan.billing, plan.plan_days)
    if plan.offer is not None:
        key += (plan.offer.provider, plan.offer.region, plan.offer.instance_type, plan.offer.interruptible)
    if key in first_line:
        billing = "" if plan.billing == BILLING_FLAT else f" ({plan.billing})"
        if plan.offer is not None:
            billing += f" at {plan.offer.provider} {plan.offer.instance_type} in {plan.offer.region}"
        raise UserError(
            f"duplicate plan {plan.gpu} for {plan.length_text}{billing} on lines "
            f"{first_line[key]} and {line}",
            str(path),
            "Keep one price per (gpu, billing, plan_days); a catalog never holds two rows for one plan.",
        )
    first_line[key] = line


def _parse_row(cells: dict[str, str], where: str) -> Plan:
    """One data row as a :class:`Plan`, each column checked in turn."""
    if not gpu_key(cells["gpu"]):
        raise UserError("gpu is empty", where, "Name the GPU type, e.g. rtx-4090.")
    # A plain name: it becomes a configuration id in CSV, Markdown, HTML and terminal output.
    gpu = check_gpu_name(cells["gpu"], f"{where}, column gpu")
    for column, digits in _MAX_DIGITS.items():  # before int() or Decimal() sees them: a bound, not a traceback
        if len(cells.get(column, "")) > digits:
            raise UserError(f"{column} has more than {digits} characters ({len(cells[column])})", where,
                            f"A catalog {column} is a short number.")
    cards_per_lot = _cards_per_lot(cells["cards_per_lot"], where)
    billing = cells.get("billing", "") or BILLING_FLAT
    if billing not in BILLINGS:
        raise UserError(f"unknown billing {billing!r}", f"{where}, column billing",
                        f"Use one of: {', '.join(BILLINGS)}.")
    minimum_s, increment_s = _metered_terms(cells, billing, gpu, where)
    plan_days = _plan_days(cells["plan_days"], billing, where)
    price = _price(cells["price_usd_per_lot"], where)
    _check_currency(cells["currency"], where)
    catalog_date = _catalog_date(cells["catalog_date"], where)
    if not cells["source"]:
        raise UserError("source is empty", where, "Say where the price comes from (catalog name and edition).")
    check_plain_text(cells["source"], "the source", f"{where}, column source", max_chars=MAX_SOURCE_CHARS)
    return Plan(gpu=gpu, cards_per_lot=cards_per_lot, plan_days=plan_days, price_usd_per_lot=price,
                catalog_date=catalog_date, source=cells["source"], billing=billing, minimum_s=minimum_s,
                increment_s=increment_s)


def _cards_per_lot(text: str, where: str) -> int:
    if not _INT_RE.match(text) or int(text) < 1:
        raise UserError(f"cards_per_lot must be a whole number of at least 1, got {text!r}", where,
                        "Give the cards one lot holds (a B200 lot holds 2).")
    return int(text)


def _plan_days(text: str, billing: str, where: str) -> int:
    """The plan length in days; 0 on a metered row that leaves it empty (no fixed length)."""
    if billing in METERED and text == "":
        return 0
    if not _INT_RE.match(text) or int(text) < 1:
        raise UserError(f"plan_days must be a positive whole number, got {text!r}", where,
                        f"Give the plan length in days, e.g. {join_days(PLAN_LENGTHS_DAYS)}.")
    return int(text)


def _price(text: str, where: str) -> Decimal:
    if text.startswith("-"):
        raise UserError(f"negative price {text!r}", where, "A plan price per lot is 0 or more.")
    if not _DECIMAL_RE.match(text):
        raise UserError(f"price_usd_per_lot is not a decimal number: {text!r}", where,
                        "Write the price per lot with a dot and no thousands separator, e.g. 2071.00.")
    return Decimal(text)


def _check_currency(currency: str, where: str) -> None:
    if currency != CATALOG_CURRENCY:
        raise UserError(
            f"unknown currency {currency!r}",
            where,
            f"Only {CATALOG_CURRENCY} prices are supported; convert with a dated rate "
            "recorded elsewhere.",
        )


def _catalog_date(text: str, where: str) -> date:
    if not text:
        raise UserError("catalog_date is missing", where, "Every price needs its catalog date (YYYY-MM-DD).")
    try:
        if not _DATE_RE.match(text):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f"catalog_date is not a valid date: {text!r}", where,
                        "Write it as YYYY-MM-DD, e.g. 2026-09-24.") from None


def _metered_terms(cells: dict[str, str], billing: str, gpu: str, where: str) -> tuple[int | None, int | None]:
    """``(minimum_s, increment_s)`` of an hourly or per-second row; ``(None, None)`` otherwise."""
    minimum_text, increment_text = cells.get("minimum_s", ""), cells.get("increment_s", "")
    if billing not in METERED:
        if minimum_text or increment_text:
            raise UserError(
                f"minimum_s/increment_s given on a {billing} row", f"{where}, column minimum_s",
                "Only hourly and per-second rows have a minimum charge and a billing increment; leave them empty.",
            )
        return None, None
    if not minimum_text:
        raise UserError(f"{billing} row for {gpu} has no minimum charge", f"{where}, column minimum_s",
                        "Give the minimum billed time in seconds from the offer (e.g. 60); nothing is guessed.")
    default_increment = "3600" if billing == BILLING_HOURLY else "1"
    increment_text = increment_text or default_increment
    for name, text in (("minimum_s", minimum_text), ("increment_s", increment_text)):
        if not _INT_RE.match(text) or (name == "increment_s" and int(text) < 1):
            raise UserError(
                f"{name} must be a whole number of seconds{' of at least 1' if name == 'increment_s' else ''}, "
                f"got {text!r}", f"{where}, column {name}", "Write whole seconds, e.g. 60.",
            )
    return int(minimum_text), int(increment_text)
