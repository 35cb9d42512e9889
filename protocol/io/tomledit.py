"""A careful textual edit of scalar keys in one TOML table: comments and layout are kept.

Only the lines of the named keys change; the edit is checked by parsing the
result, so a value is never written somewhere unexpected.

Example::

    set_table_keys(text, "quality", {"minimum": 0.85}, {"minimum": "tuned on 120 inputs"})
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as a TOML scalar")


def _comment(line: str, key_len: int) -> str:
    """The trailing comment of a ``key = value  # comment`` line whose value has no '#'."""
    rest = line[key_len:]
    at = rest.find("#")
    return rest[at:] if at >= 0 else ""


def set_table_keys(text: str, table: str, values: dict[str, Any], comments: dict[str, str] | None = None) -> str:
    """Set ``table.key = value`` for each item; an absent key is added after the table header."""
    comments = comments or {}
    lines = text.splitlines(keepends=True)
    header = re.compile(rf"^\s*\[\s*{re.escape(table)}\s*\]\s*(#.*)?$")
    start = next((i for i, line in enumerate(lines) if header.match(line.rstrip("\n"))), None)
    if start is None:
        raise ValueError(f"no [{table}] table")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^\s*\[", lines[i])), len(lines))
    for key, value in values.items():
        pattern = re.compile(rf"^(\s*){re.escape(key)}\s*=")
        new_comment = f"# {comments[key]}" if key in comments else None
        for i in range(start + 1, end):
            match = pattern.match(lines[i])
            if match:
                old = lines[i].rstrip("\n")
                comment = new_comment if new_comment is not None else _comment(old, match.end())
                lines[i] = f"{match.group(1)}{key} = {toml_value(value)}{'  ' + comment if comment else ''}\n"
                break
        else:
            lines.insert(start + 1, f"{key} = {toml_value(value)}{'  ' + new_comment if new_comment else ''}\n")
            end += 1
    result = "".join(lines)
    parsed = tomllib.loads(result)[table]
    for key, value in values.items():
        if parsed.get(key) != (list(value) if isinstance(value, tuple) else value):
            raise ValueError(f"the edit of {table}.{key} did not parse back to {value!r}")
    return result
