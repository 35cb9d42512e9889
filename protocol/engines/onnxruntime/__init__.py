"""ONNX Runtime: the checkpoint exported to ONNX at load (cached, fingerprinted) and run by an ``InferenceSession``.

Text classification and sentence embeddings, fp32, with the study's execution provider, graph optimisation level
and intra-op threads (``[engines.onnxruntime]``); the trial half is :mod:`protocol.engines.onnxruntime.trial`,
which refuses what ORT cannot run as declared and reads back what the session really runs.

Example::

    engine_named("onnxruntime").setting_names()    # ("provider", "graph_optimization", "intra_op_threads")
"""

from __future__ import annotations

from protocol.engines.base import Engine
from protocol.study.schema import Bounds, StudyKey

ENGINE = Engine(
    name="onnxruntime",
    help="ONNX Runtime: the checkpoint exported by torch.onnx (cached, fingerprinted), run by an InferenceSession",
    tasks=("text-classification", "sentence-embedding"),
    devices=("cpu", "cuda"),
    precisions=("fp32",),
    fixed={"quantization": "none", "compile": False},
    settings=(
        StudyKey("engines.onnxruntime.provider", "string", '"CPUExecutionProvider"', None,
                 "ONNX Runtime execution provider: CPUExecutionProvider (cpu), CUDAExecutionProvider or "
                 "TensorrtExecutionProvider (cuda stack), ROCMExecutionProvider or MIGraphXExecutionProvider "
                 "(rocm stack); the trial refuses one its onnxruntime build lacks and reads back the one it runs"),
        StudyKey("engines.onnxruntime.graph_optimization", "string", '"all"', None,
                 'ONNX Runtime graph optimisation level: "disabled", "basic", "extended" or "all"'),
        StudyKey("engines.onnxruntime.intra_op_threads", "integer", "0", Bounds(0, 1024),
                 "ONNX Runtime intra-op threads; 0: the variant's threads"),
    ),
    requires=("torch", "transformers", "onnx", "onnxruntime"),
    docs={"runs": "text-classification, sentence-embedding; CPU (CUDA/ROCm providers: unrun here); fp32",
          "changes": "the forward: an ONNX graph exported by torch.onnx (TorchScript path, opset 17) run by ONNX "
                     "Runtime, its graph optimised by ORT; tokenizer, padding and post-processing are the task's"},
)
