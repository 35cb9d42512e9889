"""The tasks isocost knows, found by name: the study's ``task`` key (default ``text-classification``).

A task is one package that describes itself (:mod:`protocol.tasks.base` says what it provides): its
``__init__`` holds ``TASK``, the host half, which names its trial half (``trial_module``: the module with
``TRIAL_TASK``, imported only inside the trial). No list names the tasks: every package under
``protocol/tasks/`` is one, and so is every package in a folder of ``ISOCOST_TASKS_PATH`` (folders separated
as in ``PATH``), which is how your own task is added without touching isocost ([docs/tasks.md](docs/tasks.md)).
Two tasks of one name are an error naming both folders.

Example::

    task_named("text-classification", "study.toml, key task").output_files   # ('predictions.jsonl',)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.plugins import import_plugin, plugin_packages
from protocol.tasks.base import Task

DEFAULT_TASK = "text-classification"
#: Folders of your own task packages, separated by ``os.pathsep``; each package's ``__init__`` holds ``TASK``.
TASKS_PATH_ENV = "ISOCOST_TASKS_PATH"
#: The module-name prefix an outside task package is imported under (its folder name follows).
OUTSIDE_PREFIX = "isocost_task_"

_FOUND: dict[str, dict[str, Task]] = {}


def _registry() -> dict[str, Task]:
    """Every task found, by name: protocol/tasks/ first, then ``ISOCOST_TASKS_PATH`` (read on each call)."""
    path = os.environ.get(TASKS_PATH_ENV, "")
    if path in _FOUND:
        return _FOUND[path]
    tasks: dict[str, Task] = {}
    where: dict[str, str] = {}
    for package in plugin_packages(Path(__path__[0]), __name__, TASKS_PATH_ENV, OUTSIDE_PREFIX, missing_ok=True):
        folder = str(package.folder)
        task = getattr(import_plugin(package), "TASK", None)
        if task is None:
            raise UserError(f"the task package {folder!r} has no TASK", folder,
                            "Its __init__.py must define TASK, the task's host half (docs/tasks.md).")
        if task.name in tasks:
            raise UserError(f"two tasks are named {task.name!r}", f"{where[task.name]} and {folder}",
                            f"Rename one, or take its folder out of {TASKS_PATH_ENV}.")
        tasks[task.name], where[task.name] = task, folder
    _FOUND[path] = tasks
    return tasks


def study_task(study: Any) -> Task:
    """The task a (validated) study declares."""
    return task_named(getattr(study, "task", DEFAULT_TASK))


def read_task_corpus(path: Any, task: Task) -> Any:
    """The corpus as the task reads it: its label rule and its own per-input fields."""
    from protocol.corpus import read_corpus

    return read_corpus(path, require_label=task.labels_required, extra_fields=task.corpus_fields)


#: How reports name a task's outputs, the units its metric averages over, and what agreeing means, where a task's
#: own ``words`` name none: neutral words, never another task's (a generation pass yields no labels).
DEFAULT_WORDS = {
    "done": "processed",
    "units": "inputs",
    "agreement": "share of inputs whose output agrees with the reference variant's under the study's rule",
}


def task_words(task: Task) -> dict[str, str]:
    """The task's words for reports (:data:`DEFAULT_WORDS` where it names none; its outputs: its files)."""
    return {"outputs": "the files " + ", ".join(task.output_files), **DEFAULT_WORDS, **dict(getattr(task, "words", {}))}


def describe_task(study: Any) -> str:
    """One sentence for summaries and memos: what each pass yields, its metric, and what agreeing means."""
    task = study_task(study)
    words = task_words(task)
    return (f"Task `{task.name}`: each pass yields {words['outputs']}, scored by {study.quality.metric} over the "
            f"study's {words['units']}; agreement with the reference is the {words['agreement']}.")


def index_fields(record: Any, fields: tuple[str, ...]) -> list[str]:
    """A record's task fields as ``corpus_index.csv`` holds them: JSON strings (a cell that opens with a quote
    never reads as a spreadsheet formula, and any text round-trips exactly)."""
    import json

    return [json.dumps(record.field(name), ensure_ascii=False) for name in fields]


def task_names() -> tuple[str, ...]:
    """Every task found, the default first."""
    names = tuple(_registry())
    return (DEFAULT_TASK, *(name for name in names if name != DEFAULT_TASK))


def all_tasks() -> tuple[Task, ...]:
    """Every task found, in :func:`task_names` order."""
    return tuple(task_named(name) for name in task_names())


def task_named(name: str, where: str = "") -> Task:
    """The task of that name; an unknown one is an error listing the known ones."""
    tasks = _registry()
    if name not in tasks:
        searched = os.environ.get(TASKS_PATH_ENV, "")
        raise UserError(f"unknown task {name[:80]!r}", where or "task",
                        f"Known tasks: {', '.join(tasks)}. Your own task is a package in a folder of {TASKS_PATH_ENV} "
                        f"({'now ' + repr(searched[:200]) if searched else 'not set'}; docs/tasks.md).")
    return tasks[name]
