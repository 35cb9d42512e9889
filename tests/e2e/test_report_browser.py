"""report.html in a real headless Chromium: the plots render, the page is not blank, nothing goes to the network.

A real campaign (tiny corpus, real MiniLM, fresh processes) is run with a rental, ``isocost decide`` writes
the report, and Debian's ``chromium`` opens it three ways: ``--dump-dom`` (the DOM after parsing: the SVG
marks are counted), ``--screenshot`` (decoded here with zlib: many colours, the plot colours present) and
``--log-net-log`` (no request made by the page). The network check is first shown to catch a page that
does fetch something.

Without Chromium the test is skipped with the reason; with ``ISOCOST_REQUIRE_BROWSER=1`` (CI) it fails instead.
CI installs the browser with: ``apt-get install -y --no-install-recommends chromium``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.cli import IsocostGroup, main
from runner.cli.decide import COMMANDS
from runner.launch.kinds.process.launcher import ProcessLauncher

pytestmark = pytest.mark.e2e

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
)


@pytest.fixture(scope="session")
def browser() -> str:
    """The Chromium binary; requested first so a missing browser skips before the model is built."""
    return chromium()


def isocost() -> click.Group:
    """The real ``isocost`` group, or a copy that also holds decide/period until they are registered there."""
    if all(command.name in main.commands for command in COMMANDS):
        return main
    return IsocostGroup(name="isocost", commands={**main.commands, **{c.name: c for c in COMMANDS if c.name}})


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    reason = ("Chromium not found on PATH (Debian: apt-get install -y --no-install-recommends chromium); "
              "the report cannot be checked in a real browser")
    if os.environ.get("ISOCOST_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + " and ISOCOST_REQUIRE_BROWSER=1 requires it")
    pytest.skip(reason)


def browse(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=90, check=False)


def page_requests(net_log: Path) -> list[str]:
    """URLs the PAGE requested (its network isolation key is the file:// page), per Chromium's net log.

    The browser's own background traffic (update checks, account probes) carries no page origin and is
    not what this checks; with ``--host-resolver-rules`` it cannot leave the machine anyway.
    """
    data = json.loads(net_log.read_text(encoding="utf-8"))
    kinds = {value: key for key, value in data["constants"]["logEventTypes"].items()}
    urls = []
    for event in data["events"]:
        params = event.get("params") or {}
        if kinds.get(event["type"]) != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        if "file://" in str(params.get("network_isolation_key", "")) and not params["url"].startswith("file:"):
            urls.append(params["url"])
    return urls


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG with the standard library: (width, height, rows of RGB(A) bytes)."""
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(blob):
        (length,) = struct.unpack(">I", blob[pos:pos + 4])
        kind, body = blob[pos + 4:pos + 8], blob[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"unexpected PNG format depth={depth} colour={colour}"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upper_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - upper_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upper_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else upper_left)) & 0xFF
        rows.append(bytes(line if channels == 3 else bytes(b for j, b in enumerate(line) if j % 4 != 3)))
        previous = line
    return width, height, rows


def test_network_check_catches_a_page_that_fetches(browser: str, tmp_path: Path) -> None:
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png"></body></html>')
    log = tmp_path / "leaky-net.json"
    browse(page, tmp_path, f"--log-net-log={log}", "--dump-dom")
    assert page_requests(log) == ["http://example.invalid/x.png"]


