"""The tasks isocost knows, found by name: the study's ``task`` key (default ``text-classification``).

Each task is one module here (:mod:`protocol.tasks.base` says what a task provides) and one on the trial side
(``runner/trial/tasks/``). Adding a task is adding those two modules and registering them by name.

Example::

    task_named("text-classification", "study.toml, key task").output_files   # ('predictions.jsonl',)
"""

from __future__ import annotations

from typing import Any

from protocol.errors import UserError
from protocol.tasks.base import Task

DEFAULT_TASK = "text-classification"


def _registry() -> dict[str, Task]:
    from protocol.tasks.classification import CLASSIFICATION
    from protocol.tasks.embedding import EMBEDDING
    from protocol.tasks.generation import GENERATION

    return {CLASSIFICATION.name: CLASSIFICATION, EMBEDDING.name: EMBEDDING, GENERATION.name: GENERATION}


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
    return {"outputs": "the files " + ", ".join(task.output_files), **DEFAULT_WORDS,
            **dict(getattr(task, "words", {}))}


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
    return tuple(_registry())


def task_named(name: str, where: str = "") -> Task:
    """The task of that name; an unknown one is an error listing the known ones."""
    tasks = _registry()
    if name not in tasks:
        raise UserError(f"unknown task {name[:80]!r}", where or "task",
                        f"Known tasks: {', '.join(tasks)}.")
    return tasks[name]
