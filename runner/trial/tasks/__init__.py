"""The tasks as the trial runs them, found by the spec's ``task``: load the model, run a batch, write the outputs.

Each module here is the trial side of one task of ``protocol.tasks`` and provides ``TRIAL_TASK``: ``load``
(the checkpoint under the variant's settings: a model with ``tokenize``, ``predict``, ``predict_encoded``,
``untruncated_lengths``, ``describe`` and ``forward_events``), ``output_files`` (what a pass writes) and
``sink(out)`` (a context manager that opens them and writes one batch's outputs: ``lines(ids, outputs)`` gives
the per-id text a fault injection may corrupt, ``write(text, outputs)`` writes and flushes it, with any other
file the task keeps). A model may also have ``finish_pass(out)``: work after the measured pass, outside
``pass_s`` and inside ``write_s`` (an embedding's queries), returning what the manifest records of it.

Example::

    task = trial_task("text-classification")
    model = task.load(Path("model"), variant, torch, {})
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "text-classification": "runner.trial.tasks.classification",
    "sentence-embedding": "runner.trial.tasks.embedding",
    "text-generation": "runner.trial.tasks.generation",
}


def trial_task(name: str) -> Any:
    """The trial side of the task ``name`` (the host refused unknown tasks before any trial started)."""
    if name not in _MODULES:
        raise ValueError(f"this trial runner knows no task {name!r} (known: {', '.join(_MODULES)})")
    return importlib.import_module(_MODULES[name]).TRIAL_TASK
