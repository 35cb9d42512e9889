"""The launcher interface: the campaign hands over a trial, a launcher runs it, and owns the rest of its life.

A launcher (process, docker, remote docker, Slurm) is a plugin: the campaign, resume, replay and
``isocost check`` call these methods and never ask which kind it is.

- ``describe()`` facts for campaign.json; ``resume_identity()`` the part of them a ``--resume`` must find
  unchanged (kind and image; for Slurm also the runtime and the pinned node); ``adopt()`` takes
  back what a resumed campaign pinned (the node);
- ``preflight()`` the checks before the first trial (inputs readable by the trial, a compute node
  that reaches the shared directory…): a UserError there leaves ``--out`` as it was;
- ``trial_view()``, ``image_fields()`` and ``run()``: one trial (``run`` raises
  :class:`HostInterrupt` with the trial's result when the host CLI is stopped, Ctrl-C included,
  or the host is lost; ``lost`` then says why);
- ``recover_leftovers()`` before a resume, and ``stop_leftover()`` for one trial that outlived the
  host CLI (a process, a container, a Slurm job), so it writes nothing after its row;
- ``summary()`` and ``check_line()`` what ``isocost run`` and ``isocost check`` print about it.

:class:`LauncherBase` gives every method a default (its leftover stop is the trial's process,
:mod:`runner.launch.leftover`; a kind with its own leftovers, a container or a Slurm job, stops them itself).
The records passed to and from a launcher: :class:`TrialPaths`, :class:`Placement`, :class:`LaunchResult`
(:class:`HostInterrupt` carries it when the host stopped).

A launcher kind (``process``, ``docker``, ``slurm`` …) is one package whose ``__init__.py`` defines
``KIND``, a :class:`LauncherKind`: its name and one line of help, its command-line options
(:class:`LauncherOption`, given as ``--<kind>-<name>``), the record it writes as ``launcher.json``, how
it is chosen for a study (``choose``; ``auto`` asks each kind that takes part, in ``auto_order``), and how
it replays a bundle's trials (``replay``). Everything after the choice calls the launcher's own methods.
The kinds are the packages of ``runner/launch/kinds/`` and of every folder named in the environment
variable ``ISOCOST_LAUNCHERS_PATH`` (folders separated by ``os.pathsep``; read when a command starts): a new
launcher is a new package there, nothing else changes (docs/launchers.md).

Example::

    class Quiet(LauncherBase):
        name = "quiet"
        def describe(self): return {"kind": "quiet"}
        def run(self, paths, timeout_s): return LaunchResult(exit_code=0)

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
from runner.launch.leftover import stop_leftover as stop_trial_leftover

if TYPE_CHECKING:
    from protocol.records.stages import TrialSpec
    from protocol.study.load import Study

@dataclass(frozen=True)
class TrialPaths:
    """Host-side paths of one trial. The launcher maps them into the trial's view."""

    trial_dir: Path  # spec.json, predictions.jsonl, manifest.json, status.json, trial.log
    corpus: Path
    model: Path

    @property
    def log(self) -> Path:
        return self.trial_dir / "trial.log"


@dataclass(frozen=True)
class Placement:
    """Where a cluster scheduler put one trial (launchers without a scheduler leave it out).

    ``queue_s``: submitted → started; ``node``, ``job_id`` and ``allocated_gpu`` (the scheduler's
    card index or indices, with the card's UUID when it was read inside the job).
    """

    queue_s: float | None = None
    node: str = ""
    job_id: str = ""
    allocated_gpu: str = ""


@dataclass(frozen=True)
class LaunchResult:
    """What the host saw from the outside. The trial's own account is in status.json."""

    exit_code: int | None
    timed_out: bool = False
    interrupted: bool = False  # the host stopped it (Ctrl-C on the host CLI)
    oom_killed: bool = False  # the kernel/engine killed it for memory
    launch_overhead_s: float | None = None  # launch until the trial's own clock started
    wall_s: float | None = None
    image_id: str = ""
    image_digest: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    placement: Placement | None = None


