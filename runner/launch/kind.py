"""What a launcher kind says of itself, and how every kind is found by name from its folder.

A launcher kind (``process``, ``docker``, ``slurm`` …) is one package whose ``__init__.py`` defines
``KIND``, a :class:`LauncherKind`: its name and one line of help, its command-line options
(:class:`LauncherOption`, given as ``--<kind>-<name>``), the record it writes as ``launcher.json``, how
it is chosen for a study (``choose``; ``auto`` asks each kind that takes part, in ``auto_order``), and how
it replays a bundle's trials (``replay``). Everything after the choice (the campaign, resume, leftovers,
``isocost check``) calls the launcher's own methods (:mod:`runner.launch.base`).

The kinds are the packages of ``runner/launch/kinds/`` and of every folder named in the environment
variable ``ISOCOST_LAUNCHERS_PATH`` (folders separated by ``os.pathsep``; read when a command starts): a new
launcher is a new package there, nothing else changes (docs/launchers.md).

Example::

    launcher_kind("slurm", "--launcher").options[0].name      # "partition"
    sorted(launcher_kinds())                                   # ['docker', 'process', 'slurm']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from protocol.engines import image_stack
from protocol.errors import UserError
from protocol.plugins import PluginPackage, import_plugin, plugin_packages

if TYPE_CHECKING:
    from protocol.records.stages import TrialSpec
    from protocol.study.load import Study
    from runner.launch.base import Launcher

#: Folders of extra launcher packages, besides the built-in ones (``runner/launch/kinds/``).
LAUNCHERS_ENV = "ISOCOST_LAUNCHERS_PATH"
BUILTIN_FOLDER = Path(__file__).resolve().parent / "kinds"
#: Names that are choices of ``--launcher`` but no kind: the automatic choice, and the originals' kind (replay).
RESERVED_NAMES = ("auto", "original")
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class LauncherOption:
    """One option of a launcher kind: ``--<kind>-<name> METAVAR`` (``kind`` is the value's type: str or float)."""

    name: str
    metavar: str
    help: str
    multiple: bool = False
    kind: str = "str"


class LockedImage(Protocol):
    """What a kind reads of the image lock (``images/images.lock``) for one stack."""

    @property
    def image_ref(self) -> str: ...

    @property
    def image_id(self) -> str: ...

    @property
    def repo_digest(self) -> str: ...


@dataclass(frozen=True)
class LauncherChoice:
    launcher: Launcher
    notice: str  # why this launcher, when it is not the obvious one ("" otherwise)


@dataclass(frozen=True)
class Decline:
    """A kind that ``auto`` asked and that cannot run the study here: why, and how to make it able to."""

    reason: str
    hint: str


@dataclass(frozen=True)
class ChoiceRequest:
    """What ``isocost run --launcher KIND`` was given, with the study parsed once."""

    study: Study
    image: str | None
    options: Mapping[str, Any] = field(default_factory=dict)  # this kind's options, by name
    lock_path: Path = Path("images/images.lock")
    locked: Callable[[str], LockedImage | None] = lambda stack: None  # the lock's record of a stack
    engine_timeout_s: float = 5.0
    answers: Callable[[float], tuple[bool, str]] | None = None
    declined: tuple[Decline, ...] = ()  # under ``auto``: the kinds asked before this one, and why they could not

    def stack(self) -> str:
        """The one image stack every variant of the study runs in (one image per campaign): the study's stack, or
        its engine's own image (``cpu-vllm``)."""
        stacks = sorted({image_stack(variant.stack, variant.engine) for variant in self.study.variants()})
        if len(stacks) != 1:
            raise UserError(
                f"the study's variants run in several images ({', '.join(stacks)}); one campaign runs one image",
                str(self.study.path),
                "Split the study by image (one study per stack or engine image; `isocost decide` weighs several "
                "campaigns together), or use --launcher process.",
            )
        return stacks[0]


@dataclass(frozen=True)
class ReplayRequest:
    """What a replay asks of a kind: the originals' kind and specs."""

    original: str  # the originals' launcher kind ("mixed" when they differ)
    specs: Mapping[str, TrialSpec]

    def images(self) -> list[str]:
        """The images the originals ran (repo digest, else image ID), sorted; empty for processes."""
        return sorted({spec.image_digest or spec.image_id for spec in self.specs.values()} - {""})


@dataclass(frozen=True)
class LauncherKind:
    """One kind of launcher, as its package describes it (see the module docstring)."""

    name: str
    help: str  # one line: where each trial runs (``--launcher`` help and docs/launchers.md)
    choose: Callable[[ChoiceRequest], LauncherChoice]
    replay: Callable[[ReplayRequest], tuple[Launcher, dict[str, Any]]]
    record: type  # its launcher.json record: a frozen dataclass of optional fields, written with ``kind``
    options: tuple[LauncherOption, ...] = ()
    auto: Callable[[ChoiceRequest], LauncherChoice | Decline] | None = None  # None: ``auto`` never picks it
    auto_order: int = 100  # ``auto`` asks the kinds in this order; the first that does not decline runs
    order: int = 100  # where it is listed (``--launcher`` choices, docs)
    replay_choice: bool = True  # offered as ``isocost replay --launcher NAME``
    hosts: str = ""  # why ``--host`` (Docker engines, docs/hosts.md) cannot run with it; "" when it can
    requires: str = ""  # the environment variable that makes its skipped checks failures in CI
    scenarios: tuple[str, ...] = ("offline",)  # the study scenarios its trials run (``server``: LoadGen traffic)


def _load(found: PluginPackage) -> LauncherKind:
    """Import one launcher package and return its ``KIND`` (checked)."""
    module, package = import_plugin(found), found.folder
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, LauncherKind):
        raise UserError(f"launcher package {package} defines no KIND", str(package / "__init__.py"),
                        "Define KIND = LauncherKind(...) (runner.launch.kind; docs/launchers.md).")
    if not _NAME.match(kind.name) or kind.name.replace("-", "_") != package.name or kind.name in RESERVED_NAMES:
        raise UserError(f"launcher {kind.name!r} is not a usable name for package {package.name}",
                        str(package / "__init__.py"),
                        "Name the kind in lowercase words joined by '-', its package the same with '_' "
                        f"(never {' or '.join(RESERVED_NAMES)}).")
    return kind


def launcher_kinds() -> dict[str, LauncherKind]:
    """Every launcher kind found, by name, in listing order. UserError when two packages claim one name."""
    found: dict[str, LauncherKind] = {}
    for package in plugin_packages(BUILTIN_FOLDER, "runner.launch.kinds", LAUNCHERS_ENV, "isocost_launchers."):
        kind = _load(package)
        if kind.name in found:
            raise UserError(f"two launcher packages are named {kind.name!r}", str(package.folder),
                            f"Rename one, or drop its folder from {LAUNCHERS_ENV}.")
        found[kind.name] = kind
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def launcher_kind(name: str, where: str = "--launcher") -> LauncherKind:
    """The kind of that name; an unknown one is a UserError listing the known ones."""
    kinds = launcher_kinds()
    if name not in kinds:
        raise UserError(f"unknown launcher {name[:80]!r}", where, f"Use one of: {', '.join(kinds)}.")
    return kinds[name]


def kind_names(*, auto: bool = False, replay: bool = False) -> tuple[str, ...]:
    """The ``--launcher`` choices: ``auto`` and every kind; for replay ``original`` and the kinds it offers."""
    kinds = launcher_kinds().values()
    if replay:
        return ("original", *(k.name for k in kinds if k.replay_choice))
    return (*(("auto",) if auto else ()), *(k.name for k in kinds))
