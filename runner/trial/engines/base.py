"""What an engine is, for the trial: the runtime that turns a task's inputs into its outputs.

The task (``runner.trial.tasks``) says what a pass is and what its files hold; the engine says what runs the
model: plain transformers (``protocol.engines.transformers.trial``, the default: the task's own ``load``), ONNX
Runtime, vLLM. :meth:`TrialEngine.load` returns the task's :class:`~runner.trial.tasks.base.TaskModel` (same
outputs, same files, judged by the same gate), and :meth:`TrialEngine.readback` reads from the loaded engine what
it really runs (its version, dtype, context, execution provider …), which the trial records in the manifest's
``engine`` block and compares with the study's settings: an engine that changed one behind the study's back is a
refused trial, never a silent one (:func:`settings_differences`).

Example::

    engine = trial_engine("transformers")
    model = engine.load(task, Path("model"), variant, torch, task_options, {})
    engine.readback(model)      # {"name": "transformers", "version": "5.24.0", "settings": {}}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protocol.records.stages import Variant
from runner.trial.tasks.base import TaskModel, TrialTask


class EngineRefused(Exception):
    """The engine cannot run this trial as the study declares it (an architecture it cannot load, a setting it
    rejects, a setting it changed): the trial ends ``refused`` with this reason, never with a traceback."""


class TrialEngine(ABC):
    """One engine as the trial runs it."""

    #: The study's ``engine`` value (the host half's ``name``).
    name: str
    #: Where an engine keeps the logs of what it starts (a server's): the trial directory, set by the trial.
    log_dir: Path | None = None

    @abstractmethod
    def load(self, task: TrialTask, path: Path, variant: Variant, torch: Any, options: dict[str, Any],
             settings: Mapping[str, Any]) -> TaskModel:
        """The checkpoint at ``path`` loaded by this engine for ``task`` under the variant's settings (``options``:
        the spec's ``task_options``; ``settings``: the study's settings of this engine). The model's outputs are
        those of the task's own model for the same inputs. Loading (an export, an engine's start-up) counts as
        load, never inside the pass. EngineRefused when it cannot."""

    @abstractmethod
    def readback(self, model: TaskModel) -> dict[str, Any]:
        """What the loaded engine really runs, read from the engine: ``name``, ``version`` and ``settings``
        (every declared setting, as the engine reports it), plus anything else worth recording."""

    def close(self, model: TaskModel | None) -> None:  # noqa: B027 (an engine that starts nothing stops nothing)
        """Stop what the engine started (workers, servers): called once, whatever happened; no process is left."""
        return None  # an engine that starts nothing has nothing to stop


def settings_differences(declared: Mapping[str, Any], read_back: Mapping[str, Any]) -> list[str]:
    """The declared settings the engine does not report as declared: ``"key: declared X, engine runs Y"``."""
    return [f"{key}: declared {value!r}, engine runs {read_back.get(key, '(not reported)')!r}"
            for key, value in sorted(declared.items()) if read_back.get(key) != value]
