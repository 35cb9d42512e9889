"""Plugin packages found by name: the one way tasks, launchers and engines are discovered.

A plugin (a task, a launcher, an engine) is a package that describes itself in its ``__init__.py``. The built-in
ones are the packages of one folder inside isocost; a user adds their own as packages in the folders of an
environment variable (separated by ``os.pathsep``, as in ``PATH``), imported under a module-name prefix of their
own, without touching isocost. Each plugin kind's own module (:mod:`protocol.tasks`, :mod:`runner.launch.launcher`,
:mod:`protocol.engines`) reads what the package defines and checks its name; this module only finds and imports.

A package is a folder with an ``__init__.py``, not a symbolic link, whose name does not start with ``_``. An
outside package is imported once per version of its ``__init__.py`` (its classes stay the same objects between
calls, and an edited one is read again).

Example::

    found = plugin_packages(Path(__file__).parent, __name__, "ISOCOST_TASKS_PATH", "isocost_task_")
    modules = [import_plugin(p) for p in found]
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from protocol.errors import UserError


@dataclass(frozen=True)
class PluginPackage:
    """One package found: its module name, its folder and whether it ships with isocost."""

    module: str
    folder: Path
    builtin: bool


def _packages(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if (p / "__init__.py").is_file() and not p.is_symlink() and not p.name.startswith("_"))


def plugin_packages(builtin: Path, builtin_module: str, env_var: str, prefix: str, *,
                    missing_ok: bool = False) -> list[PluginPackage]:
    """The built-in packages (under ``builtin``, module ``builtin_module.<name>``), then those of the folders in
    ``env_var`` (module ``prefix + <name>``), each group in name order. A folder of ``env_var`` that is not a
    directory is a UserError, or skipped with ``missing_ok`` (a container sees none of the host's folders)."""
    found = [PluginPackage(f"{builtin_module}.{p.name}", p, True) for p in _packages(builtin)]
    for entry in filter(str.strip, os.environ.get(env_var, "").split(os.pathsep)):
        folder = Path(entry).expanduser()
        if not folder.is_dir():
            if missing_ok:
                continue
            raise UserError(f"{env_var} names {entry[:200]!r}, which is not a directory", env_var,
                            "Name folders that hold plugin packages, or unset it.")
        found.extend(PluginPackage(prefix + p.name.replace("-", "_"), p, False) for p in _packages(folder))
    return found


def import_plugin(package: PluginPackage) -> ModuleType:
    """The package's module: a built-in one by its name, an outside one from its folder (re-imported when its
    ``__init__.py`` changed). An import error is the package's own and propagates."""
    if package.builtin:
        return importlib.import_module(package.module)
    init = (package.folder / "__init__.py").resolve()
    stamp = (str(init), init.stat().st_mtime_ns)
    module = sys.modules.get(package.module)
    if module is not None and getattr(module, "__isocost_stamp__", None) == stamp:
        return module
    spec = importlib.util.spec_from_file_location(package.module, init,
                                                  submodule_search_locations=[str(package.folder)])
    if spec is None or spec.loader is None:
        raise UserError(f"package {package.folder} cannot be imported", str(init), "Check the folder.")
    module = importlib.util.module_from_spec(spec)
    module.__isocost_stamp__ = stamp  # type: ignore[attr-defined]
    sys.modules[package.module] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[package.module]
        raise
    return module
