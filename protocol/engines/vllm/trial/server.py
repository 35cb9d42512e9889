"""vLLM's OpenAI-compatible HTTP server as the trial's engine (``[engines.vllm] server = true``).

The trial starts ``python -m vllm.entrypoints.openai.api_server`` (the trial's own interpreter, an argument list:
no shell) in the trial's own process group (so that whatever stops a trial killed from outside stops its server
too), on a free port of the loopback interface, with the study's engine
settings as its flags, and waits for ``/health`` (at most :data:`READY_TIMEOUT_S`; a server that exits first, a
port already taken for instance, or that is not ready in time refuses the trial with the last lines of its log).
The server's log is kept in the trial directory (:data:`SERVER_LOG`). What the server runs is read back from its
configuration (``/server_info``, which vLLM serves with ``VLLM_SERVER_DEV_MODE=1``: loopback only, the trial's own
server), so a setting the server does not run refuses the trial as for the offline engine.

Each batch's prompts go to the server at once, one streaming ``/v1/completions`` request each, in threads: the
prompt as token ids (isocost's prompts, as for the engine), ``temperature = 0``, ``max_tokens``, the model's
end-of-sequence ids as stop ids, ``logprobs = top_k`` with the tokens named by id (``return_tokens_as_token_ids``)
and the generated ids returned (``return_token_ids``). A request's first token is taken at the first streamed
chunk that holds one (``on_first_token``, for a serving run's LoadGen), its answer from the streamed ids and
log-probabilities (the top k by log-probability: the server adds the chosen token when it is outside them, and that
one is dropped), written as the transformers generator's row. The server's own per-request times (vLLM's
``--enable-per-request-metrics``: time to first token, generation time, queue time) are kept per request beside the
client's (:data:`REQUESTS_FILE`), for the comparison of both clocks. An HTTP error or a broken connection fails
the batch, as a failed model call does.

:meth:`ServerProcess.stop` stops the server (TERM, then KILL for it and every process of its) when the trial closes
its engine.

Example::

    server = ServerProcess.start(server_argv(sys.executable, path, variant, settings, top_k=5, port=free_port()),
                                 env, trial_dir / SERVER_LOG)
    server.wait_ready(READY_TIMEOUT_S)
    stream_completion(server.port, [1, 504, 3437], max_tokens=4, top_k=5, stop_ids=[2]).tokens
    server.stop()
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.io.safe_write import write_text_atomic
from protocol.records.stages import Variant
from runner.trial.engines.base import EngineRefused
from runner.trial.measure import clock
from runner.trial.model import DTYPES

#: The server's log, kept in the trial directory (not sealed: read by no report, kept for the reader).
SERVER_LOG = "vllm_server.log"
#: Per request: the client's times and the server's own (vLLM's per-request metrics), one JSON line each.
REQUESTS_FILE = "vllm_requests.jsonl"
#: The longest wait for ``/health`` (a cold torch.compile took 415 s on a 2-core CPU; eager starts in about 35 s).
READY_TIMEOUT_S = 600.0
#: The longest wait for one request's next streamed chunk.
REQUEST_TIMEOUT_S = 600.0
#: The name the server serves the model under (requests name it).
SERVED_NAME = "isocost"
#: Seconds the server gets between SIGTERM and SIGKILL of its process group.
STOP_GRACE_S = 5.0
_POLL_S = 0.25
_TAIL_LINES = 6


class ServerFailed(RuntimeError):
    """A request the server did not answer: an HTTP error, a broken connection, a malformed stream."""


def free_port() -> int:
    """A port of the loopback interface that nothing listens on now (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_argv(python: str, path: Path, variant: Variant, settings: Mapping[str, Any], top_k: int,
                port: int) -> list[str]:
    """The server's command line: the study's engine settings as vLLM's flags, loopback only."""
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path), "--tokenizer", str(path),
            "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--dtype", DTYPES[variant.precision], "--seed", str(variant.seed),
            "--max-model-len", str(int(settings["max_model_len"])),
            "--max-num-seqs", str(int(settings["max_num_seqs"])),
            "--kv-cache-memory-bytes", str(int(float(settings["kv_cache_gib"]) * (1 << 30))),
            "--block-size", str(int(settings["block_size"])),
            "--max-logprobs", str(max(20, top_k)), "--generation-config", "vllm",
            "--enable-per-request-metrics", "--disable-uvicorn-access-log"]
    argv.append("--enforce-eager" if settings["enforce_eager"] else "--no-enforce-eager")
    argv.append("--enable-prefix-caching" if settings["enable_prefix_caching"] else "--no-enable-prefix-caching")
    return argv


