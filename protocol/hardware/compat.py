"""Is the detected driver/backend combination one the vendors list? Pure data lookups, no torch.

Two tables ship in ``protocol/data`` with their source and date in header comments:

- ``cuda-min-driver.csv``: NVIDIA's minimum Linux driver per CUDA toolkit (full compatibility),
  plus the driver ranges of minor-version compatibility (limited feature set).
- ``rocm-compat.csv``: AMD's ROCm compatibility matrix (GPU targets, PyTorch versions per ROCm).

A check answers ``listed``, ``not listed`` or ``unknown`` (something needed was not detected, or
the table does not cover the detected version), always with the data file's version and date and
a sentence saying why. Inputs are what the trial read at run time (NVML, amdsmi,
``/opt/rocm/.info/version``, torch), never a card name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from protocol.io.csvio import read_dicts
from protocol.records.codec import to_dict

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
CUDA_TABLE = DATA_DIR / "cuda-min-driver.csv"
ROCM_TABLE = DATA_DIR / "rocm-compat.csv"

LISTED = "listed"
NOT_LISTED = "not listed"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class CompatResult:
    status: str  # listed | not listed | unknown
    table: str  # data file name, "" when no table applies
    data_version: str  # the table's "version:" header
    data_read: str  # the table's "read:" header (when the source was read)
    detail: str  # why, in one sentence
    inputs: dict[str, str | None]


@dataclass(frozen=True)
class Table:
    name: str
    meta: dict[str, str]
    rows: tuple[dict[str, str], ...]


@cache
def load_table(path: Path) -> Table:
    """Read a data CSV whose leading ``# key: value`` lines give source, read date and version."""
    meta: dict[str, str] = {}
    body: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            key, sep, value = line.lstrip("# ").partition(":")
            if sep:
                meta[key.strip()] = value.strip()
        elif line.strip():
            body.append(line)
    rows = tuple(row for _, row in read_dicts("\n".join(body) + "\n", "data table", str(path)))  # columns named once
    return Table(name=path.name, meta=meta, rows=rows)


