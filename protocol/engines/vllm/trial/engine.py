"""The ``vllm`` engine in the trial: text generation through vLLM's offline engine (``vllm.LLM``).

Only ``text-generation`` (anything else is refused, naming the task). The prompts are isocost's: the model's
tokenizer, template, chat template and fitting to ``max_length`` are those of the transformers generator
(:class:`protocol.tasks.generation.trial.GenerationText`), and vLLM receives token ids (``TokensPrompt``), never
text. One batch of the measured pass is its prompts added to the engine (``LLMEngine.add_request``, what
``LLM.enqueue`` does), then the engine stepped until every request is finished (what ``LLM.generate`` does, with
the time of its first step kept). In a serving run (issue 36) the batch is the dynamic batcher's, and each
request's first token is reported (``on_first_token``) at the engine step that produced it. Greedy
``SamplingParams`` (temperature 0, at most ``max_new_tokens``, stopping at the model's end-of-sequence ids,
``logprobs = top_k``). Each row is written exactly as the transformers generator writes it (tokens cut after the
first end-of-sequence token, the text decoded by the same tokenizer, the top-k ids and log-probabilities by rank:
vLLM adds the chosen token to a position's log-probabilities when it is outside the top k, and that one is
dropped), so the task's gate judges both engines unchanged.

The engine's settings (the study's ``[engines.vllm]`` table, declared by the host half
:mod:`protocol.engines.vllm`): ``enforce_eager`` (no
torch.compile, no graphs: a cold compile took 415 s on a 2-core CPU), ``max_model_len`` (the context the engine
reserves; refused when ``max_length + max_new_tokens`` does not fit), ``max_num_seqs`` (sequences the scheduler
runs at once), ``kv_cache_gib`` (the KV cache's size, what ``VLLM_CPU_KVCACHE_SPACE`` sets on CPU),
``block_size`` (tokens per KV-cache block) and ``enable_prefix_caching`` (off by default: every prompt is
computed in full, as transformers does; vLLM's own default is on). :meth:`VllmEngine.readback` reads each one
back from the running engine's configuration, with the dtype, the KV cache's bytes and blocks, the compilation
mode and the version. The engine runs offline (``HF_HUB_OFFLINE``, no usage statistics) with its caches in a
temporary directory of the trial, removed at :meth:`VllmEngine.close`, which also stops the engine's processes
(the engine core and its worker) and any process of theirs still alive.

Example::

    model = TRIAL_ENGINE.load(GenerationTrial(), Path("smollm2"), variant, torch, options, {"max_num_seqs": 8})
    model.predict(["The council voted to open three libraries."])[0]["tokens"]
    TRIAL_ENGINE.readback(model)["settings"]["max_num_seqs"]      # 8
    TRIAL_ENGINE.close(model)
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.engines.vllm import ENGINE
from protocol.engines.vllm.trial.server import ServerBackend, server_readback, start_server
from protocol.engines.vllm.trial.server import descendants as _children
from protocol.records.stages import Variant
from protocol.tasks.generation.trial import GenerationText, load_tokenizer
from runner.trial.engines.base import EngineRefused, TrialEngine
from runner.trial.faults import SERVER_KILLERS, SERVER_SPOILERS, FaultInjector
from runner.trial.measure import clock
from runner.trial.model import DTYPES
from runner.trial.tasks.base import TaskModel, TrialTask

NAME = "vllm"
TASK = "text-generation"
GIB = 1 << 30
#: The engine's settings and their defaults, as its host half declares them (the study's ``[engines.vllm]``).
DEFAULTS: dict[str, Any] = {key.key.rsplit(".", 1)[-1]: key.value for key in ENGINE.settings}
#: Offline, no usage statistics, no ahead-of-time compile cache (its reload failed: facts/engines-and-serving.md).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_USE_AOT_COMPILE": "0", "VLLM_LOGGING_LEVEL": "WARNING"}
#: Set when ``enforce_eager`` is true (recorded in the manifest): every ``torch.compile`` inside vLLM runs eagerly.
NO_COMPILE_ENV = "TORCHDYNAMO_DISABLE"
#: The cache directories vLLM and torch write to, each under the trial's temporary directory unless already set.
CACHE_ENV = ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME")
#: Seconds vLLM's own shutdown may take, then seconds a process it left gets between SIGTERM and SIGKILL: short,
#: so that a trial the launcher stops (SIGTERM, then SIGKILL 10 s later) still writes its status after closing.
SHUTDOWN_S = 2.0
STOP_GRACE_S = 2.0


def top_k_by_rank(position: Mapping[int, Any], k: int) -> tuple[list[int], list[float]]:
    """One position's top-k token ids and log-probabilities, best first, from vLLM's ``{token_id: Logprob}``: the
    ``k`` of lowest rank (the chosen token, added when it is outside the top k, is dropped)."""
    ranked = sorted(position.items(), key=lambda item: (item[1].rank if item[1].rank is not None else 1 << 62,
                                                        -item[1].logprob, item[0]))
    return [int(token) for token, _ in ranked[:k]], [float(lp.logprob) for _, lp in ranked[:k]]


def completion_columns(completion: Any, k: int) -> tuple[list[int], list[list[int]], list[list[float]]]:
    """A vLLM ``CompletionOutput`` as the generator's columns: tokens, top-k ids and log-probabilities per token."""
    tokens = [int(token) for token in completion.token_ids]
    positions = list(completion.logprobs or [])
    if len(positions) != len(tokens):
        raise RuntimeError(f"vLLM returned log-probabilities for {len(positions)} of {len(tokens)} generated tokens")
    tops = [top_k_by_rank(position, k) for position in positions]
    return tokens, [ids for ids, _ in tops], [values for _, values in tops]