@dataclass
class ServerProcess:
    """The server the trial started: its process (a group of its own), its port and its log."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @classmethod
    def start(cls, argv: Sequence[str], env: Mapping[str, str], log_path: Path, port: int) -> ServerProcess:
        """The server started in the trial's own process group and session (never a session of its own): what
        stops a trial killed from outside (the process launcher's group, a container, a Slurm job) stops it too."""
        with open(log_path, "ab") as log:
            process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env=dict(env))
        return cls(process, port, log_path)

    def wait_ready(self, timeout_s: float) -> float:
        """Seconds until ``/health`` answered 200; EngineRefused when the server exits first or is not ready in
        ``timeout_s`` (it is stopped then), with the last lines of its log."""
        start = time.monotonic()
        while True:
            code = self.process.poll()
            if code is not None:
                raise EngineRefused(f"vLLM's server exited with code {code} before it was ready on 127.0.0.1:"
                                    f"{self.port} (its log: {self.log_path.name}): {self.log_tail()}")
            if self._healthy():
                return time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                self.stop()
                raise EngineRefused(f"vLLM's server was not ready on 127.0.0.1:{self.port} after {timeout_s:g} s "
                                    f"(stopped; its log: {self.log_path.name}): {self.log_tail()}")
            time.sleep(_POLL_S)

    def _healthy(self) -> bool:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            connection.request("GET", "/health")
            ok = connection.getresponse().status == 200
            connection.close()
            return ok
        except OSError:
            return False

    def get_json(self, path: str) -> Any:
        """A GET of the server's, its JSON body (ServerFailed on an HTTP error)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
        except OSError as exc:
            raise ServerFailed(f"GET {path}: {type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()
        if response.status != 200:
            raise ServerFailed(f"GET {path}: HTTP {response.status}: {body[:200]!r}")
        return json.loads(body)

    def log_tail(self, lines: int = _TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(kept)[-1500:] or "(empty log)"

    def kill(self) -> None:
        """SIGKILL the server and every process of its at once (the test-only fault of a server dying mid-run)."""
        for pid in [self.process.pid, *descendants(self.process.pid)]:
            _signal(pid, signal.SIGKILL)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """TERM the server (vLLM then shuts its engine down), KILL it and every process of its still alive after
        ``grace_s``, reap the server."""
        tree = [self.process.pid, *descendants(self.process.pid)]
        _signal(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(grace_s)
        for pid in tree:
            _signal(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(grace_s)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux ``/proc``), children before their own children."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found.extend(frontier)
    return found


def top_k_by_logprob(position: Mapping[str, float], k: int) -> tuple[list[int], list[float]]:
    """One streamed position's top-k ids and log-probabilities, best first, from ``{"token_id:N": logprob}``
    (ties by id; the chosen token, added by the server when it is outside the top k, falls last and is dropped)."""
    pairs = []
    for name, value in position.items():
        prefix, _, number = name.partition(":")
        if prefix != "token_id" or not number.lstrip("-").isdigit():
            raise ServerFailed(f"a top log-probability named {name!r}, not 'token_id:N'")
        pairs.append((int(number), float(value)))
    ranked = sorted(pairs, key=lambda pair: (-pair[1], pair[0]))[:k]
    return [token for token, _ in ranked], [value for _, value in ranked]


@dataclass
class Streamed:
    """One request's answer as streamed: its tokens, top-k per token, and its times (``clock()`` seconds)."""

    tokens: list[int] = field(default_factory=list)
    top_ids: list[list[int]] = field(default_factory=list)
    top_logprobs: list[list[float]] = field(default_factory=list)
    sent_s: float = 0.0
    first_s: float | None = None
    done_s: float = 0.0
    chunks: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)

    def take(self, choice: Mapping[str, Any], k: int) -> int:
        """Add one streamed choice's tokens; returns how many it held."""
        ids = [int(token) for token in choice.get("token_ids") or []]
        tops = (choice.get("logprobs") or {}).get("top_logprobs") or []
        if len(tops) != len(ids):
            raise ServerFailed(f"a chunk held {len(ids)} tokens and {len(tops)} top log-probabilities")
        for token, position in zip(ids, tops, strict=True):
            top_ids, values = top_k_by_logprob(position, k)
            self.tokens.append(token)
            self.top_ids.append(top_ids)
            self.top_logprobs.append(values)
        return len(ids)


