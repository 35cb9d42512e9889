"""The engines table of docs/engines.md, generated from the engines (tests/cli/test_docs.py keeps them equal).

``python -m protocol.engines.docs`` prints one row per engine found, from each engine's ``Engine.docs``; with
``ISOCOST_ENGINES_PATH`` set it includes your own engines, so an engine's row comes from its folder.
"""

from __future__ import annotations

from protocol.engines import all_engines


def engine_table() -> str:
    """One row per engine: its name, what it runs (tasks, devices, precisions) and what it changes."""
    lines = ["| engine | runs | what differs |", "|---|---|---|"]
    lines += [f"| `{e.name}` | {e.docs.get('runs', '')} | {e.docs.get('changes', '')} |" for e in all_engines()]
    return "\n".join(lines)


if __name__ == "__main__":  # python -m protocol.engines.docs: the table to paste into docs/engines.md
    print(engine_table())
