"""Which Python interpreter a local trial process runs with: the engine's own environment, or the host's.

An engine whose dependencies conflict with isocost's own (vLLM pins transformers and numpy below the CPU stack's)
names, in its host half (:class:`protocol.engines.base.Engine`), an environment variable for its interpreter and
a default path (``python_env``, ``python_default``: for engine ``vllm``, ``ISOCOST_VLLM_PYTHON`` and
``.venv-vllm/bin/python``). The default is looked for in the working folder, then in this isocost checkout (where
``make vllm`` builds it). Every other engine runs with the host's interpreter. The process launcher asks here per
trial (the spec's variant names the engine) and refuses a campaign, before anything runs, whose engine's
interpreter is missing. Nothing of this comes from the study but the engine's name, which must be a known one.

Example::

    trial_python("vllm", sys.executable)       # "/repo/.venv-vllm/bin/python"
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from protocol.engines import engine_named
from protocol.errors import UserError

#: The isocost checkout this module runs from (the folder holding protocol/ and runner/).
CHECKOUT = Path(__file__).resolve().parents[2]


def own_python(engine_name: str) -> str:
    """The engine's own interpreter as an absolute path (not resolved: a venv's python is a symbolic link that
    must stay one), "" when the engine runs with the host's; a default found nowhere is given as in the working
    folder (:func:`missing_pythons` names it)."""
    engine = engine_named(engine_name)
    named = os.environ.get(engine.python_env, "") if engine.python_env else ""
    if named:
        return os.path.abspath(named)
    if not engine.python_default:
        return ""
    candidates = [Path.cwd() / engine.python_default, CHECKOUT / engine.python_default]
    return os.path.abspath(next((path for path in candidates if path.exists()), candidates[0]))


def trial_python(engine_name: str, host_python: str) -> str:
    """The interpreter a trial of this engine runs with in a local process."""
    return own_python(engine_name) or host_python


def missing_pythons(engine_names: Iterable[str]) -> list[UserError]:
    """One error per engine whose own interpreter does not exist, saying how to build it or name another."""
    errors = []
    for name in sorted(set(engine_names)):
        python = own_python(name)
        if python and not Path(python).exists():
            engine = engine_named(name)
            errors.append(UserError(f"engine {name} runs its trials with {python}, which does not exist",
                                    f"{engine.python_env} (default {engine.python_default})",
                                    f"Build its environment (make {name} in the isocost checkout), or set "
                                    f"{engine.python_env} to the Python of an environment that has it."))
    return errors


#: Run by the engine's interpreter: the required modules it cannot find (found, not imported: quick, no side
#: effect), one per line.
FIND_MODULES = ("import importlib.util, sys\n"
                "for m in sys.argv[1:]:\n    if importlib.util.find_spec(m) is None: print(m)")


def lacking(python: str, modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` that ``python`` cannot find (all of them when it fails to answer); raises
    OSError or subprocess.TimeoutExpired when it cannot be run."""
    import subprocess

    found = subprocess.run([python, "-c", FIND_MODULES, *modules], capture_output=True, text=True, timeout=120,
                           check=False)
    return found.stdout.split() if found.returncode == 0 else list(modules)


def missing_modules(engine_names: Iterable[str], host_python: str) -> list[UserError]:
    """One error per engine whose trial interpreter lacks a module the engine requires (``Engine.requires``),
    found in that interpreter itself (vLLM's own environment, not the host's)."""
    import subprocess

    errors = []
    for name in sorted(set(engine_names)):
        engine = engine_named(name)
        python = trial_python(name, host_python)
        if not engine.requires or not Path(python).exists():
            continue  # nothing to find, or the missing interpreter is missing_pythons' error
        try:
            missing = lacking(python, engine.requires)
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(UserError(f"engine {name}: {python} could not be asked for its modules ({exc})",
                                    "--launcher process", "Check that interpreter runs."))
            continue
        if missing:
            errors.append(UserError(f"engine {name} needs the Python module(s) {', '.join(missing)}, which {python} "
                                    "lacks", "--launcher process",
                                    f"Install them into that environment ({_install_hint(name)}), or drop the "
                                    "engine from the study."))
    return errors


def missing_scenario_modules(engine_names: Iterable[str], host_python: str, modules: Sequence[str], who: str,
                             install: str) -> list[UserError]:
    """One error per trial interpreter (each engine's, :func:`trial_python`) that lacks a module ``who`` needs beside
    the engine's (a server study: :data:`protocol.study.traffic.SERVING_REQUIRES`); ``install`` says how to get them."""
    import subprocess

    by_python: dict[str, list[str]] = {}
    for name in sorted(set(engine_names)):
        by_python.setdefault(trial_python(name, host_python), []).append(name)
    errors = []
    for python, names in by_python.items():
        if not modules or not Path(python).exists():
            continue  # nothing to find, or the missing interpreter is missing_pythons' error
        engines = f"engine {', '.join(names)}"
        try:
            missing = lacking(python, modules)
        except (OSError, subprocess.TimeoutExpired) as exc:
            missing, install = list(modules), f"{install} (it could not be asked: {exc})"
        if missing:
            errors.append(UserError(f"{who} need the Python module(s) {', '.join(missing)}, which {python} lacks "
                                    f"(the interpreter of {engines}'s trials)", "--launcher process",
                                    f"Install them into that environment: {install}."))
    return errors


def _install_hint(name: str) -> str:
    engine = engine_named(name)
    if engine.python_default:
        return f"make {name} in the isocost checkout builds it"
    return "make setup installs the engines isocost ships"



#: Run by a trial interpreter: its torch's build, read from torch/version.py without importing torch (quick):
#: ``rocm``, ``cuda``, ``cpu``, or nothing when it has no torch.
FIND_BUILD = ("import importlib.util, pathlib, re\n"
              "spec = importlib.util.find_spec('torch')\n"
              "text = pathlib.Path(spec.origin).with_name('version.py').read_text() if spec and spec.origin else ''\n"
              "found = dict(re.findall(r\"^(cuda|hip)\\b[^=\\n]*= *'([^']+)'\", text, re.M))\n"
              "print(('rocm' if 'hip' in found else 'cuda' if 'cuda' in found else 'cpu') if text else '')")


def wrong_builds(variants: Iterable[object], host_python: str) -> list[UserError]:
    """One error per trial interpreter whose torch build is not the GPU stack its variants declare (a study on stack
    ``cuda`` under a CPU torch): what the trials would each refuse (``WRONG_BUILD_ERROR``), said before any runs."""
    import subprocess

    stacks: dict[str, set[str]] = {}
    for variant in variants:
        stack = str(getattr(variant, "stack", "cpu"))
        if stack in ("cuda", "rocm"):
            stacks.setdefault(trial_python(str(getattr(variant, "engine", "")), host_python), set()).add(stack)
    errors = []
    for python, wanted in sorted(stacks.items()):
        if not Path(python).exists():
            continue  # missing_pythons' error
        try:
            build = subprocess.run([python, "-c", FIND_BUILD], capture_output=True, text=True, timeout=120,
                                   check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue  # the trial reports what it finds
        for stack in sorted(wanted - {build}):
            errors.append(UserError(
                f"the study's stack is {stack!r}, and the torch of {python} is "
                f"{f'a {build} build' if build else 'missing'}: every trial would be refused (torch build does not "
                "match the study's stack)", "--launcher process",
                f"Run it in the {stack} image (--launcher docker, isocost images build --stack {stack}), or on a host "
                f"whose torch is a {stack} build."))
    return errors
