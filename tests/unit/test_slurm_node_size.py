"""What `isocost check` knows of a Slurm cluster's node sizes before `run` submits anything (sinfo %m and %c).

sbatch refuses a job whose ``--mem`` (or ``--cpus-per-task``, or ``--mem-per-cpu`` × CPUs) no node of the partition
has; :func:`check_node_size` refuses it first, from the rows sinfo lists. The real cluster's case (a 1,000 MB node
and ``--mem=10T``) is tests/slurm/test_slurm_campaigns.py, which runs in CI.
"""

from __future__ import annotations

import os

import pytest

from protocol.errors import UserError
from runner.launch.kinds.slurm.commands import NodeRow, SlurmCommands
from runner.launch.kinds.slurm.preflight import check_node_size


def _rows(*sizes: tuple[int | None, int | None]) -> list[NodeRow]:
    return [NodeRow(f"n{i}", "debug", True, "up", (), "idle", memory_mb=mem, cpus=cpus)
            for i, (mem, cpus) in enumerate(sizes)]


@pytest.mark.parametrize("args, words", [
    (("--mem=10T",), "the memory --slurm-arg=--mem=10T asks for (10,485,760 MB; the largest node has 1,000 MB)"),
    (("--mem=2G",), "(2,048 MB; the largest node has 1,000 MB)"),
    (("--mem=1001",), "(1,001 MB; the largest node has 1,000 MB)"),
    (("--cpus-per-task=2", "--mem-per-cpu=600M"), "(1,200 MB × 2 CPUs; the largest node has 1,000 MB)"),
    (("--cpus-per-task=3",), "has the 3 CPUs --slurm-arg=--cpus-per-task=3 asks for (most: 2)"),
])
def test_a_request_no_node_has_is_refused_naming_the_largest(args, words):
    with pytest.raises(UserError) as info:
        check_node_size(args, _rows((1000, 2), (500, 1)), "debug")
    assert words in info.value.what and info.value.where == "--slurm-arg"
    assert "sinfo -N -l" in info.value.fix


def test_the_fix_names_what_fits():
    with pytest.raises(UserError) as info:
        check_node_size(("--mem=10T",), _rows((1000, 2)), "debug")
    assert "Ask for at most 1000M (--slurm-arg=--mem=1000M)" in info.value.fix


@pytest.mark.parametrize("args", [("--mem=1000",), ("--mem=0",), ("--mem=900M",), ("--cpus-per-task=2",),
                                  ("--mem-per-cpu=500", "--cpus-per-task=2"), ("--exclusive",), ()])
def test_requests_a_node_has_pass(args):
    check_node_size(args, _rows((1000, 2), (500, 1)), "debug")


def test_nodes_of_unknown_size_are_not_judged():
    check_node_size(("--mem=10T", "--cpus-per-task=999"), _rows((None, None)), "debug")


def test_sinfo_lists_memory_and_cpus(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\nprintf 'gpu01|gpu*|up|gpu:a100:4|mixed|1000|2\\n"
                                   "gpu02|gpu*|up|(null)|idle|257000+|64\\n'\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    rows = SlurmCommands().nodes()
    assert [(r.node, r.memory_mb, r.cpus) for r in rows] == [("gpu01", 1000, 2), ("gpu02", 257000, 64)]


def test_the_shared_directory_is_checked_as_the_preflight_does(tmp_path):
    """`check --launcher slurm --slurm-shared DIR --out OUT` and run's pre-flight call the same check."""
    from runner.launch.kinds.slurm.options import SlurmOptions
    from runner.launch.kinds.slurm.preflight import check_shared

    missing = SlurmOptions.from_values({"shared": str(tmp_path / "nowhere")})
    with pytest.raises(UserError) as info:
        check_shared(missing, None)
    assert "does not exist here" in info.value.what and info.value.where == "--slurm-shared"
    (tmp_path / "shared").mkdir()
    options = SlurmOptions.from_values({"shared": str(tmp_path / "shared")})
    with pytest.raises(UserError) as info:
        check_shared(options, tmp_path / "out")
    assert "is outside the shared directory" in info.value.what and info.value.where == "--out"
    assert check_shared(options, tmp_path / "shared" / "out") == (tmp_path / "shared").resolve()
    assert check_shared(options, None) == (tmp_path / "shared").resolve()
