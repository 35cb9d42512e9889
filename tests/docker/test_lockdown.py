"""A running trial container, inspected from the outside: isolation is what the launcher promises."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker


def _running_trial_container(client: Any, out: Path, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for container in client.containers.list(filters={"label": "org.isocost.trial_id", "status": "running"}):
            if container.labels.get("org.isocost.trial_dir", "").startswith(str(out)):
                return container
        time.sleep(0.1)
    raise AssertionError(f"no running trial container for {out} within {timeout_s} s")


def test_running_container_is_locked_down(cpu_image: Any, docker_client: Any, workspace: Any, files: Any,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.campaign.run import run_campaign
    from runner.launch.kinds.docker.launcher import DockerLauncher

    # 12 inputs at batch 1, half a second each: the trial runs long enough to be looked at.
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "sleep-per-batch:0.5")
    monkeypatch.setenv("ISOCOST_NOT_ALLOWED", "must-not-reach-the-container")
    out = tmp_path / "out"
    launcher = DockerLauncher(cpu_image.image_id, stack="cpu")
    errors: list[BaseException] = []

    def campaign() -> None:
        try:
            run_campaign(workspace.study("one-b1", batches="[1]"), out, launcher)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=campaign)
    thread.start()
    try:
        container = _running_trial_container(docker_client, out, timeout_s=60)
        attrs = container.attrs
        host = attrs["HostConfig"]
        assert host["NetworkMode"] == "none"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == 512
        assert host["Privileged"] is False
        assert "/tmp" in host["Tmpfs"]
        user = attrs["Config"]["User"]
        assert user and user.split(":")[0] not in ("0", "root")
        env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
        assert env["ISOCOST_FAULT_INJECT"] == "sleep-per-batch:0.5"
        assert env["HF_HUB_OFFLINE"] == "1"
        assert "ISOCOST_NOT_ALLOWED" not in env
        mounts = {m["Destination"]: m for m in attrs["Mounts"]}
        assert set(mounts) == {"/in/corpus.jsonl", "/in/model", "/out"}
        assert mounts["/in/corpus.jsonl"]["RW"] is False
        assert mounts["/in/model"]["RW"] is False
        assert mounts["/out"]["RW"] is True
        assert attrs["Config"]["Labels"]["org.isocost.stack"] == "cpu"
        assert attrs["Image"] == cpu_image.image_id

        # From inside, as the trial's own user: no interface but loopback, nothing writable but /out and /tmp.
        code, output = container.exec_run(["cat", "/proc/net/dev"])
        interfaces = {line.split(":")[0].strip() for line in output.decode().splitlines()[2:]}
        assert code == 0 and interfaces == {"lo"}
        code, output = container.exec_run(["id", "-u"])
        assert code == 0 and output.decode().strip() != "0"
        for target in ("/etc/isocost-probe", "/in/model/probe", "/opt/venv/probe"):
            code, output = container.exec_run(["touch", target])
            assert code != 0, f"{target} is writable"
            assert b"Read-only file system" in output or b"Permission denied" in output
        code, _ = container.exec_run(["touch", "/out/.probe", "/tmp/probe"])
        assert code == 0
        container.exec_run(["rm", "-f", "/out/.probe"])
        code, output = container.exec_run(["grep", "^CapEff", "/proc/self/status"])
        assert output.decode().split()[1] == "0000000000000000"
        code, output = container.exec_run(["grep", "^NoNewPrivs", "/proc/self/status"])
        assert output.decode().split()[1] == "1"
    finally:
        thread.join(timeout=120)
    assert not errors, errors
    rows = files.rows(out)
    assert [r["status"] for r in rows] == ["ok"], rows[0]["notes"]
