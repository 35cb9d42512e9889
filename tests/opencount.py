"""Counters for "each thing opened once": reads of raw.csv and parses of a study, counted however they happen.

:func:`count_raw_reads` wraps the ways a file is opened for reading (``open``/``io.open``, which ``Path.read_bytes``,
``Path.open`` and pandas go through, and ``os.open``) and records every read of a file named ``raw.csv``;
:func:`count_study_parses` counts every study parse (``protocol.study.load.parse_study`` builds one top-level
``TableReader`` per study, whoever calls it: ``load_study``, ``study_from_bytes`` or a direct call).

Example::

    reads = count_raw_reads(monkeypatch)
    CliRunner().invoke(main, ["summarize", str(root)])
    assert len(reads) == 1
"""

from __future__ import annotations

import builtins
import io
import os
from pathlib import Path
from typing import Any

import pytest

import protocol.study.load

_WRITING = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT


def count_raw_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read-open of a file named raw.csv from now on (the path of each), until the test ends."""
    reads: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def counted_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | bytes | os.PathLike) and Path(os.fsdecode(file)).name == "raw.csv" \
                and not set(mode) & set("wax+"):
            reads.append(os.fsdecode(file))
        return real_open(file, mode, *args, **kwargs)

    def counted_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(os.fsdecode(path)).name == "raw.csv" and not flags & _WRITING:
            reads.append(os.fsdecode(path))
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counted_open)
    monkeypatch.setattr(io, "open", counted_open)
    monkeypatch.setattr(os, "open", counted_os_open)
    return reads


def count_study_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The source of every study parsed from now on, until the test ends."""
    parses: list[str] = []
    real = protocol.study.load.TableReader

    class CountedReader(real):  # type: ignore[misc, valid-type]
        def __init__(self, source: str, data: Any, prefix: str, *args: Any, **kwargs: Any) -> None:
            if prefix == "":
                parses.append(source)
            super().__init__(source, data, prefix, *args, **kwargs)

    monkeypatch.setattr(protocol.study.load, "TableReader", CountedReader)
    return parses
