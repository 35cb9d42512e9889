"""Progress of several hosts at once: one line per host.

On a terminal the block of host lines is redrawn in place (a bar, trials done / planned, time,
the host's latest message); elsewhere (CI logs, a pipe) every message is one plain line
prefixed with its host, so nothing is lost and lines from different hosts never interleave
mid-line.
"""

from __future__ import annotations

import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

_TRIAL = re.compile(r"^\[(\d+)/(\d+)\] (\S+): (.*)$")
_BAR = 20


@dataclass
class HostLine:
    name: str
    done: int = 0
    total: int = 0
    ok: int = 0
    failed: int = 0
    message: str = "waiting"
    state: str = ""  # final word: complete, lost, unreachable, stopped, error
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    def observe(self, message: str) -> None:
        self.message = message
        match = _TRIAL.match(message)
        if not match:
            return
        self.total = int(match.group(2))
        rest = match.group(4)
        if rest.startswith("running"):
            return
        status = rest.removeprefix("recorded as ").split(",")[0].split(" ")[0]
        self.done += 1
        if status == "ok":
            self.ok += 1
        else:
            self.failed += 1

    def render(self, width: int, name_width: int) -> str:
        filled = int(_BAR * self.done / self.total) if self.total else 0
        bar = "#" * filled + "." * (_BAR - filled)
        elapsed = (self.ended or time.monotonic()) - self.started
        counts = f"{self.done:>3}/{self.total or '?':<3}"
        fails = f" {self.failed} failed" if self.failed else ""
        head = f"{self.name:<{name_width}} [{bar}] {counts} {_clock(elapsed)}{fails}  "
        tail = f"{self.state.upper()}: {self.message}" if self.state else self.message
        return (head + tail)[: max(width - 1, 20)]


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


class HostBoard:
    """Thread-safe progress for named hosts; ``reporter(name)`` gives each host its callback."""

    def __init__(self, names: list[str], stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.lines = {name: HostLine(name) for name in names}
        self.name_width = max((len(n) for n in names), default=4)
        self._lock = threading.Lock()
        self._drawn = 0

    def reporter(self, name: str) -> Callable[[str], None]:
        def report(message: str) -> None:
            with self._lock:
                self.lines[name].observe(message)
                if self.tty:
                    self._redraw()
                else:
                    self.stream.write(f"[{name}] {message}\n")
                    self.stream.flush()

        return report

    def preset(self, name: str, done: int, total: int) -> None:
        """Counts already in raw.csv when a campaign resumes."""
        with self._lock:
            line = self.lines[name]
            line.done, line.total = done, total

    def finish(self, name: str, state: str, message: str) -> None:
        with self._lock:
            line = self.lines[name]
            line.state, line.message, line.ended = state, message, time.monotonic()
            if self.tty:
                self._redraw()
            else:
                self.stream.write(f"[{name}] {state.upper()}: {message}\n")
                self.stream.flush()

    def note(self, message: str) -> None:
        """A message for all hosts: printed above the block."""
        with self._lock:
            if self.tty and self._drawn:
                self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
                self._drawn = 0
            self.stream.write(message + "\n")
            if self.tty:
                self._redraw()
            self.stream.flush()

    def _redraw(self) -> None:
        width = shutil.get_terminal_size((120, 24)).columns
        out = []
        if self._drawn:
            out.append(f"\x1b[{self._drawn}F")
        for line in self.lines.values():
            out.append("\x1b[2K" + line.render(width, self.name_width) + "\n")
        self._drawn = len(self.lines)
        self.stream.write("".join(out))
        self.stream.flush()

    def snapshot(self) -> list[str]:
        with self._lock:
            return [line.render(200, self.name_width) for line in self.lines.values()]
