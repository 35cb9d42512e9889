"""Markdown read as the docs tests read it: the lines under each heading, and a list's items.

Example::

    bullets(sections(Path("ARCHITECTURE.md").read_text())["runner/"])[0]
"""

from __future__ import annotations

import re

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def sections(text: str) -> dict[str, list[str]]:
    """The prose lines under each heading (fenced code kept, with its fence lines; a heading inside a fence is a
    line), by heading text."""
    found: dict[str, list[str]] = {}
    current = ""
    inside = False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
        heading = None if inside else HEADING.match(line)
        if heading:
            current = heading.group(2)
            continue
        found.setdefault(current, []).append(line)
    return found


def bullets(lines: list[str]) -> list[str]:
    """Each Markdown list item with its continuation lines joined."""
    items: list[str] = []
    for line in lines:
        if line.startswith("- "):
            items.append(line[2:])
        elif items and line.startswith("  ") and line.strip():
            items[-1] += " " + line.strip()
    return items