def stream_completion(port: int, prompt_ids: Sequence[int], max_tokens: int, top_k: int, stop_ids: Sequence[int],
                      on_first: Callable[[], None] | None = None,
                      timeout_s: float = REQUEST_TIMEOUT_S) -> Streamed:
    """One greedy streaming completion of ``prompt_ids``; ``on_first`` is called at its first token."""
    body = {"model": SERVED_NAME, "prompt": list(prompt_ids), "max_tokens": max_tokens, "temperature": 0,
            "logprobs": top_k, "stop_token_ids": list(stop_ids), "return_token_ids": True,
            "return_tokens_as_token_ids": True, "stream": True, "stream_options": {"include_usage": True},
            "skip_special_tokens": False}
    answer = Streamed(sent_s=clock())
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise ServerFailed(f"the server answered HTTP {response.status}: {response.read()[:300]!r}")
        _read_stream(response, answer, top_k, on_first)
    except (OSError, http.client.HTTPException) as exc:
        raise ServerFailed(f"the request to 127.0.0.1:{port} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        connection.close()
    answer.done_s = clock()
    return answer


def _read_stream(response: Any, answer: Streamed, top_k: int, on_first: Callable[[], None] | None) -> None:
    """Server-sent events until ``[DONE]``: each ``data:`` line a chunk of the completion."""
    done = False
    for raw in response:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        if "error" in chunk:
            raise ServerFailed(f"the server streamed an error: {str(chunk['error'])[:300]}")
        for choice in chunk.get("choices") or []:
            if answer.take(choice, top_k) and answer.first_s is None:
                answer.first_s = clock()
                if on_first is not None:
                    on_first()
        answer.chunks += 1
        if isinstance(chunk.get("metrics"), dict):
            answer.metrics = dict(chunk["metrics"])
    if not done:
        raise ServerFailed("the stream ended without [DONE]")


def request_line(answer: Streamed, batch: int, row: int) -> str:
    """One request's times for :data:`REQUESTS_FILE`: the client's (from sending) and the server's own."""
    first = None if answer.first_s is None else round((answer.first_s - answer.sent_s) * 1000, 3)
    return json.dumps({"batch": batch, "row": row, "tokens": len(answer.tokens),
                       "client_ttft_ms": first, "client_latency_ms": round((answer.done_s - answer.sent_s) * 1000, 3),
                       "server": answer.metrics}) + "\n"


class RequestLog:
    """The per-request lines of :data:`REQUESTS_FILE`, written whole after every batch (thread-safe)."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.batches = path, 0
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def add(self, answers: Sequence[Streamed]) -> None:
        with self._lock:
            number, self.batches = self.batches, self.batches + 1
            self.lines.extend(request_line(answer, number, row) for row, answer in enumerate(answers))
            if self.path is not None:
                write_text_atomic(self.path, "".join(self.lines), root=self.path.parent)


@dataclass
class ServerBackend:
    """The generator's batches sent to a running server (what :class:`~protocol.engines.vllm.trial.engine.VllmGenerator`
    calls instead of stepping an in-process engine when the study declares ``server = true``)."""

    process: ServerProcess
    requests: RequestLog
    ready_s: float
    _hook_lock: threading.Lock = field(default_factory=threading.Lock)
    _spoiled: bool = False  # the test-only fault ``bad-request-at-batch``: the next batch's first request malformed

    def spoil_next(self) -> None:
        """Send the next batch's first request with ``max_tokens = 0``, which the real server refuses with an HTTP
        error (the test-only fault of one query answered with an error)."""
        self._spoiled = True

    def generate(self, model: Any, features: Sequence[Mapping[str, Sequence[int]]], params: Any,
                 on_first_token: Callable[[list[int]], None] | None = None) -> list[dict[str, Any]]:
        """One batch: every prompt sent at once, each answer streamed; rows as the generator writes them. A
        request that fails fails the batch (ServerFailed), after every request of the batch has ended. The batch's
        first-token hook: ``on_first_token`` (batches in flight at once), else the model's, read now."""
        start = clock()
        answers: list[Streamed | None] = [None] * len(features)
        errors: list[str] = []
        hook = on_first_token if on_first_token is not None else model.on_first_token
        spoiled, self._spoiled = self._spoiled, False

        def send(row: int) -> None:
            def first() -> None:
                if hook is not None:
                    with self._hook_lock:  # the serving system's bookkeeping is not thread-safe
                        hook([row])
            try:
                max_tokens = 0 if spoiled and row == 0 else int(params.max_tokens)
                answers[row] = stream_completion(self.process.port, list(features[row]["input_ids"]), max_tokens,
                                                 int(params.logprobs), list(params.stop_token_ids or []), first)
            except (ServerFailed, ValueError) as exc:
                errors.append(f"request {row}: {exc}")

        threads = [threading.Thread(target=send, args=(row,), name=f"isocost-request-{row}", daemon=True)
                   for row in range(len(features))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        end = clock()
        if errors:
            raise ServerFailed(f"{len(errors)} of {len(features)} requests failed; {sorted(errors)[0]}")
        done = [answer for answer in answers if answer is not None]
        self.requests.add(done)
        rows = [model._row(answer.tokens, answer.top_ids, answer.top_logprobs) for answer in done]
        firsts = [answer.first_s for answer in done if answer.first_s is not None]
        first = max(firsts) if firsts else end  # as the engine counts prefill: until every row has its first token
        with self._hook_lock:  # batches in flight at once add to the same figures
            model._count(first - start, end - first, sum(row["n_tokens"] for row in rows),
                         max((len(answer.tokens) for answer in done), default=0))
        return rows

    def config(self) -> dict[str, Any]:
        """The server's configuration as it runs (``/server_info``, JSON)."""
        info = self.process.get_json("/server_info?config_format=json")
        return dict(info["vllm_config"])


def start_server(python: str, path: Path, variant: Variant, settings: Mapping[str, Any], top_k: int,
                 log_dir: Path | None, fault: Any) -> ServerBackend:
    """Start the server for the variant and wait until it is ready (EngineRefused otherwise, the server stopped).
    ``fault`` (the trial's test-only fault) may take the port first or shorten the wait."""
    directory = log_dir if log_dir is not None else Path(os.environ.get("TMPDIR", "/tmp"))
    port = free_port()
    held = _take_port(port) if fault.kind == "server-port-taken" else None
    timeout = float(fault.value) if fault.kind == "server-ready-timeout" else READY_TIMEOUT_S
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    process = ServerProcess.start(server_argv(python, path, variant, settings, top_k, port), env,
                                  directory / SERVER_LOG, port)
    try:
        ready_s = process.wait_ready(timeout)
    except BaseException:
        process.stop()
        raise
    finally:
        if held is not None:
            held.close()
    requests = RequestLog(directory / REQUESTS_FILE if log_dir is not None else None)
    return ServerBackend(process=process, requests=requests, ready_s=ready_s)


def _take_port(port: int) -> socket.socket:
    """The test-only fault ``server-port-taken``: another listener on the server's port before it starts."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", port))
    taken.listen()
    return taken


def server_readback(backend: ServerBackend) -> dict[str, Any]:
    """What the server runs, from its configuration: the engine's settings, dtype, device, KV cache, compilation,
    and where it listens."""
    config = backend.config()
    model, cache, scheduler = config["model_config"], config["cache_config"], config["scheduler_config"]
    kv_bytes = cache.get("kv_cache_memory_bytes")
    return {
        "settings": {"enforce_eager": bool(model["enforce_eager"]), "max_model_len": int(model["max_model_len"]),
                     "max_num_seqs": int(scheduler["max_num_seqs"]),
                     "kv_cache_gib": kv_bytes / (1 << 30) if kv_bytes is not None else None,
                     "block_size": int(cache["block_size"]),
                     "enable_prefix_caching": bool(cache["enable_prefix_caching"]), "server": True},
        "dtype": str(model["dtype"]).removeprefix("torch."), "device": str(config["device_config"].get("device")),
        "kv_cache_bytes": kv_bytes, "kv_cache_blocks": cache.get("num_gpu_blocks"),
        "compilation_mode": config["compilation_config"].get("mode"),
        "chunked_prefill": scheduler.get("enable_chunked_prefill"),
        "max_num_batched_tokens": scheduler.get("max_num_batched_tokens"),
        "logprobs_mode": model.get("logprobs_mode"),
        "server": {"address": f"127.0.0.1:{backend.process.port}", "ready_s": round(backend.ready_s, 3),
                   "log": SERVER_LOG, "requests": REQUESTS_FILE, "config_from": "/server_info (VLLM_SERVER_DEV_MODE)"},
    }