def version_tuple(text: str) -> tuple[int, ...]:
    """``"570.124.06"`` → (570, 124, 6); ``"7.2.4-123"`` → (7, 2, 4); ``""`` → ()."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", text or "")
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def _result(status: str, table: Table | None, detail: str, inputs: dict[str, str | None]) -> CompatResult:
    return CompatResult(
        status=status,
        table=table.name if table else "",
        data_version=table.meta.get("version", "") if table else "",
        data_read=table.meta.get("read", "") if table else "",
        detail=detail,
        inputs=inputs,
    )


# -- NVIDIA -------------------------------------------------------------------------------------


def check_cuda(cuda_runtime: str | None, driver: str | None, *, table_path: Path = CUDA_TABLE) -> CompatResult:
    """Does the host driver meet the minimum for the CUDA runtime torch was built with?

    ``cuda_runtime`` is ``torch.version.cuda`` (major.minor, e.g. ``"12.8"``); ``driver`` is NVML's
    ``nvmlSystemGetDriverVersion()``. The GA row of that toolkit is the minimum (updates need more,
    but torch does not say which update it was built with: the detail names the update rows).
    """
    table = load_table(table_path)
    inputs = {"cuda_runtime": cuda_runtime, "driver_version": driver}
    if not cuda_runtime:
        return _result(UNKNOWN, table, "CUDA runtime version not detected (torch.version.cuda is empty)", inputs)
    if not driver:
        return _result(UNKNOWN, table, "driver version not detected (NVML unavailable)", inputs)
    runtime = version_tuple(cuda_runtime)[:2]
    have = version_tuple(driver)
    toolkit = {row["cuda"]: row for row in table.rows if row["kind"] == "toolkit"}
    key = ".".join(str(p) for p in runtime)
    row = toolkit.get(key)
    updates = sorted(k for k in toolkit if k.startswith(key + "U"))
    if row is not None:
        need = version_tuple(row["min_linux_driver"])
        if have >= need:
            more = ("; builds from its updates need more (" + ", ".join(
                f"{u}: ≥ {toolkit[u]['min_linux_driver']}" for u in updates) + ")") if updates else ""
            return _result(LISTED, table, f"driver {driver} ≥ {row['min_linux_driver']}, the minimum for CUDA {key}"
                           f"{more}", inputs)
    minor = next((r for r in table.rows if r["kind"] == "minor" and version_tuple(r["cuda"])[:1] == runtime[:1]), None)
    if minor is not None:
        low = version_tuple(minor["min_linux_driver"])
        high = version_tuple(minor["below_linux_driver"]) if minor["below_linux_driver"] else None
        inside = have >= low and (high is None or have < high)
        if row is None:
            if inside:
                return _result(UNKNOWN, table, f"CUDA {key} has no row in the table; driver {driver} is inside the "
                               f"CUDA {minor['cuda']}.x minor-version compatibility range", inputs)
        elif inside:
            return _result(NOT_LISTED, table, f"driver {driver} is below {row['min_linux_driver']}, the minimum "
                           f"for CUDA {key}: only minor-version compatibility applies (limited feature set)", inputs)
    if row is None:
        return _result(UNKNOWN, table, f"CUDA {key} is not in the table (data version "
                       f"{table.meta.get('version', '?')})", inputs)
    return _result(NOT_LISTED, table, f"driver {driver} is below {row['min_linux_driver']}, the minimum for CUDA "
                   f"{key}", inputs)


_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([a-z]?)$")


def check_card(capability: str | None, arch_list: list[str] | tuple[str, ...]) -> CompatResult:
    """Can this torch build run on this card? ``arch_list`` is ``torch.cuda.get_arch_list()`` (what the wheel was
    compiled for, e.g. ``sm_75 … sm_120``), ``capability`` the card's ``major.minor``. A cubin ``sm_XY`` runs on
    major X from minor Y on (an ``a``-suffixed one on X.Y only), PTX ``compute_XY`` on any card from X.Y."""
    inputs = {"compute_capability": capability, "arch_list": " ".join(arch_list)}
    card = version_tuple(capability or "")[:2]
    archs = [(kind, (int(major), int(minor)), suffix) for kind, major, minor, suffix
             in (match.groups() for match in map(_ARCH.match, arch_list) if match)]
    if len(card) != 2 or not archs:
        return _result(UNKNOWN, None, "the card's compute capability or this torch's architecture list was not "
                       "detected", inputs)
    for kind, arch, suffix in archs:
        runs = (arch == card if suffix else arch[0] == card[0] and arch[1] <= card[1]) if kind == "sm" else arch <= card
        if runs:
            return _result(LISTED, None, f"card sm_{card[0]}{card[1]} runs this torch's {kind}_{arch[0]}{arch[1]}"
                           f"{suffix}", inputs)
    oldest = min(arch for _, arch, _ in archs)
    age = "older than the oldest architecture" if card < oldest else "not among the architectures"
    return _result(NOT_LISTED, None, f"card sm_{card[0]}{card[1]} is {age} this torch was compiled for "
                   f"({inputs['arch_list']}): build the image on a base or index with a torch for it (docs/gpu.md)",
                   inputs)


# -- AMD ----------------------------------------------------------------------------------------


def _rocm_row_matches(cell: str, version: tuple[int, ...]) -> bool:
    """Cells look like ``7.1.0``, ``7.0.0/7.0.1`` or ``6.4.1-6.4.3``."""
    v = (version + (0, 0, 0))[:3]
    for part in cell.split("/"):
        low_text, sep, high_text = part.partition("-")
        low = (version_tuple(low_text) + (0, 0, 0))[:3]
        high = (version_tuple(high_text) + (0, 0, 0))[:3] if sep else low
        if low <= v <= high:
            return True
    return False


def check_rocm(rocm_version: str | None, gfx_arch: str | None, torch_version: str | None, *,
               table_path: Path = ROCM_TABLE) -> CompatResult:
    """Is (ROCm user space, GPU target, PyTorch major.minor) a combination AMD's matrix lists?

    The host OS and amdgpu driver are not checked: the container cannot see the host's release,
    and the matrix lists amdgpu per ROCm release (recorded in the detail).
    """
    table = load_table(table_path)
    inputs = {"rocm_version": rocm_version, "gfx_arch": gfx_arch, "torch_version": torch_version}
    if not rocm_version:
        return _result(UNKNOWN, table, "ROCm version not detected (/opt/rocm/.info/version not readable)", inputs)
    version = version_tuple(rocm_version)
    row = next((r for r in table.rows if _rocm_row_matches(r["rocm"], version)), None)
    covered = sorted({p for r in table.rows for p in re.split(r"[-/]", r["rocm"])}, key=version_tuple)
    if row is None:
        return _result(UNKNOWN, table, f"ROCm {rocm_version} is not in the matrix (it covers {covered[0]} to "
                       f"{covered[-1]}, read {table.meta.get('read', '?')})", inputs)
    if not gfx_arch:
        return _result(UNKNOWN, table, "GPU target (gcnArchName) not detected", inputs)
    gfx = gfx_arch.split(":")[0]
    targets = [t for t in row["gfx_targets"].split(";") if t]
    torch_mm = ".".join(str(p) for p in version_tuple(torch_version or "")[:2])
    pytorch = row["pytorch"].split(";")
    problems = []
    if targets and gfx not in targets:
        problems.append(f"{gfx} is not a listed GPU target of ROCm {row['rocm']} ({', '.join(targets)})")
    if not torch_mm:
        return _result(UNKNOWN, table, "PyTorch version not detected", inputs)
    if torch_mm not in pytorch:
        problems.append(f"PyTorch {torch_mm} is not listed for ROCm {row['rocm']} ({', '.join(pytorch)})")
    if problems:
        return _result(NOT_LISTED, table, "; ".join(problems), inputs)
    if not row["gfx_targets"]:
        return _result(UNKNOWN, table, f"ROCm {row['rocm']} lists PyTorch {torch_mm}, but the shipped data has no GPU "
                       f"target list for it ({gfx} not checked; source: {row.get('source', '?')})", inputs)
    return _result(LISTED, table, f"ROCm {row['rocm']} lists {gfx} and PyTorch {torch_mm} (amdgpu listed: "
                   f"{row['amdgpu_driver_supported']}; host OS not checked from inside the container)", inputs)


# -- one entry point for the trial ----------------------------------------------------------------


def check_device(facts: Mapping[str, Any], torch_version: str | None) -> dict[str, Any]:
    """The compatibility record for a trial's manifest, from its device facts (``runner.trial.env``)."""
    backend = facts.get("backend")
    if backend == "cuda":  # the driver floor first, then the card floor (both read from the wheel)
        driver = check_cuda(facts.get("backend_version"), facts.get("driver_version"))
        card = check_card(facts.get("compute_capability"), facts.get("arch_list") or ())
        worst = card if card.status == NOT_LISTED and driver.status != NOT_LISTED else driver
        return {**to_dict(worst), "detail": f"{worst.detail}; {(card if worst is driver else driver).detail}",
                "inputs": {**driver.inputs, **card.inputs}}
    if backend == "rocm":
        return to_dict(check_rocm(facts.get("rocm_version"), facts.get("gfx_arch"), torch_version))
    return to_dict(_result(UNKNOWN, None, "not applicable: CPU trial (no GPU driver or runtime to check)",
                           {"backend": str(backend)}))
