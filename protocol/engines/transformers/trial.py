"""The default engine in the trial: the task's own transformers model, in PyTorch.

It loads what the task loads (``TrialTask.load``) and reads back the versions it ran with; it has no settings.

Example::

    model = TRIAL_ENGINE.load(task, Path("model"), variant, torch, options, {})
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protocol.records.stages import Variant
from runner.trial.engines.base import TrialEngine
from runner.trial.tasks.base import TaskModel, TrialTask


class TransformersEngine(TrialEngine):
    name = "transformers"

    def load(self, task: TrialTask, path: Path, variant: Variant, torch: Any, options: dict[str, Any],
             settings: Mapping[str, Any]) -> TaskModel:
        return task.load(path, variant, torch, options)

    def readback(self, model: TaskModel) -> dict[str, Any]:
        import transformers

        return {"name": self.name, "version": transformers.__version__, "settings": {}}


TRIAL_ENGINE = TransformersEngine()