@dataclass
class VllmGenerator(GenerationText, TaskModel):
    """The study's generation run by a ``vllm.LLM``: isocost's prompts in, the generator's rows out."""

    llm: Any
    tokenizer: Any
    variant: Variant
    options: dict[str, Any]
    eos_ids: tuple[int, ...]
    pad_id: int
    vocab_size: int
    params: Any
    hf_config: Any
    #: Since :meth:`take_batch_figures`: ``prefill_s`` (adding the requests to the end of the engine's first step),
    #: ``decode_s`` (the other steps), ``generated_tokens`` (the rows' tokens, as written) and ``decode_steps``
    #: (engine steps, the first one included, as the transformers generator counts its steps).
    figures: dict[str, float] = field(default_factory=dict)
    #: A serving run's first-token hook (``runner.trial.serving.sut``): called with the batch's rows whose first
    #: token an engine step produced. None offline.
    on_first_token: Callable[[list[int]], None] | None = None
    reports_first_token = True  # it calls on_first_token (TaskModel)
    #: With ``server = true``: the running HTTP server the batches go to instead of ``llm`` (None: the engine).
    server: ServerBackend | None = None
    _request_ids: Iterator[int] = field(default_factory=itertools.count)

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> list[dict[str, Any]]:
        return self._generate(features, self.params)

    @property
    def concurrent(self) -> bool:
        """Whether batches may run at once (a serving run's ``max_batches_in_flight``): through the HTTP server."""
        return self.server is not None

    def predict_concurrent(self, features: list[dict[str, list[int]]],
                           on_first_token: Callable[[list[int]], None] | None) -> list[dict[str, Any]]:
        """One of several batches in flight at once, with its own first-token hook (the HTTP server only)."""
        if self.server is None:
            raise RuntimeError("batches at once need vLLM's HTTP server (server = true)")
        return self.server.generate(self, features, self.params, on_first_token)

    def probe_encoded(self, features: list[dict[str, list[int]]]) -> list[dict[str, Any]]:
        """One batch generating a single token (the prefill), as the transformers generator probes."""
        params = self.params.clone()
        params.max_tokens = 1
        try:
            return self._generate(features, params)
        finally:
            self.take_batch_figures()

    def _generate(self, features: list[dict[str, list[int]]], params: Any) -> list[dict[str, Any]]:
        """The batch's prompts added to the engine at once, the engine stepped until all are finished
        (``LLM.generate``'s loop, with the time of its first step: the prompts' forward and the first token of
        each). With :attr:`on_first_token` set (a serving run), each step's outputs come back as they grow and the
        rows whose first token that step produced are reported then. With :attr:`server`, the batch goes to the
        HTTP server instead (:meth:`ServerBackend.generate`: the same rows and figures)."""
        if self.server is not None:
            return self.server.generate(self, features, params)
        engine = self.llm.llm_engine
        params = params.clone()
        kinds = type(params.output_kind)  # vllm.sampling_params.RequestOutputKind
        params.output_kind = kinds.FINAL_ONLY if self.on_first_token is None else kinds.CUMULATIVE
        start = clock()
        rows: dict[str, int] = {}
        for row, feature in enumerate(features):  # a vllm.inputs.TokensPrompt each, in order
            ident = str(next(self._request_ids))
            engine.add_request(ident, {"prompt_token_ids": list(feature["input_ids"])}, params)
            rows[ident] = row
        first: float | None = None
        steps = 0
        finished: dict[int, Any] = {}
        reported: set[str] = set()
        while engine.has_unfinished_requests():
            outputs = engine.step()
            steps += 1
            if first is None:
                first = clock()
            self._report_first_tokens(outputs, rows, reported)
            finished.update((rows[output.request_id], output) for output in outputs if output.finished)
        end = clock()
        if len(finished) != len(features):
            raise RuntimeError(f"vLLM finished {len(finished)} of {len(features)} requests")
        top_k = int(self.options["top_k"])
        done = [self._row(*completion_columns(finished[row].outputs[0], top_k)) for row in range(len(features))]
        first = first if first is not None else end
        self._count(first - start, end - first, sum(row["n_tokens"] for row in done), steps)
        return done

    def _report_first_tokens(self, outputs: Sequence[Any], rows: dict[str, int], reported: set[str]) -> None:
        """Tell :attr:`on_first_token` the rows whose first token this step produced (each row once)."""
        if self.on_first_token is None:
            return
        new = [output.request_id for output in outputs
               if output.request_id not in reported and output.outputs and output.outputs[0].token_ids]
        if new:
            reported.update(new)
            self.on_first_token([rows[ident] for ident in new])

    def describe(self) -> dict[str, Any]:
        config = self.hf_config
        return {
            "architecture": list(getattr(config, "architectures", None) or []),
            "model_type": getattr(config, "model_type", None),
            "dtype": DTYPES[self.variant.precision],
            "quantization": self.variant.quantization,
            "compiled": self.variant.compile,
            "attention": "vllm (paged attention)",
            "tokenizer_class": type(self.tokenizer).__name__,
            "padding": "none: vLLM schedules each prompt unpadded",
            "max_length": self.variant.max_length,
            "vocab_size": self.vocab_size,
            "eos_token_ids": list(self.eos_ids),
            "pad_token_id": self.pad_id,
            "context": getattr(config, "max_position_embeddings", None),
            "template_sha256": hashlib.sha256(self.options["template"].encode("utf-8")).hexdigest(),
            "chat_template": bool(self.options.get("chat_template")),
            "decoding": "greedy",
            "max_new_tokens": int(self.options["max_new_tokens"]),
            "top_k": int(self.options["top_k"]),
            "kv_cache": True,
            "engine": NAME,
        }


