"""vLLM's HTTP server as the trial's engine (``server = true``), its logic without vLLM: the command line, the
streamed answer's mapping to the generator's columns, the client against a stand-in HTTP server (errors, a stream
cut short, an error event), and the server process's readiness (a server that exits, one never ready), stop and
the test-only faults. The real server is run by tests/e2e/test_vllm_engine.py, test_vllm_serving.py and the
fault cases ``vllm-server-*``."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from protocol.engines.vllm import ENGINE
from protocol.engines.vllm.trial.server import (
    RequestLog,
    ServerBackend,
    ServerFailed,
    ServerProcess,
    Streamed,
    descendants,
    free_port,
    server_argv,
    start_server,
    stream_completion,
    top_k_by_logprob,
)
from protocol.records.stages import Variant
from runner.trial.engines.base import EngineRefused
from runner.trial.faults import SERVER_KILLERS, FaultInjector

VARIANT = Variant(variant_id="v", stack="cpu", device="cpu", precision="fp32", quantization="none", compile=False,
                  attention="sdpa", batch_size=4, padding="longest", max_length=128, length_grouping="none",
                  resume="none", threads=2, seed=3, deterministic=True, engine="vllm")
SETTINGS = {"enforce_eager": True, "max_model_len": 512, "max_num_seqs": 8, "kv_cache_gib": 0.5, "block_size": 64,
            "enable_prefix_caching": False, "server": True}


def test_the_server_setting_is_declared_with_default_false() -> None:
    rows = {key.key: key for key in ENGINE.settings}
    assert rows["engines.vllm.server"].value is False and rows["engines.vllm.server"].kind == "boolean"


def test_server_argv_carries_every_setting_and_binds_loopback() -> None:
    argv = server_argv("/py", Path("/m"), VARIANT, SETTINGS, top_k=5, port=4321)
    assert argv[:3] == ["/py", "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "4321" and flags["--dtype"] == "float32"
    assert flags["--max-model-len"] == "512" and flags["--max-num-seqs"] == "8" and flags["--block-size"] == "64"
    assert flags["--kv-cache-memory-bytes"] == str(1 << 29) and flags["--seed"] == "3"
    assert "--enforce-eager" in argv and "--no-enable-prefix-caching" in argv
    lazy = server_argv("/py", Path("/m"), VARIANT, {**SETTINGS, "enforce_eager": False, "enable_prefix_caching": True},
                       top_k=5, port=1)
    assert "--no-enforce-eager" in lazy and "--enable-prefix-caching" in lazy


def test_top_k_by_logprob_drops_the_added_chosen_token() -> None:
    position = {"token_id:9": -3.0, "token_id:4": -0.5, "token_id:7": -1.0, "token_id:2": -1.0}
    assert top_k_by_logprob(position, 3) == ([4, 2, 7], [-0.5, -1.0, -1.0])  # a tie: by id
    with pytest.raises(ServerFailed, match="not 'token_id:N'"):
        top_k_by_logprob({"hello": -1.0}, 1)


def test_a_chunk_with_tokens_and_tops_of_different_lengths_is_refused() -> None:
    with pytest.raises(ServerFailed, match="2 tokens and 1 top"):
        Streamed().take({"token_ids": [1, 2], "logprobs": {"top_logprobs": [{"token_id:1": -0.1}]}}, 1)


class _Stand_in(BaseHTTPRequestHandler):
    """Answers /v1/completions as the test's ``mode`` says."""

    mode = "ok"
    bodies: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        if self.mode == "http-error":
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b'{"error": "max_tokens too large"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for token in (11, 12):
            chunk = {"choices": [{"token_ids": [token], "logprobs": {"top_logprobs": [
                {f"token_id:{token}": -0.25, "token_id:99": -2.0}]}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        if self.mode == "error-event":
            self.wfile.write(b'data: {"error": {"message": "engine died"}}\n\n')
        self.wfile.write(b'data: {"choices": [], "metrics": {"time_to_first_token_ms": 4.5}}\n\n')
        if self.mode != "cut":
            self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def stand_in() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stand_in)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Stand_in.mode, _Stand_in.bodies = "ok", []
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_a_streamed_completion_is_read_token_by_token(stand_in: int) -> None:
    firsts: list[float] = []
    answer = stream_completion(stand_in, [1, 2, 3], max_tokens=2, top_k=1, stop_ids=[0],
                               on_first=lambda: firsts.append(time.perf_counter()))
    assert answer.tokens == [11, 12] and answer.top_ids == [[11], [12]] and answer.top_logprobs == [[-0.25], [-0.25]]
    assert len(firsts) == 1 and answer.first_s is not None and answer.sent_s <= answer.first_s <= answer.done_s
    assert answer.metrics == {"time_to_first_token_ms": 4.5}
    sent = _Stand_in.bodies[0]
    assert (sent["prompt"], sent["temperature"], sent["logprobs"], sent["stop_token_ids"]) == ([1, 2, 3], 0, 1, [0])
    assert sent["stream"] is True and sent["return_token_ids"] is True and sent["return_tokens_as_token_ids"] is True


@pytest.mark.parametrize(("mode", "message"), [("http-error", "HTTP 400"), ("cut", "without \\[DONE\\]"),
                                               ("error-event", "streamed an error")])
def test_a_request_the_server_does_not_answer_fails(stand_in: int, mode: str, message: str) -> None:
    _Stand_in.mode = mode
    with pytest.raises(ServerFailed, match=message):
        stream_completion(stand_in, [1], max_tokens=2, top_k=1, stop_ids=[])


def test_a_closed_port_fails_the_request_naming_it() -> None:
    port = free_port()
    with pytest.raises(ServerFailed, match=f"127.0.0.1:{port} failed"):
        stream_completion(port, [1], max_tokens=1, top_k=1, stop_ids=[], timeout_s=5)


def _start(tmp_path: Path, code: str) -> ServerProcess:
    return ServerProcess.start([sys.executable, "-c", code], {}, tmp_path / "server.log", free_port())


def test_a_server_that_exits_before_ready_is_refused_with_its_log(tmp_path: Path) -> None:
    server = _start(tmp_path, "import sys; print('OSError: [Errno 98] Address already in use'); sys.exit(1)")
    with pytest.raises(EngineRefused, match=r"exited with code 1 .*Address already in use"):
        server.wait_ready(30)


def test_a_server_never_ready_is_stopped_and_refused(tmp_path: Path) -> None:
    server = _start(tmp_path, "import time; print('loading', flush=True); time.sleep(600)")
    with pytest.raises(EngineRefused, match=r"not ready on 127.0.0.1:\d+ after 0.5 s .*loading"):
        server.wait_ready(0.5)
    assert server.process.poll() is not None, "the server outlived its refusal"


def test_stop_ends_the_server_and_what_it_started(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
            "time.sleep(600)")
    server = _start(tmp_path, code)
    deadline = time.monotonic() + 20
    while not descendants(server.process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = descendants(server.process.pid)
    assert child, "the stand-in server started no child"
    server.stop(grace_s=2)
    assert server.process.poll() is not None
    deadline = time.monotonic() + 10  # SIGKILL is delivered, not awaited: the child goes within moments
    while _alive(child[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child[0]), "the server's child outlived stop()"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_port_taken_fault_refuses_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``server-port-taken``: another listener on the port first; a server that then cannot bind exits, refused."""
    script = tmp_path / "bind.py"
    script.write_text("import socket, sys\nport = int(sys.argv[sys.argv.index('--port') + 1])\n"
                      "socket.socket().bind(('127.0.0.1', port))\n")
    monkeypatch.setattr("protocol.engines.vllm.trial.server.server_argv",
                        lambda python, path, variant, settings, top_k, port: [python, str(script), "--port", str(port)])
    with pytest.raises(EngineRefused, match="Address already in use"):
        start_server(sys.executable, Path("/m"), VARIANT, SETTINGS, 5, tmp_path, FaultInjector("server-port-taken:1"))
    assert (tmp_path / "vllm_server.log").exists()


def test_the_kill_fault_calls_every_registered_server_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    killed: list[int] = []
    monkeypatch.setattr("runner.trial.faults.SERVER_KILLERS", [lambda: killed.append(1)])
    from runner.trial import faults

    FaultInjector("kill-server-at-batch:2").before_batch(1, 4)
    assert killed == []
    FaultInjector("kill-server-at-batch:2").before_batch(2, 4)
    assert killed == [1] and faults.SERVER_KILLERS and SERVER_KILLERS == []


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


class _Model:
    """What ServerBackend.generate needs of the generator: its hook, rows and figures."""

    on_first_token = None

    def _row(self, tokens: list[int], top_ids: list[list[int]], top_logprobs: list[list[float]]) -> dict[str, Any]:
        return {"tokens": tokens, "n_tokens": len(tokens)}

    def _count(self, *figures: float) -> None:
        pass


def test_the_bad_request_fault_spoils_only_the_next_batchs_first_request(stand_in: int,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    spoilers: list[Any] = []
    monkeypatch.setattr("runner.trial.faults.SERVER_SPOILERS", spoilers)
    backend = ServerBackend(process=SimpleNamespace(port=stand_in), requests=RequestLog(None), ready_s=0.0)
    spoilers.append(backend.spoil_next)
    params = SimpleNamespace(max_tokens=2, logprobs=1, stop_token_ids=[0])
    features = [{"input_ids": [1, 2]}, {"input_ids": [3]}]
    FaultInjector("bad-request-at-batch:1").before_batch(0, 2)
    backend.generate(_Model(), features, params)
    assert [body["max_tokens"] for body in _Stand_in.bodies] == [2, 2]  # not yet: batch 1 is the next
    _Stand_in.bodies.clear()
    FaultInjector("bad-request-at-batch:1").before_batch(1, 2)
    backend.generate(_Model(), features, params)
    assert sorted((body["prompt"], body["max_tokens"]) for body in _Stand_in.bodies) == [([1, 2], 0), ([3], 2)]
    _Stand_in.bodies.clear()
    backend.generate(_Model(), features, params)
    assert [body["max_tokens"] for body in _Stand_in.bodies] == [2, 2]  # once only
