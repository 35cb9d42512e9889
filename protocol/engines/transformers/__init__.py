"""The default engine: the task's own transformers model, in PyTorch (every task, every device and precision).

Example::

    engine_named("transformers").trial_module     # "protocol.engines.transformers.trial"
"""

from __future__ import annotations

from protocol.engines.base import Engine

ENGINE = Engine(
    name="transformers",
    help="the task's transformers model in PyTorch (the default)",
    requires=("torch", "transformers"),
    docs={"runs": "every task; CPU, CUDA and ROCm; fp32, bf16, fp16 (GPU)",
          "changes": "nothing: the reference every other engine is compared with"},
)
