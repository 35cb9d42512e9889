"""The tasks as the trial runs them, found by the spec's ``task``: load the model, run a batch, write the outputs.

The trial half of a task is the ``TRIAL_TASK`` (a :class:`~runner.trial.tasks.base.TrialTask`) of the module its
host half names in ``trial_module`` (:mod:`protocol.tasks` finds the host half by name, from its folder): for
the tasks shipped with isocost, the modules beside this one. What a pass writes goes through the one
:class:`~runner.trial.tasks.sink.OutputSink`.

Example::

    task = trial_task("text-classification")
    model = task.load(Path("model"), variant, torch, {})
"""

from __future__ import annotations

import importlib

from protocol.tasks import task_named
from runner.trial.tasks.base import TrialTask


def trial_task(name: str) -> TrialTask:
    """The trial half of the task ``name`` (the host refused unknown tasks before any trial started)."""
    module = task_named(name, "the trial spec's task").trial_module
    task = getattr(importlib.import_module(module), "TRIAL_TASK", None)
    if not isinstance(task, TrialTask) or task.name != name:
        raise ValueError(f"{module} holds no TRIAL_TASK named {name!r} (a runner.trial.tasks.base.TrialTask)")
    return task
