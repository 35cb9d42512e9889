"""``isocost catalog import``: SkyPilot provider catalogs → one dated, sourced isocost catalog (market rows).

:func:`import_catalogs` finds the providers (a ``vms.csv`` file, a provider folder holding one, or SkyPilot's
``catalogs/vN`` folder of provider folders; ``common/metadata.csv`` beside them gives the cards' memory), reads
each as a stream (:func:`protocol.costing.skypilot.read_provider`) and writes the isocost catalog: the columns of
:mod:`protocol.costing.catalog_file` plus the market columns, one row per provider × instance type × region. Every
row is dated with the day the snapshot was taken (given, never "today") and sourced: provider, file, its sha256,
the upstream commit when known, the line. The prices are the catalog's per instance-hour; the billing increment
and minimum are declared (the catalogs do not state them): every started hour by default.

Example::

    report = import_catalogs(Path("catalogs/v7"), date(2026, 12, 3), Path("market.csv"),
                             commits={"lambda": "11580132…"})
    report.rows_written
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from protocol.costing.catalog_file import BILLING_COLUMNS, CATALOG_COLUMNS, MARKET_COLUMNS, load_catalog
from protocol.costing.plans import BILLING_HOURLY, BILLING_PER_SECOND, CATALOG_CURRENCY
from protocol.costing.skypilot import ProviderCatalog, read_metadata, read_provider
from protocol.errors import UserError
from protocol.io.csvio import csv_writer
from protocol.io.names import GPU_NAME, MAX_GPU_NAME_CHARS
from protocol.io.safe_read import file_kind
from protocol.io.safe_write import write_text_atomic

VMS_FILE = "vms.csv"
METADATA_FILE = Path("common") / "metadata.csv"
_COMMIT_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Billing:
    """How the imported prices are billed (the catalogs do not say): ``hourly`` every started hour by default.

    Example: ``Billing(BILLING_PER_SECOND, minimum_s=60, increment_s=1)``.
    """

    billing: str = BILLING_HOURLY
    minimum_s: int = 3600
    increment_s: int = 3600

    def __post_init__(self) -> None:
        if self.billing not in (BILLING_HOURLY, BILLING_PER_SECOND):
            raise UserError(f"unknown billing {self.billing!r}", "--billing", "Use hourly or per-second.")
        if not (0 <= self.minimum_s <= 86_400 and 1 <= self.increment_s <= 86_400):
            raise UserError(f"minimum {self.minimum_s} s / increment {self.increment_s} s out of bounds",
                            "--minimum-s/--increment-s",
                            "Give whole seconds: minimum 0 to 86400, increment 1 to 86400.")


@dataclass(frozen=True)
class ImportReport:
    """What an import read and wrote, per provider. Example: ``report.rows_written == 945``."""

    out: str
    catalog_date: date
    providers: tuple[ProviderCatalog, ...]
    rows_written: int
    plans: int


def find_providers(source: Path) -> list[tuple[str, Path]]:
    """``(provider, vms.csv)`` pairs under ``source``: a file (its folder names the provider), a provider folder,
    or a folder of provider folders. Example: ``find_providers(Path("catalogs/v7"))[0] == ("lambda", …)``."""
    if source.is_file():
        return [(source.parent.name or "provider", source)]
    if not source.is_dir():
        try:
            kind = file_kind(source.stat().st_mode)
        except OSError:
            kind = ""
        raise UserError(f"the catalog source is {kind}, not a file or a folder" if kind else
                        "the catalog source is not found", str(source),
                        "Name a SkyPilot vms.csv, a provider folder or a catalogs/vN folder.")
    if (source / VMS_FILE).is_file():
        return [(source.name, source / VMS_FILE)]
    found = sorted((child.name, child / VMS_FILE) for child in source.iterdir()
                   if child.is_dir() and not child.is_symlink() and (child / VMS_FILE).is_file())
    if not found:
        raise UserError("no provider catalog found", str(source),
                        f"Name a folder holding {VMS_FILE}, or folders of providers each holding one.")
    return found


def import_catalogs(source: Path, catalog_date: date, out: Path, *, commits: Mapping[str, str] | None = None,
                    providers: Sequence[str] = (), billing: Billing | None = None,
                    metadata: Path | None = None) -> ImportReport:
    """Read every provider under ``source`` (or only ``providers``) and write the dated isocost catalog ``out``."""
    commits = dict(commits or {})
    _check_out(out)
    found = find_providers(source)
    if providers:
        unknown = sorted(set(providers) - {name for name, _ in found})
        if unknown:
            raise UserError(f"provider(s) {', '.join(unknown)} not found", str(source),
                            f"Providers there: {', '.join(name for name, _ in found)}.")
        found = [(name, path) for name, path in found if name in providers]
    for name, commit in commits.items():
        if not (7 <= len(commit) <= 40 and set(commit) <= _COMMIT_CHARS):
            raise UserError(f"commit {commit[:50]!a} for {name} is not a git commit", "--commit",
                            "Give 7 to 40 lower-case hex digits, e.g. --commit lambda=11580132cea2.")
    _check_not_an_input(out, [path for _, path in found] + ([metadata] if metadata else []))
    memory = read_metadata(metadata) if metadata else _default_metadata(source)
    read = tuple(read_provider(path, name, memory) for name, path in found)
    text = _render(read, catalog_date, commits, billing or Billing(), source)
    write_text_atomic(out, text, fix="Choose a writable --out.")
    rows = text.count("\n") - 1
    catalog = load_catalog(out)  # what was written reads back as a catalog: the same checks as --market FILE
    return ImportReport(out=str(out), catalog_date=catalog_date, providers=read, rows_written=rows,
                        plans=len(catalog.plans))


def _check_out(out: Path) -> None:
    """``--out`` names a file to write (a folder would be replaced by nothing: refused before anything is read)."""
    if out.is_dir():
        raise UserError("--out names a directory", str(out),
                        "Give the catalog CSV file to write, e.g. --out market-2026-12-03.csv.")


def _check_not_an_input(out: Path, inputs: Sequence[Path]) -> None:
    """``--out`` is none of the files being imported (writing it would replace the source it was read from)."""
    for path in inputs:
        try:
            same = out.exists() and path.exists() and out.samefile(path)
        except OSError:
            same = False
        if same:
            raise UserError(f"--out is the provider catalog being imported ({path})" if path.name == VMS_FILE else
                            f"--out is the SkyPilot metadata being read ({path})", str(out),
                            "Write the isocost catalog to another --out: the source keeps its bytes (and its sha256).")


def _default_metadata(source: Path) -> dict[str, int]:
    """SkyPilot's common/metadata.csv beside the providers, when there is one."""
    for folder in (source, source.parent, source.parent.parent):
        if (folder / METADATA_FILE).is_file():
            return read_metadata(folder / METADATA_FILE)
    return {}


