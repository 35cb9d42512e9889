"""JSON files: sorted keys, atomic writes, schema-version checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from protocol import safe_write
from protocol.errors import UserError


def dumps(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_json_atomic(path: Path, data: Any, root: Path | None = None, fix: str = "") -> None:
    """Write JSON so that a reader sees either the old file or the whole new one (never through a symbolic link;
    ``root``: no directory below it may be one either, see :mod:`protocol.safe_write`)."""
    write_text_atomic(path, dumps(data), root, fix)


def write_text_atomic(path: Path, text: str, root: Path | None = None, fix: str = "") -> None:
    safe_write.write_text_atomic(path, text, root, fix)


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise UserError("file not found", str(path)) from None
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg} at line {exc.lineno}", str(path)) from None


def record_dict(record: Any, schema_version: int, **fields: Any) -> dict[str, Any]:
    """A frozen dataclass as a JSON-ready dict: its fields, ``fields`` replacing some of them (nested records
    as dicts, tuples as lists, money as text), and its ``schema_version``.

    Example: ``record_dict(option, 1, plan=option.plan.to_dict())["schema_version"] == 1``.
    """
    return {**record.__dict__, **fields, "schema_version": schema_version}


def check_schema(data: dict[str, Any], kind: str, supported: int, where: str) -> None:
    """Reject records whose ``schema_version`` this version cannot read."""
    version = data.get("schema_version")
    if version != supported:
        raise UserError(
            f"{kind} has schema_version {version!r}, this isocost reads {supported}",
            where,
            "Use the isocost version that wrote it, or re-run the stage that produced it.",
        )
