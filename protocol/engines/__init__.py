"""The engines isocost knows, found by name: the variant field ``engine`` (default ``transformers``).

An engine is one package that describes itself (:mod:`protocol.engines.base`): its ``__init__`` holds ``ENGINE``,
the host half; its ``trial.py`` (or the module ``trial_module`` names) the trial half, imported only in the trial.
No list names the engines: every package under ``protocol/engines/`` is one, and so is every package in a folder of
``ISOCOST_ENGINES_PATH`` (folders separated as in ``PATH``): how your own engine is added without touching
isocost ([docs/engines.md](docs/engines.md)). Two engines of one name are an error naming both folders.

Example::

    engine_named("onnxruntime", "study.toml, key base.engine").tasks
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from protocol.engines.base import Engine
from protocol.errors import UserError
from protocol.plugins import import_plugin, plugin_packages

DEFAULT_ENGINE = "transformers"
#: Folders of your own engine packages, separated by ``os.pathsep``; each package's ``__init__`` holds ``ENGINE``.
ENGINES_PATH_ENV = "ISOCOST_ENGINES_PATH"
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_FOUND: dict[str, dict[str, Engine]] = {}


def _registry() -> dict[str, Engine]:
    path = os.environ.get(ENGINES_PATH_ENV, "")
    if path in _FOUND:
        return _FOUND[path]
    engines: dict[str, Engine] = {}
    where: dict[str, str] = {}
    for package in plugin_packages(Path(__path__[0]), __name__, ENGINES_PATH_ENV, "isocost_engine_", missing_ok=True):
        engine = getattr(import_plugin(package), "ENGINE", None)
        init = str(package.folder / "__init__.py")
        if not isinstance(engine, Engine):
            raise UserError(f"the engine package {package.folder} defines no ENGINE", init,
                            "Define ENGINE = Engine(...) (protocol.engines.base; docs/engines.md).")
        if not _NAME.match(engine.name) or engine.name.replace("-", "_") != package.folder.name:
            raise UserError(f"engine {engine.name!r} is not a usable name for package {package.folder.name}", init,
                            "Name the engine in lowercase words joined by '-', its package the same with '_'.")
        if engine.name in engines:
            raise UserError(f"two engines are named {engine.name!r}", f"{where[engine.name]} and {package.folder}",
                            f"Rename one, or take its folder out of {ENGINES_PATH_ENV}.")
        if not engine.trial_module:
            engine = replace(engine, trial_module=f"{package.module}.trial")
        engines[engine.name], where[engine.name] = engine, str(package.folder)
    _FOUND[path] = engines
    return engines


def engine_names() -> tuple[str, ...]:
    """Every engine found, the default first."""
    names = tuple(_registry())
    return (DEFAULT_ENGINE, *(name for name in names if name != DEFAULT_ENGINE))


def all_engines() -> tuple[Engine, ...]:
    """Every engine found, in :func:`engine_names` order."""
    return tuple(engine_named(name) for name in engine_names())


def image_stack(stack: str, engine: str) -> str:
    """The image a variant of the study's ``stack`` and ``engine`` runs in: the stack's own, or the engine's
    (``image_stack("cpu", "vllm") == "cpu-vllm"``)."""
    return engine_named(engine).images.get(stack, stack)


def image_stacks(stacks: tuple[str, ...]) -> tuple[str, ...]:
    """The device ``stacks`` (cpu, cuda, rocm), then every engine's own image stack (``cpu-vllm``): what the study's
    ``[images]`` table may name."""
    own = sorted({name for engine in all_engines() for name in engine.images.values()} - set(stacks))
    return (*stacks, *own)


def device_stack(image_stack: str) -> str:
    """The device stack (cpu, cuda, rocm) an image stack serves: ``cpu-vllm`` serves ``cpu``."""
    return image_stack.split("-", 1)[0]


def engine_named(name: str, where: str = "") -> Engine:
    """The engine of that name; an unknown one is an error listing the known ones."""
    engines = _registry()
    if not isinstance(name, str) or name not in engines:
        raise UserError(f"unknown engine {str(name)[:80]!r}", where or "engine",
                        f"Known engines: {', '.join(engine_names())}. Your own engine is a package in a folder of "
                        f"{ENGINES_PATH_ENV} (docs/engines.md).")
    return engines[name]