class HostInterrupt(Exception):
    """The user interrupted the host CLI while a trial ran; carries that trial's result."""

    def __init__(self, result: LaunchResult) -> None:
        super().__init__("interrupted")
        self.result = result


class Launcher(Protocol):
    """Runs ``python -m runner.trial SPEC OUT`` somewhere fresh and waits for it; owns the trial's whole life."""

    name: str
    lost: str

    def describe(self) -> dict[str, str]:
        """Facts recorded in campaign.json (kind, engine or interpreter, image)."""
        ...

    def resume_identity(self) -> dict[str, str]:
        """The facts a resumed campaign must find unchanged (compared with campaign.json's launcher)."""
        ...

    def adopt(self, started_with: Mapping[str, str]) -> None:
        """On --resume: take back what the campaign pinned when it started (campaign.json's launcher)."""
        ...

    def preflight(self, study: Study, out: Path) -> str:
        """Everything checked before the first trial of a campaign in ``out``; UserError with the fix. Returns a
        line for the progress output ("" when there is nothing to say)."""
        ...

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        """(corpus path, model path, output dir) as the trial will see them."""
        ...

    def image_fields(self) -> tuple[str, str, str]:
        """(image_ref, image_id, image_digest) passed into the spec; empty for processes."""
        ...

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        ...

    def recover_leftovers(self, campaign_root: Path) -> list[str]:
        """Before a resume: stop what a stopped host CLI left running; one line per thing found."""
        ...

    def stop_leftover(self, trial_dir: Path) -> LaunchResult | None:
        """Stop one trial that outlived the host CLI; returns once it can write nothing more, with what the
        launcher saw of its end (None: nothing more than its directory says)."""
        ...

    def summary(self) -> str:
        """One line for ``isocost run``: which launcher runs the trials, and with what."""
        ...

    def check_line(self) -> tuple[str, str]:
        """(item, text) for ``isocost check``'s report when this launcher is usable."""
        ...


class LauncherBase:
    """Defaults for every part of a launcher's life but ``describe`` and ``run``."""

    name = "base"
    lost = ""

    def describe(self) -> dict[str, str]:
        return {"kind": self.name}

    def resume_identity(self) -> dict[str, str]:
        facts = self.describe()
        return {"kind": facts.get("kind", ""), "image_id": facts.get("image_id", "")}

    def adopt(self, started_with: Mapping[str, str]) -> None:
        return None

    def preflight(self, study: Study, out: Path) -> str:
        return ""

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        return str(paths.corpus), str(paths.model), str(paths.trial_dir)

    def image_fields(self) -> tuple[str, str, str]:
        return "", "", ""

    def recover_leftovers(self, campaign_root: Path) -> list[str]:
        return []

    def stop_leftover(self, trial_dir: Path) -> LaunchResult | None:
        stop_trial_leftover(trial_dir)
        return None

    def summary(self) -> str:
        return self.name

    def check_line(self) -> tuple[str, str]:
        return "launcher", self.summary()


def placement_values(launcher: str, result: LaunchResult) -> tuple[dict[str, Any], dict[str, str]]:
    """The raw row's placement cells (queue_s, node, job_id, allocated_gpu) and, for each empty one, its reason."""
    placement = result.placement or Placement()
    values: dict[str, Any] = {"queue_s": placement.queue_s, "node": placement.node or None,
                              "job_id": placement.job_id or None, "allocated_gpu": placement.allocated_gpu or None}
    if result.placement is None:
        why = f"launcher {launcher!r} has no scheduler queue"
        return values, {name: why for name in values}
    reasons = {"queue_s": "the job's submit or start time was not observed", "node": "no node reported",
               "job_id": "the job was never submitted",
               "allocated_gpu": "no GPU allocated to the job (none asked for)"}
    return values, {name: why for name, why in reasons.items() if values[name] is None}


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
    daemon_timeout_s: float = 5.0
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
                        "Define KIND = LauncherKind(...) (runner.launch.launcher; docs/launchers.md).")
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