def gpu_name(accelerator: str) -> str:
    """The catalog's ``gpu`` key of an accelerator name. Example: ``gpu_name("A100-80GB") == "a100-80gb"``."""
    return "-".join(accelerator.lower().split())


def _render(read: Sequence[ProviderCatalog], catalog_date: date, commits: Mapping[str, str], billing: Billing,
            source: Path) -> str:
    buffer = io.StringIO()
    writer = csv_writer(buffer)  # a provider, region or instance name is never a spreadsheet formula
    writer.writerow(CATALOG_COLUMNS + BILLING_COLUMNS + MARKET_COLUMNS)
    for provider in read:
        relative = _relative(Path(provider.path), source)
        origin = (f"SkyPilot catalog {relative}, sha256 {provider.sha256}, commit "
                  f"{commits.get(provider.provider, 'unknown')}")
        for offer in provider.offers:
            gpu = gpu_name(offer.accelerator)
            if len(gpu) > MAX_GPU_NAME_CHARS or not GPU_NAME.fullmatch(gpu):
                raise UserError(f"AcceleratorName {offer.accelerator!a} makes no catalog name",
                                f"{provider.path}:{offer.line}", "Rename the accelerator in a copy of the file.")
            writer.writerow([
                gpu, offer.cards, "", offer.price_usd_per_hour, CATALOG_CURRENCY, catalog_date.isoformat(),
                f"{origin}, line {offer.line}", billing.billing, billing.minimum_s, billing.increment_s,
                provider.provider, offer.region, offer.instance_type, offer.accelerator,
                "" if offer.card_memory_gib is None else offer.card_memory_gib,
                "" if offer.spot_usd_per_hour is None else offer.spot_usd_per_hour,
            ])
    if buffer.tell() == 0 or buffer.getvalue().count("\n") < 2:
        raise UserError("no GPU offer to import", ", ".join(p.path for p in read),
                        "The files hold CPU instances only, or every GPU row was skipped (see the counts).")
    return buffer.getvalue()


def _relative(path: Path, source: Path) -> str:
    base = source.parent if source.is_file() else source
    try:
        return f"{base.name}/{path.relative_to(base)}" if base.name else str(path)
    except ValueError:
        return str(path)
