"""What an engine is, for the host: the runtime a variant runs its model with, described by its own package.

An engine (``transformers``, the default; ``onnxruntime``; ``vllm`` …) is a variant field like the batch size: the
study's ``[base] engine`` or a ``[[series]]`` over ``engine``. Its package says which tasks, devices and precisions
it runs, its own settings (the study's ``[engines.NAME]`` table: each key with its type, default, bounds and
help, as the other study keys), the Python modules a trial needs to run it (what ``isocost check`` looks for
before anything runs), and its trial half (``trial.py`` beside it by default, ``trial_module`` otherwise: a
:class:`runner.trial.engines.base.TrialEngine`; imported only inside the trial). The engines are found by name
(:mod:`protocol.engines`).

Example::

    Engine(name="echo", help="…", tasks=("text-classification",))     # its trial half: echo/trial.py
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.study.keys import StudyKey


@dataclass(frozen=True)
class Engine:
    """One engine, host side."""

    #: The study's ``engine`` value: lowercase words joined by ``-``.
    name: str
    #: One line: what runs the model.
    help: str
    #: The module holding ``TRIAL_ENGINE`` (the trial half), imported only inside the trial; empty: the package's
    #: own ``trial`` module (``protocol.engines.NAME.trial``, or your package's), filled in when it is found.
    trial_module: str = ""
    #: The tasks it runs (empty: every task).
    tasks: tuple[str, ...] = ()
    #: The devices and precisions it runs (empty: every one the study allows).
    devices: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    #: Variant fields it cannot honour, with the value it can (``{"compile": False}``): another value is refused.
    fixed: Mapping[str, Any] = field(default_factory=dict)
    #: Its settings: the keys of ``[engines.NAME]``, each ``engines.NAME.KEY`` (``protocol.study.schema.key_rows``).
    settings: tuple[StudyKey, ...] = ()
    #: Python modules the trial imports to run it (the process launcher finds them in the trial's interpreter
    #: before anything runs; a trial that lacks one is refused naming it).
    requires: tuple[str, ...] = ()
    #: The launcher kinds its trials run under (empty: every kind); another is refused before anything runs.
    launchers: tuple[str, ...] = ()
    #: Why it runs under those launchers only, and what would lift that (said when another is refused).
    launchers_why: str = ""
    #: An environment variable naming the Python interpreter its trials run under in a local process, and the
    #: default, relative to the working folder ("" both: the host's own interpreter).
    python_env: str = ""
    python_default: str = ""
    #: The image its trials run in, by the study's stack, where that is not the stack's own image
    #: (``{"cpu": "cpu-vllm"}``: ``images/cpu-vllm``; an image stack is a device stack, ``-``, the engine).
    images: Mapping[str, str] = field(default_factory=dict)
    #: MiB of ``/dev/shm`` its trial needs in a container (0: the engine's default, 64 MiB, is enough).
    container_shm_mib: int = 0
    #: The boolean setting under which the engine runs several batches at once (a server that batches what it is
    #: sent continuously), so a server study may declare ``[traffic] max_batches_in_flight`` above 1; "" for none.
    concurrent: str = ""
    #: Its row of the engines table in docs/engines.md: ``runs`` (tasks, devices) and ``changes`` (what differs).
    docs: Mapping[str, str] = field(default_factory=dict)

    def setting_names(self) -> tuple[str, ...]:
        """Its settings' names (``provider``, not ``engines.onnxruntime.provider``)."""
        return tuple(key.key.rsplit(".", 1)[-1] for key in self.settings)

    def refusal(self, task: str, variant: Mapping[str, Any]) -> str:
        """Why this engine cannot run a variant (its config) of ``task``, "" when it can."""
        if self.tasks and task not in self.tasks:
            return f"engine {self.name} runs {', '.join(self.tasks)}, not {task}"
        if self.devices and variant.get("device") not in self.devices:
            return f"engine {self.name} runs on {', '.join(self.devices)}, not {variant.get('device')}"
        if self.precisions and variant.get("precision") not in self.precisions:
            return f"engine {self.name} runs {', '.join(self.precisions)}, not {variant.get('precision')}"
        for key, value in self.fixed.items():
            if key in variant and variant[key] != value:
                return f"engine {self.name} runs with {key} = {_toml(value)} only, not {_toml(variant[key])}"
        return ""


def _toml(value: Any) -> str:
    return "true" if value is True else "false" if value is False else repr(value).replace("'", '"')
