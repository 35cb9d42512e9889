"""``isocost hosts check`` GPU pre-flight: the probe container's options, its answer judged, the probe itself
under CPU torch posing as CUDA and ROCm, and the CLI with a fake engine."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocol.records.codec import to_dict

docker = pytest.importorskip("docker")

from fakegpu import GPU_UUID, FakeNvml, pose_as_gpu  # noqa: E402
from test_docker_launcher_logic import IMAGE_ID, FakeClient, FakeContainer, FakeImage  # noqa: E402

from runner.hosts.gpucheck import judge, run_probe  # noqa: E402


class ProbeContainer(FakeContainer):
    def logs(self, stdout: bool = True, stderr: bool = True) -> bytes:
        return (json.dumps(self.client.answer) + "\n").encode() if stdout else b""


class ProbeClient(FakeClient):
    def __init__(self, answer: dict[str, Any], stack: str = "cuda") -> None:
        super().__init__(images={IMAGE_ID: FakeImage(stack=stack)}, runtimes={"runc": {}, "nvidia": {}})
        self.answer = answer
        self.containers.create = self._create  # type: ignore[method-assign]

    def _create(self, **kwargs: Any) -> ProbeContainer:
        container = ProbeContainer(self, kwargs)
        self.containers.created.append(container)
        return container


def answer(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "torch": "2.11.0+cu128", "build": "cuda", "gpu_visible": True, "gpu_count": 1, "compute_ok": True,
        "facts": {"gpu_name": "NVIDIA H200", "gpu_uuid": GPU_UUID, "driver_version": "570.124.06",
                  "compat": {"status": "listed", "detail": "driver 570.124.06 ≥ 570.26, the minimum for CUDA 12.8",
                             "table": "cuda-min-driver.csv", "data_version": "2026-09.1"}},
    }
    base.update(overrides)
    return base


def test_probe_container_gets_the_gpu_like_a_trial_and_is_locked_down(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    from runner.launch.daemon.gpu import gpu_options

    client = ProbeClient(answer())
    gpu = gpu_options("cuda", client)
    result = run_probe(client, IMAGE_ID, "10001:10001", gpu)
    [container] = client.containers.created
    kw = container.kwargs
    assert kw["entrypoint"] == ["python3", "-m", "runner.trial.probe"]
    assert kw["device_requests"][0]["DeviceIDs"] == ["0"]
    assert kw["network_mode"] == "none" and kw["read_only"] is True and kw["cap_drop"] == ["ALL"]
    assert kw["user"] == "10001:10001" and kw["environment"]["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert container.removed
    assert result["facts"]["gpu_name"] == "NVIDIA H200"


@pytest.mark.parametrize(("reply", "ok", "says"), [
    (answer(), True, "NVIDIA H200"),
    (answer(gpu_visible=False, facts=None), False, "sees no GPU"),
    (answer(build="cpu"), False, "is a cpu build"),
    (answer(compute_ok=False), False, "wrong answer"),
    ({"error": "ImportError: libcuda.so.1"}, False, "GPU probe failed: ImportError"),
])
def test_judge(reply, ok, says) -> None:
    result = judge(reply, "cuda")
    assert result.ok is ok and says in result.summary


def test_judge_refuses_a_driver_below_the_shipped_cuda_table() -> None:
    from protocol.hardware.compat import check_cuda

    compat = to_dict(check_cuda("12.8", "550.54.15"))  # CUDA 12.8 needs ≥ 570.26
    reply = answer(facts={"gpu_name": "NVIDIA H200", "gpu_uuid": GPU_UUID, "driver_version": "550.54.15",
                          "compat": compat})
    result = judge(reply, "cuda")
    assert not result.ok and "below 570.26" in result.summary and "cuda-min-driver.csv" in result.summary


def test_a_card_older_than_the_wheels_architectures_is_refused_before_any_kernel_runs(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    pose_as_gpu(monkeypatch, torch, "cuda")
    FakeNvml().install(monkeypatch)
    old = torch.cuda.get_device_properties(0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: type(old)(**{**vars(old), "major": 7}))
    monkeypatch.setattr(torch, "arange", lambda *a, **k: pytest.fail("a kernel ran on a card the wheel cannot run"))
    from runner.trial.probe import probe

    reply = probe()
    result = judge(json.loads(json.dumps(reply, default=str)), "cuda")
    assert not result.ok and "sm_70 is older than the oldest architecture" in result.summary, result.summary
    assert "sm_75" in result.summary and "compute_ok" not in reply


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_probe_module_under_a_fake_gpu(monkeypatch, backend) -> None:
    torch = pytest.importorskip("torch")
    pose_as_gpu(monkeypatch, torch, backend)
    FakeNvml().install(monkeypatch)
    real_arange = torch.arange
    monkeypatch.setattr(torch, "arange", lambda *a, device=None, **k: real_arange(*a, **k))  # tensors stay on CPU
    from runner.trial.probe import probe

    reply = probe()
    assert reply["build"] == backend and reply["gpu_visible"] and reply["compute_ok"]
    assert reply["facts"]["backend"] == backend
    assert judge(json.loads(json.dumps(reply, default=str)), backend).ok


def test_hosts_check_cli_probes_the_gpu_with_the_given_image(monkeypatch) -> None:
    from click.testing import CliRunner

    from runner.cli import main
    from runner.hosts import check as multihost

    monkeypatch.setattr(multihost, "connect", lambda address, timeout_s=60: ProbeClient(answer()))
    monkeypatch.setattr(multihost, "daemon_identity", lambda client: {
        "engine_id": "E", "engine_version": "27.0", "name": "gpu-host", "os": "Ubuntu", "cpus": 16,
        "memory_bytes": 2**37, "runtimes": ["nvidia", "runc"]})
    result = CliRunner().invoke(main, ["hosts", "check", "--host", "h200=local", "--stack", "cuda", "--image",
                                       IMAGE_ID])
    assert result.exit_code == 0, result.output
    assert "gpu       NVIDIA H200" in result.output and "compat listed" in result.output

    monkeypatch.setattr(multihost, "connect", lambda address, timeout_s=60: ProbeClient(
        answer(gpu_visible=False, facts=None)))
    result = CliRunner().invoke(main, ["hosts", "check", "--host", "h200=local", "--stack", "cuda", "--image",
                                       IMAGE_ID])
    assert result.exit_code == 3 and "UNUSABLE" in result.output and "sees no GPU" in result.output


def test_require_gpu_without_an_image_is_unusable(monkeypatch, tmp_path) -> None:
    from runner.hosts import check as multihost
    from runner.hosts.spec import parse_host_option

    monkeypatch.setattr(multihost, "connect", lambda address, timeout_s=60: ProbeClient(answer()))
    monkeypatch.setattr(multihost, "daemon_identity", lambda client: {})
    lock = tmp_path / "images.lock"
    [soft] = multihost.check_hosts([parse_host_option("a=local")], "cuda", lock_path=lock)
    assert soft.problem == "" and soft.gpu.startswith("GPU not probed: no cuda image known")
    [hard] = multihost.check_hosts([parse_host_option("a=local")], "cuda", require_gpu=True, lock_path=lock)
    assert hard.problem.startswith("no cuda image known to probe the GPU")
