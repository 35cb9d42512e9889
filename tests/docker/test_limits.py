"""The container limits on a real engine: what the launcher asks for is what the kernel enforces.

A container is created with the launcher's own options (``_create_kwargs``), then runs a probe
instead of a trial: it writes past the file-size limit, tries to execute a file from /tmp, and
the engine's inspect output shows the memory and CPU limits derived from ``docker info``.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

PROBE = r"""
import json, os, subprocess
report = {}
try:
    with open("/out/big.bin", "wb") as handle:
        handle.write(b"0" * (3 * 2**20))
    report["write"] = "written"
except OSError as exc:
    report["write"] = exc.errno
with open("/tmp/run.sh", "w") as handle:
    handle.write("#!/bin/sh\necho ran\n")
os.chmod("/tmp/run.sh", 0o755)
try:
    subprocess.run(["/tmp/run.sh"], check=True)
    report["exec"] = "ran"
except PermissionError:
    report["exec"] = "refused"
print(json.dumps(report))
"""


def test_the_kernel_enforces_the_launchers_limits(cpu_image: Any, docker_client: Any, tmp_path: Path) -> None:
    from runner.launch.daemon.limits import ContainerLimits
    from runner.launch.kinds.docker.launcher import DockerLauncher
    from runner.launch.launcher import TrialPaths

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "x", "label": "y"}\n')
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    trial_dir = tmp_path / "trials" / "001-probe"
    trial_dir.mkdir(parents=True)
    for path in (tmp_path, corpus, model, model / "config.json", trial_dir.parent):
        path.chmod(0o755 if path.is_dir() else 0o644)
    launcher = DockerLauncher(cpu_image.image_id, stack="cpu", limits=ContainerLimits(file_size_bytes=2**20))
    owner = launcher._lend_trial_dir(trial_dir)
    kwargs = launcher._create_kwargs(TrialPaths(trial_dir=trial_dir, corpus=corpus, model=model), trial_dir)
    kwargs.update(entrypoint=["python3", "-c", PROBE], command=[])
    container = docker_client.containers.create(**kwargs)
    try:
        container.start()
        assert container.wait(timeout=120)["StatusCode"] == 0, container.logs().decode()
        report = json.loads(container.logs(stderr=False).decode().strip().splitlines()[-1])
        container.reload()
        host = container.attrs["HostConfig"]
    finally:
        container.remove(force=True)
        launcher._return_trial_dir(trial_dir, owner)
    assert report["write"] == errno.EFBIG  # "File too large": the write stopped at the bound
    assert (trial_dir / "big.bin").stat().st_size <= 2**20
    assert report["exec"] == "refused"  # /tmp is noexec
    info = docker_client.info()
    assert host["Memory"] == int(launcher.limits.mem_limit) > 0
    assert host["Memory"] < info["MemTotal"]  # room left for the host CLI, the engine and the kernel
    assert host["MemorySwap"] == host["Memory"]
    assert host["NanoCpus"] == info["NCPU"] * 10**9
    assert {"Name": "fsize", "Soft": 2**20, "Hard": 2**20} in host["Ulimits"]
    assert "noexec" in host["Tmpfs"]["/tmp"]
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-file": "1", "max-size": str(64 * 2**20)}}
    facts = launcher.describe()
    assert facts["mem_limit"] == str(host["Memory"]) and "derived" in facts["mem_limit_source"]
