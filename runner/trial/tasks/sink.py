"""The one output sink of every task: a batch's outputs appended to the task's pass files and flushed.

The files are the task's :attr:`~runner.trial.tasks.base.TrialTask.pass_files`, opened once for the pass (never
through a symbolic link), written per batch in their declared order and each flushed, so a trial killed mid-pass
keeps every completed batch: a binary file's rows before the id lines that name them. ``rename`` writes the same
files under other names (an embedding's queries after the pass).

Example::

    with OutputSink(out, task) as sink:
        text = sink.lines(ids, outputs)        # inside the measured pass (a fault may corrupt it)
        sink.write(text, outputs)              # timed apart
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from protocol.io.safe_write import write_binary, write_handle
from runner.trial.tasks.base import TrialTask


class OutputSink:
    """The pass files of ``task`` in ``out``, open for one pass."""

    def __init__(self, out: Path, task: TrialTask, rename: Mapping[str, str] | None = None) -> None:
        self.out = out
        self.task = task
        self.rename = dict(rename or {})
        self._stack = ExitStack()
        self._handles: list[tuple[str, bool, IO[Any]]] = []
        self._first = True

    def __enter__(self) -> OutputSink:
        for file in self.task.pass_files:
            path = self.out / self.rename.get(file.name, file.name)
            opener = write_binary if file.binary else write_handle
            self._handles.append((file.name, file.binary, self._stack.enter_context(opener(path, self.out))))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def lines(self, ids: Sequence[str], outputs: Any) -> str:
        """The JSON lines of one batch (what a fault injection may corrupt before it is written)."""
        return self.task.lines(ids, outputs)

    def write(self, text: str, outputs: Any) -> None:
        """One batch: every pass file in order, each flushed (``text``: the JSON lines, as :meth:`lines` gave)."""
        assert self._handles, "write() inside the with block"
        for name, binary, handle in self._handles:
            handle.write(self.task.chunk(name, outputs, self._first) if binary else text)
            handle.flush()
        self._first = False
