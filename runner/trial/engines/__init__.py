"""The engines as the trial runs them, found by the variant's ``engine``: load the task's model, read it back.

The trial half of an engine is the ``TRIAL_ENGINE`` (a :class:`~runner.trial.engines.base.TrialEngine`) of the
module its host half names in ``trial_module`` (:mod:`protocol.engines` finds the host half by name, from its
folder): for the engines shipped with isocost, the modules beside this one.

Example::

    engine = trial_engine("transformers")
    model = engine.load(task, Path("model"), variant, torch, {}, {})
"""

from __future__ import annotations

import importlib

from protocol.engines import engine_named
from runner.trial.engines.base import TrialEngine


def trial_engine(name: str) -> TrialEngine:
    """The trial half of the engine ``name`` (the host refused unknown engines before any trial started)."""
    module = engine_named(name, "the trial spec's variant engine").trial_module
    engine = getattr(importlib.import_module(module), "TRIAL_ENGINE", None)
    if not isinstance(engine, TrialEngine) or engine.name != name:
        raise ValueError(f"{module} holds no TRIAL_ENGINE named {name!r} (a runner.trial.engines.base.TrialEngine)")
    return engine
