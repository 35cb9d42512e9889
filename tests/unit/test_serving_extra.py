"""The serving extra pins MLPerf's load generator, and ``make setup`` installs it (issue 36)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_serving_extra_pins_loadgen_exactly() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["serving"] == ["mlcommons-loadgen==6.0.17"]


def test_make_setup_installs_the_serving_extra() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    extras = re.search(r"pip install --quiet -e '\.\[([a-z,]+)\]'", makefile)
    assert extras is not None and "serving" in extras.group(1).split(",")
