"""CONTRIBUTING.md gives the same CI run as the README: its date, set-up, test counts and times.

The README's figures are the latest fresh-clone run of ``CI=true bash .ci/run``; CONTRIBUTING's CI section and its
tests table quote the same run, so that one page is never older than the other.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = re.compile(r"fresh clone\s+(?:on\s+)?\(?(?P<date>\d{4}-\d{2}-\d{2}).*?set-up\s.*?(?P<setup>[\d,]+) s,\s+then\s+"
                 r"pytest\s+ran\s+(?P<tests>[\d,]+)\s+tests\s+in\s+(?P<pytest>[\d,]+)\s+s:\s+(?P<passed>[\d,]+)\s+"
                 r"passed,\s+(?P<skipped>[\d,]+)\s+skipped.*?(?P<total>[\d,]+)\s+s\s+in\s+all", re.S)


def ci_run(text: str) -> dict[str, str]:
    match = RUN.search(text)
    assert match, "no CI run figures found"
    return match.groupdict()


def test_contributing_quotes_the_readmes_ci_run() -> None:
    readme = ci_run((ROOT / "README.md").read_text(encoding="utf-8"))
    contributing_text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert ci_run(contributing_text) == readme
    assert f"{readme['pytest']} s of pytest in the CI run below" in contributing_text


def test_the_figures_are_read_from_either_wording() -> None:
    text = ("a fresh clone on 2026-12-01 (`CI=true bash .ci/run`): set-up (venv) took 138 s, then pytest ran 1,844 "
            "tests in 1,117 s: 1,840 passed, 4 skipped (gpu); 1,255 s in all.")
    assert ci_run(text) == {"date": "2026-12-01", "setup": "138", "tests": "1,844", "pytest": "1,117",
                            "passed": "1,840", "skipped": "4", "total": "1,255"}
