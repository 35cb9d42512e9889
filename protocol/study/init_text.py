"""Study text as ``isocost init`` writes it: each key with its value and its declared meaning and default.

The comments come from :data:`protocol.study.schema.KEYS`, so the lines a task writes for its own keys
(``protocol/tasks/<task>/init.py``) read like every other line of the study.

Example::

    line("warmup.runs")                 # 'runs = 1  # warm-up runs over those inputs … (default 1)'
    table("quality", {"metric": "accuracy", "minimum": 0.0})
"""

from __future__ import annotations

import json
from typing import Any

from protocol.study.schema import KEYS


def comment(key: str) -> str:
    """``  # meaning (default …)`` of the declared ``key``."""
    entry = KEYS[key]
    if entry.required:
        default = ""
    elif entry.default.startswith("required"):  # "required in [deadline]": the table is optional, the key is not
        default = f" ({entry.default})"
    else:
        default = f" (default {entry.default})"
    return f"  # {entry.meaning}{default}"


def line(key: str, value: Any = ..., note: str = "") -> str:
    """``leaf = value  # meaning (default …)`` for the declared ``key``; ``value`` omitted: its declared default."""
    return f"{key.rpartition('.')[2]} = {KEYS[key].default if value is ... else toml(value)}{comment(key)}{note}"


def table(name: str, values: dict[str, Any], *, commented: tuple[str, ...] = (),
          notes: dict[str, str] | None = None) -> list[str]:
    """``[name]`` with one :func:`line` per key (``...``: the declared default; ``commented``: written as a
    comment), then a blank line."""
    return [f"[{name}]", *(("# " if key in commented else "") + line(f"{name}.{key}", value, (notes or {})
                                                                      .get(key, "")) for key, value in
                           values.items()), ""]


def toml(value: Any) -> str:
    """A TOML literal: booleans, strings (JSON-quoted), numbers, arrays."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return str(value)


def untuned_quality(reference: str, metric: str, subgroups: list[str], extra: dict[str, Any] | None = None,
                    notes: dict[str, str] | None = None) -> list[str]:
    """``[quality]`` with its minimum left for ``isocost tune`` (``extra``: the task's own keys, ``...`` for their
    declared defaults)."""
    values = {"metric": metric, "minimum": 0.0, "tuned_on": "not tuned yet", "reference_variant": reference,
              "max_metric_drop": ..., "min_agreement": ..., **(extra or {}), "subgroups": subgroups,
              "replay": "quality", "max_score_delta": 0.01}
    return table("quality", values, commented=("max_score_delta",), notes={"minimum": "; NOT TUNED YET",
                                                                             **(notes or {})})
