"""The tables of docs/tasks.md, generated from the tasks themselves (tests/cli/test_docs.py keeps them equal).

``python -m protocol.tasks.docs`` prints the table of every task found (files, metrics, agreement) and each
task's own study keys; with ``ISOCOST_TASKS_PATH`` set it includes your own tasks, so your task's docs come from
its package too.

Example::

    print(task_table())            # | task | each input yields | the model | files of a pass | metrics | …
"""

from __future__ import annotations

from protocol.study.schema import task_key_table
from protocol.tasks import all_tasks


def _code(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def task_table() -> str:
    """One row per task: what each input yields, the model, the files of a pass, the metrics, the agreement."""
    lines = ["| task | each input yields | the model | files of a pass | metrics | agreement with the reference |",
             "|---|---|---|---|---|---|"]
    lines += [f"| `{t.name}` | {t.docs['yields']} | {t.docs['model']} | {_code(t.output_files)} | "
              f"{t.docs['metrics']} | {t.docs['agreement']} |" for t in all_tasks()]
    return "\n".join(lines)


def key_tables() -> dict[str, str]:
    """Each task's own study keys as a table, by task name (tasks without keys of their own left out)."""
    return {t.name: table for t in all_tasks() if (table := task_key_table(t.name))}


if __name__ == "__main__":  # python -m protocol.tasks.docs: the tables to paste into docs/tasks.md
    print(task_table())
    for name, table in key_tables().items():
        print(f"\n{name}:\n\n{table}")