def resolved_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The study's settings over :data:`DEFAULTS`; an unknown one refused."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise EngineRefused(f"engine vllm has no setting {', '.join(map(repr, unknown))} "
                            f"(its settings: {', '.join(DEFAULTS)})")
    return {**DEFAULTS, **settings}


def stop_children(grace_s: float = STOP_GRACE_S) -> list[int]:
    """SIGTERM every process this one started and is still alive (or a zombie), SIGKILL what outlives the grace,
    reap them; returns the ids found."""
    found = _children(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _reap(found):
            time.sleep(0.05)
        if not _reap(found):
            break
    return found


def _reap(pids: Sequence[int]) -> list[int]:
    """Those of ``pids`` still alive (a zombie child of this process is reaped, so it no longer is)."""
    alive = []
    for pid in pids:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                continue
        except ChildProcessError:
            pass  # not this process's child: its own parent reaps it
        if Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
            alive.append(pid)
    return alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _check_platform(variant: Variant) -> None:
    from vllm.platforms import current_platform

    if current_platform.device_type != variant.device:
        raise EngineRefused(f"this vLLM build runs on {current_platform.device_type}, the variant on {variant.device}")


class VllmEngine(TrialEngine):
    """vLLM's offline engine for text generation (the trial half of engine ``vllm``)."""

    name = NAME

    def __init__(self) -> None:
        self._llm: Any = None
        self._server: ServerBackend | None = None
        self._cache_dir: str | None = None

    def load(self, task: TrialTask, path: Path, variant: Variant, torch: Any, options: dict[str, Any],
             settings: Mapping[str, Any]) -> TaskModel:
        if task.name != TASK:
            raise EngineRefused(f"engine vllm runs task {TASK!r} only, not {task.name!r}")
        resolved = resolved_settings(settings)
        needed = variant.max_length + int(options["max_new_tokens"])
        if needed > int(resolved["max_model_len"]):
            raise EngineRefused(f"engine vllm: max_model_len {resolved['max_model_len']} is shorter than max_length "
                                f"{variant.max_length} + max_new_tokens {options['max_new_tokens']} ({needed})")
        self._environment(bool(resolved["enforce_eager"]))
        tokenizer, _, eos_ids, pad = load_tokenizer(path)
        server = None
        if resolved["server"]:
            llm, server = None, self._start_server(path, variant, resolved, int(options["top_k"]))
        else:
            llm = self._start(path, variant, resolved, int(options["top_k"]))
        from transformers import AutoConfig
        from vllm import SamplingParams

        hf_config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        params = SamplingParams(temperature=0.0, max_tokens=int(options["max_new_tokens"]),
                                logprobs=int(options["top_k"]), stop_token_ids=list(eos_ids), detokenize=False)
        model = VllmGenerator(llm=llm, tokenizer=tokenizer, variant=variant, options=dict(options), eos_ids=eos_ids,
                              pad_id=pad, vocab_size=int(hf_config.vocab_size), params=params, hf_config=hf_config,
                              server=server)
        self._check_dtype(model)
        return model

    def _environment(self, eager: bool) -> None:
        for key, value in OFFLINE_ENV.items():
            os.environ.setdefault(key, value)
        if eager:  # no torch.compile at all: vLLM's sampler compiles its logprob gather even with enforce_eager,
            os.environ[NO_COMPILE_ENV] = "1"  # which needs a C++ compiler (images have none) and an exec /tmp
        if any(key not in os.environ for key in CACHE_ENV):
            self._cache_dir = tempfile.mkdtemp(prefix="isocost-vllm-")
            for key in CACHE_ENV:
                os.environ.setdefault(key, str(Path(self._cache_dir) / key.lower()))

    def _start(self, path: Path, variant: Variant, settings: dict[str, Any], top_k: int) -> Any:
        from vllm import LLM

        _check_platform(variant)
        try:
            self._llm = LLM(model=str(path), tokenizer=str(path), dtype=DTYPES[variant.precision],
                            seed=variant.seed, enforce_eager=bool(settings["enforce_eager"]),
                            max_model_len=int(settings["max_model_len"]), max_num_seqs=int(settings["max_num_seqs"]),
                            kv_cache_memory_bytes=int(float(settings["kv_cache_gib"]) * GIB),
                            block_size=int(settings["block_size"]),
                            enable_prefix_caching=bool(settings["enable_prefix_caching"]),
                            max_logprobs=max(20, top_k), generation_config="vllm")
        except (ValueError, TypeError, NotImplementedError) as exc:  # what vLLM raises for a model or setting
            raise EngineRefused(f"vLLM refused the model or a setting: {type(exc).__name__}: {exc}") from exc
        return self._llm

    def _start_server(self, path: Path, variant: Variant, settings: dict[str, Any], top_k: int) -> ServerBackend:
        """vLLM's HTTP server on a loopback port (this trial's interpreter), ready; killable by the fault hook."""
        _check_platform(variant)
        self._server = start_server(sys.executable, path, variant, settings, top_k, self.log_dir, FaultInjector())
        SERVER_KILLERS.append(self._server.process.kill)
        SERVER_SPOILERS.append(self._server.spoil_next)
        return self._server

    def _check_dtype(self, model: VllmGenerator) -> None:
        if model.server is not None:
            runs = str(server_readback(model.server)["dtype"])
        else:
            runs = str(model.llm.llm_engine.vllm_config.model_config.dtype).removeprefix("torch.")
        if runs != DTYPES[model.variant.precision]:
            raise EngineRefused(f"engine vllm runs the model in {runs}, the variant declares "
                                f"{model.variant.precision} ({DTYPES[model.variant.precision]})")

    def readback(self, model: TaskModel) -> dict[str, Any]:
        import vllm

        assert isinstance(model, VllmGenerator)
        extra = {"cpu_threads_bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto"),
                 "torch_compile": "disabled" if os.environ.get(NO_COMPILE_ENV) == "1" else "allowed"}
        if model.server is not None:
            return {"name": NAME, "version": vllm.__version__, **server_readback(model.server), **extra}
        config = model.llm.llm_engine.vllm_config
        kv_bytes = config.cache_config.kv_cache_memory_bytes
        mode = config.compilation_config.mode
        settings = {
            "enforce_eager": bool(config.model_config.enforce_eager),
            "max_model_len": int(config.model_config.max_model_len),
            "max_num_seqs": int(config.scheduler_config.max_num_seqs),
            "kv_cache_gib": kv_bytes / GIB if kv_bytes is not None else None,
            "block_size": int(config.cache_config.block_size),
            "enable_prefix_caching": bool(config.cache_config.enable_prefix_caching),
            "server": False,
        }
        return {"name": NAME, "version": vllm.__version__, "settings": settings,
                "dtype": str(config.model_config.dtype).removeprefix("torch."),
                "device": str(config.device_config.device_type), "kv_cache_bytes": kv_bytes,
                "kv_cache_blocks": config.cache_config.num_gpu_blocks,
                "compilation_mode": getattr(mode, "name", str(mode)),
                "chunked_prefill": bool(config.scheduler_config.enable_chunked_prefill),
                "max_num_batched_tokens": int(config.scheduler_config.max_num_batched_tokens),
                "logprobs_mode": str(config.model_config.logprobs_mode), **extra}

    def close(self, model: TaskModel | None) -> None:
        """Shut the engine core (or the HTTP server) down, stop every process of the engine still alive, remove the
        caches."""
        llm, self._llm = self._llm, None
        server, self._server = self._server, None
        try:
            if server is not None:
                server.process.stop()
            if llm is not None:
                llm.llm_engine.engine_core.shutdown(timeout=SHUTDOWN_S)
        finally:
            stop_children()
            if self._cache_dir:
                shutil.rmtree(self._cache_dir, ignore_errors=True)
                self._cache_dir = None


TRIAL_ENGINE = VllmEngine()