def test_report_renders_its_plots_offline(browser: str, make_workspace: Callable[..., Path], tmp_path: Path) -> None:
    study = make_workspace(n=6, repetitions=2, batches="[1, 4]")
    out = tmp_path / "rtx4090"
    run_campaign(study, out, ProcessLauncher(), rental=Rental("rtx-4090", 2))
    result = CliRunner().invoke(isocost(), ["decide", str(out), "--out", str(tmp_path / "decision")])
    assert result.exit_code == 0, result.output
    assert "**Chosen: batch_size=" in result.stdout and "on rtx-4090 ×2 lots**" in result.stdout
    report = tmp_path / "decision" / "report.html"
    html = report.read_text(encoding="utf-8")

    # Self-contained: nothing to fetch, no script at all.
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"url\(|@import|<script|<link|<img|<iframe", html, re.IGNORECASE)

    # The DOM Chromium built: three plots with one mark per attempted pass, bars, axes and legends.
    dom = browse(report, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    tree = dom.stdout
    assert len(re.findall(r'<svg class="plot ', tree)) == 3
    assert len(re.findall(r'<circle class="pass accepted"', tree)) == 4  # 2 variants × 2 repetitions
    assert len(re.findall(r'<line class="median"', tree)) == 2
    assert len(re.findall(r'<rect class="cost-bar"', tree)) == 2
    assert len(re.findall(r'<rect class="mem-bar"', tree)) == 2
    # A CPU host: the capacity line is the host RAM the manifests recorded (MemTotal).
    assert "capacity" in tree and "capacity not recorded" not in tree
    for label in ("pass time per full pass over the corpus (s)", "peak memory (", "cost per validated corpus (USD)"):
        assert label in tree
    assert tree.count('class="legend"') == 3

    # A screenshot that is not blank, with the plot colours in it.
    shot = tmp_path / "report.png"
    taken = browse(report, tmp_path, f"--screenshot={shot}", "--window-size=1100,1600")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1100, 1600)
    pixels = [row[i:i + 3] for row in rows[::4] for i in range(0, len(row), 12)]
    colours = set(pixels)
    non_white = sum(1 for p in pixels if p != b"\xff\xff\xff")
    assert len(colours) > 50, f"only {len(colours)} colours: the page looks blank"
    assert non_white / len(pixels) > 0.03
    assert any(abs(p[0] - 0x00) < 40 and abs(p[1] - 0x72) < 40 and abs(p[2] - 0xB2) < 40 for p in pixels), \
        "no blue pass dots or bars in the screenshot"
    assert any(abs(p[0] - 0x00) < 40 and abs(p[1] - 0x9E) < 40 and abs(p[2] - 0x73) < 40 for p in pixels), \
        "no green 'chosen' bar in the screenshot"

    # No request made by the page.
    log = tmp_path / "net-log.json"
    browse(report, tmp_path, f"--log-net-log={log}", "--dump-dom")
    assert log.exists()
    assert page_requests(log) == []


PARETO_JOB = """
[job]
inputs = 1000000
bootstrap_resamples = 300
"""
PARETO_CATALOG = (
    "gpu,cards_per_lot,billing,plan_days,price_usd_per_lot,minimum_s,increment_s,currency,catalog_date,source\n"
    "rtx-4090,1,flat,7,110.00,,,USD,2026-09-24,IteraGPU catalog snapshot (2026-09-24 edition) as quoted in the seed\n"
    "rtx-4090,1,hourly,,0.70,3600,3600,USD,2026-09-24,MADE-UP hourly price for the isocost test (not a real offer)\n"
)


def test_report_shows_the_jobs_pareto_view(browser: str, make_workspace: Callable[..., Path], tmp_path: Path) -> None:
    study = make_workspace(n=6, repetitions=2, batches="[1, 4]", extra=PARETO_JOB)
    out = tmp_path / "rtx4090"
    run_campaign(study, out, ProcessLauncher(), rental=Rental("rtx-4090", 1))
    catalog = tmp_path / "made-up-catalog.csv"
    catalog.write_text(PARETO_CATALOG, encoding="utf-8")
    decided = tmp_path / "decision"
    result = CliRunner().invoke(isocost(), ["decide", str(out), "--catalog", str(catalog), "--out", str(decided)])
    assert result.exit_code == 0, result.output
    job = json.loads((decided / "decision.json").read_text(encoding="utf-8"))["job"]
    projected = [c for c in job["configurations"] if c["per_corpus_usd"] is not None]
    front = [c for c in projected if c["pareto"]]
    assert projected and front

    dom = browse(decided / "report.html", tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    tree = dom.stdout
    assert len(re.findall(r'<svg class="plot pareto"', tree)) == 1
    assert len(re.findall(r'<circle class="pareto front"', tree)) == len(front)
    assert len(re.findall(r'<circle class="pareto dominated"', tree)) == len(projected) - len(front)
    assert len(re.findall(r'<line class="interval"', tree)) == len(projected)
    for label in ("projected job hours", "cost per validated corpus (USD)", "non-dominated (Pareto front)"):
        assert label in tree
    assert "The declared job" in tree and "Cheapest for the job" in tree

    shot = tmp_path / "pareto.png"
    taken = browse(decided / "report.html", tmp_path, f"--screenshot={shot}", "--window-size=1100,1400")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    _, _, rows = png_pixels(shot)
    pixels = [row[i:i + 3] for row in rows[::2] for i in range(0, len(row), 6)]
    assert any(abs(p[0] - 0x00) < 40 and abs(p[1] - 0x9E) < 40 and abs(p[2] - 0x73) < 40 for p in pixels), \
        "no green Pareto-front point in the screenshot"
    log = tmp_path / "pareto-net.json"
    browse(decided / "report.html", tmp_path, f"--log-net-log={log}", "--dump-dom")
    assert page_requests(log) == []
