"""ONNX Runtime as a trial engine: text classification and sentence embeddings run by an ``InferenceSession``.

At load (counted as load, never inside the pass) the checkpoint is exported to ONNX by torch's own exporter
(``torch.onnx.export`` with ``dynamo=False``, the TorchScript path, which needs nothing beyond torch; dynamic
batch and sequence axes; opset :data:`OPSET`), then run by an ``InferenceSession`` with the study's execution
provider, graph optimisation level and intra-op threads. The export is cached: its key is the sha256 over the
checkpoint's files (name and digest of each), the task, the opset, the attention implementation traced and the
torch, transformers and onnx versions (a model read differently by another transformers version is another
export); the folder is ``ISOCOST_ENGINE_CACHE`` when set and writable, else the trial's working folder
(:attr:`OnnxRuntimeEngine.work_dir`, where a caller sets one), else the user's cache
(``$XDG_CACHE_HOME/isocost/engines``, default ``~/.cache/isocost/engines``: so a campaign exports a checkpoint
once, its later trials reuse it), else (a container's read-only home) a temporary folder removed at close. Two exports
of one checkpoint give identical bytes here (torch 2.13, measured); the export's sha256 is recorded either way.

The models subclass the task's own (:class:`~protocol.tasks.classification.trial.Classifier`,
:class:`~protocol.tasks.embedding.trial.Embedder`): same tokenizer, same truncation and padding policy, same
post-processing in torch (softmax in float32; pooling in float32), same query pass: only the forward differs.
What ORT cannot honour as the variant declares it is refused (:class:`EngineRefused`): a precision other than
fp32, a quantization, ``compile = true``, a provider this ORT build lacks or one for another device, a model the
exporter cannot export. :meth:`OnnxRuntimeEngine.readback` reads the provider the session really runs (ORT falls
back to CPU silently when a GPU provider fails to start: the trial then refuses the mismatch).

Example::

    engine = OnnxRuntimeEngine()
    model = engine.load(trial_task("text-classification"), Path("model"), variant, torch, {},
                        {"provider": "CPUExecutionProvider"})
    labels, scores = model.predict(["a text"])
    engine.readback(model)["settings"]   # {"provider": "CPUExecutionProvider", "graph_optimization": "all", …}
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.records.stages import Variant
from protocol.tasks.classification.trial import Classifier
from protocol.tasks.embedding.trial import Embedder, _check_cls, pool
from runner.trial.engines.base import EngineRefused, TrialEngine
from runner.trial.model import DTYPES
from runner.trial.tasks.base import TaskModel, TrialTask

NAME = "onnxruntime"
#: The tasks this engine runs, and what the exported graph returns for each.
TASK_OUTPUTS = {"text-classification": "logits", "sentence-embedding": "last_hidden_state"}
#: The ONNX opset the exporter writes (LayerNormalization is a single operator from 17 on).
OPSET = 17
CACHE_ENV = "ISOCOST_ENGINE_CACHE"
#: The declared settings and their defaults (``intra_op_threads`` 0: the variant's ``threads``).
DEFAULTS: dict[str, Any] = {"provider": "CPUExecutionProvider", "graph_optimization": "all", "intra_op_threads": 0}
#: The study's words for ORT's graph optimisation levels.
LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
          "all": "ORT_ENABLE_ALL"}
#: Each execution provider this adapter knows: (the variant's device, the stack it runs on; None: any).
PROVIDERS: dict[str, tuple[str, str | None]] = {
    "CPUExecutionProvider": ("cpu", None), "CUDAExecutionProvider": ("cuda", "cuda"),
    "TensorrtExecutionProvider": ("cuda", "cuda"), "ROCMExecutionProvider": ("cuda", "rocm"),
    "MIGraphXExecutionProvider": ("cuda", "rocm"),
}
#: Why the trial's attention probe (torch's profiler) names no operator: the manifest's empty reason.
NO_TORCH_ATTENTION = "onnxruntime runs the attention inside its own graph: no torch operator to profile"
#: Two texts of different lengths: the exporter traces a padded batch (the masked path every pass takes).
TRACE_TEXTS = ["a short text", "a longer text for tracing the padded batch of the export"]


@dataclass(frozen=True)
class Export:
    """One exported checkpoint: where the graph is and what the manifest records of it."""

    path: Path
    facts: dict[str, Any]


@dataclass
class OnnxClassifier(Classifier):
    """The task's classifier with its forward run by an ``InferenceSession`` (``model`` and ``device`` unused)."""

    session: Any = None
    inputs: tuple[str, ...] = ()
    export: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {**_describe(self.export, self.tokenizer, self.variant), "num_labels": len(self.labels),
                "labels": [self.labels[i] for i in sorted(self.labels)]}

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> tuple[list[str], list[float]]:
        """Pad one batch per the padding policy, run the session, softmax in float32 as the task's own model."""
        torch = self.torch
        logits, _ = _run(self.session, self.tokenizer, self.inputs, features, self.variant)
        probs = torch.softmax(torch.from_numpy(logits).float(), dim=-1)
        scores, indices = probs.max(dim=-1)
        return [self.labels[int(i)] for i in indices.tolist()], [float(s) for s in scores.tolist()]

    def probe_encoded(self, features: list[dict[str, list[int]]]) -> Any:
        raise RuntimeError(NO_TORCH_ATTENTION)


@dataclass
class OnnxEmbedder(Embedder):
    """The task's embedder with its forward run by an ``InferenceSession``; pooling and queries are the task's."""

    session: Any = None
    inputs: tuple[str, ...] = ()
    export: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {**_describe(self.export, self.tokenizer, self.variant), "pooling": self.pooling,
                "normalize": self.normalize, "dimension": self.dimension, "pooled_in": "float32"}

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> Any:
        torch = self.torch
        hidden, mask = _run(self.session, self.tokenizer, self.inputs, features, self.variant)
        vectors = pool(torch, torch.from_numpy(hidden), torch.from_numpy(mask), self.pooling, self.normalize)
        return vectors.numpy()

    def probe_encoded(self, features: list[dict[str, list[int]]]) -> Any:
        raise RuntimeError(NO_TORCH_ATTENTION)


def _run(session: Any, tokenizer: Any, inputs: tuple[str, ...], features: list[dict[str, list[int]]],
         variant: Variant) -> tuple[Any, Any]:
    """One padded batch through the session: (its one output, the attention mask)."""
    padding = "longest" if variant.padding == "longest" else "max_length"
    batch = tokenizer.pad(features, padding=padding, max_length=variant.max_length, return_tensors="np")
    feeds = {name: batch[name].astype("int64", copy=False) for name in inputs}
    return session.run(None, feeds)[0], batch["attention_mask"]


def _describe(export: Mapping[str, Any], tokenizer: Any, variant: Variant) -> dict[str, Any]:
    """What the manifest records of the loaded model, as :func:`runner.trial.model.describe_common` does."""
    return {"architecture": export["architecture"], "model_type": export["model_type"],
            "parameters": export["parameters"], "dtype": DTYPES[variant.precision],
            "quantization": variant.quantization, "compiled": False, "attention": variant.attention,
            "tokenizer_class": type(tokenizer).__name__, "padding": variant.padding,
            "max_length": variant.max_length, "engine": NAME, "onnx_sha256": export["onnx_sha256"]}


class OnnxRuntimeEngine(TrialEngine):
    """ONNX Runtime for text classification and sentence embeddings (``engine = "onnxruntime"``)."""

    name = NAME

    def __init__(self) -> None:
        #: A folder where the export is cached without ISOCOST_ENGINE_CACHE (a caller sets it; the trial does not).
        self.work_dir: Path | None = None
        self._temporary: list[Path] = []

    def load(self, task: TrialTask, path: Path, variant: Variant, torch: Any, options: dict[str, Any],
             settings: Mapping[str, Any]) -> TaskModel:
        import onnxruntime as ort

        resolved = resolve_settings(settings, variant, ort.get_available_providers())
        refuse_variant(task.name, variant)
        model: OnnxClassifier | OnnxEmbedder  # the task's checks (pooling, dimension) come before the export
        if task.name == "text-classification":
            model = _classifier(path, variant, torch)
        else:
            model = _embedder(path, variant, torch, options)
        export = self.export(task.name, path, variant, torch)
        model.session = open_session(ort, export.path, resolved, variant)
        model.inputs = tuple(item.name for item in model.session.get_inputs())
        model.export, model.settings = export.facts, resolved
        return model

    def export(self, task: str, path: Path, variant: Variant, torch: Any) -> Export:
        """The checkpoint exported for ``task`` (from the cache when its key is there)."""
        return export_cached(task, path, variant, torch, self.cache_root())

    def cache_root(self) -> Path:
        """``ISOCOST_ENGINE_CACHE`` if set and writable, else the trial's working folder, else the user's cache
        folder if writable, else a temporary one."""
        configured = os.environ.get(CACHE_ENV, "")
        if configured and _writable(Path(configured)):
            return Path(configured) / "onnxruntime"
        if self.work_dir is not None:
            return self.work_dir / "engine-cache" / "onnxruntime"
        user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "isocost" / "engines"
        if _writable(user):
            return user / "onnxruntime"
        temporary = Path(tempfile.mkdtemp(prefix="isocost-onnx-"))
        self._temporary.append(temporary)
        return temporary

    def readback(self, model: TaskModel) -> dict[str, Any]:
        """The session's provider, optimisation level and threads as ORT reports them, and the export's facts."""
        import onnxruntime as ort

        if not isinstance(model, (OnnxClassifier, OnnxEmbedder)):
            raise TypeError(f"not a model this engine loaded: {type(model).__name__}")
        session = model.session
        options = session.get_session_options()
        threads = int(options.intra_op_num_threads)
        declared = model.settings["intra_op_threads"]
        # 0 means "the variant's threads": reported as 0 only when the session really has that many.
        reported = 0 if declared == 0 and threads == model.variant.threads else threads
        levels = {getattr(ort.GraphOptimizationLevel, value): key for key, value in LEVELS.items()}
        return {"name": NAME, "version": ort.__version__,
                "settings": {"provider": session.get_providers()[0],
                             "graph_optimization": levels.get(options.graph_optimization_level,
                                                              str(options.graph_optimization_level)),
                             "intra_op_threads": reported},
                "intra_op_threads_used": threads, "providers": list(session.get_providers()),
                "export": dict(model.export)}

    def close(self, model: TaskModel | None) -> None:
        """Drop the session (ORT frees its memory with it) and any temporary export folder."""
        if isinstance(model, (OnnxClassifier, OnnxEmbedder)):
            model.session = None
        for folder in self._temporary:
            shutil.rmtree(folder, ignore_errors=True)
        self._temporary.clear()


def resolve_settings(settings: Mapping[str, Any], variant: Variant, available: list[str]) -> dict[str, Any]:
    """The study's settings with the defaults filled in, each checked against this ORT build and the variant."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise EngineRefused(f"onnxruntime has no setting {', '.join(unknown)} (it has {', '.join(DEFAULTS)})")
    resolved = {**DEFAULTS, **settings}
    provider = resolved["provider"]
    if provider not in available:
        raise EngineRefused(f"execution provider {provider!r} is not in this onnxruntime build (available: "
                            f"{', '.join(available)})")
    device, stack = PROVIDERS.get(provider, (None, None))
    if device is None:
        raise EngineRefused(f"execution provider {provider!r} is not one this adapter runs (it runs "
                            f"{', '.join(PROVIDERS)})")
    if device != variant.device or stack not in (None, variant.stack):
        raise EngineRefused(f"execution provider {provider!r} does not run on this variant's device "
                            f"{variant.device!r} (stack {variant.stack})")
    if resolved["graph_optimization"] not in LEVELS:
        raise EngineRefused(f"graph_optimization {resolved['graph_optimization']!r} is not one of "
                            f"{', '.join(LEVELS)}")
    threads = resolved["intra_op_threads"]
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise EngineRefused(f"intra_op_threads must be a whole number >= 0 (0: the variant's threads), not {threads!r}")
    return resolved


def refuse_variant(task: str, variant: Variant) -> None:
    """What the variant declares and this adapter cannot honour (refused before any export)."""
    if task not in TASK_OUTPUTS:
        raise EngineRefused(f"onnxruntime runs the tasks {', '.join(TASK_OUTPUTS)}, not {task!r}")
    if variant.precision != "fp32":
        raise EngineRefused(f"precision {variant.precision} is not run by this onnxruntime adapter (the export is "
                            "fp32; a reduced-precision graph is unverified here): use precision fp32")
    if variant.quantization != "none":
        raise EngineRefused(f"quantization {variant.quantization} is a torch quantization; the onnxruntime "
                            "adapter runs the unquantized fp32 export")
    if variant.compile:
        raise EngineRefused("compile = true is torch.compile; onnxruntime compiles its own graph "
                            "(graph_optimization): use compile = false")


def open_session(ort: Any, model: Path, settings: Mapping[str, Any], variant: Variant) -> Any:
    """An ``InferenceSession`` on the exported graph with the study's provider, level and threads."""
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[settings["graph_optimization"]])
    options.intra_op_num_threads = settings["intra_op_threads"] or variant.threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: the readback, not the log, tells a provider fallback
    try:
        return ort.InferenceSession(str(model), sess_options=options, providers=[settings["provider"]])
    except Exception as exc:  # ORT raises its own exception types  # noqa: BLE001
        raise EngineRefused(f"onnxruntime could not open the exported model: {type(exc).__name__}: {exc}") from exc


def cache_key(path: Path, task: str, variant: Variant, torch: Any) -> str:
    """sha256 over the checkpoint's files (relative name and digest of each), the task, opset, attention
    implementation and the exporter's versions (torch, transformers, onnx)."""
    import onnx
    import transformers

    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):  # read as the loader reads them
        with file.open("rb") as handle:
            digest.update(f"{file.relative_to(path).as_posix()}\0{hashlib.file_digest(handle, 'sha256').hexdigest()}\n"
                          .encode())
    versions = {"task": task, "opset": OPSET, "attention": variant.attention, "torch": torch.__version__,
                "transformers": transformers.__version__, "onnx": onnx.__version__}
    digest.update(json.dumps(versions, sort_keys=True).encode())
    return digest.hexdigest()


def _writable(root: Path) -> bool:
    """``root`` exists (made if it can be) and this process may write in it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return root.is_dir() and os.access(root, os.W_OK | os.X_OK)


def export_cached(task: str, path: Path, variant: Variant, torch: Any, root: Path) -> Export:
    """The export for this key from ``root`` when its recorded sha256 still matches, else a new one."""
    key = cache_key(path, task, variant, torch)
    folder = root / key
    graph, facts_file = folder / "model.onnx", folder / "export.json"
    if graph.is_file() and facts_file.is_file():
        facts = json.loads(facts_file.read_text())
        if facts.get("onnx_sha256") == _sha256(graph):
            return Export(graph, {**facts, "cache_hit": True, "cache_dir": str(folder)})
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    partial = folder / f"model.onnx.{os.getpid()}.partial"
    try:
        facts = export_checkpoint(task, path, torch, partial, variant.attention)
    except Exception as exc:  # whatever the exporter raises: the model cannot be exported  # noqa: BLE001
        partial.unlink(missing_ok=True)
        raise EngineRefused(f"the checkpoint could not be exported to ONNX (torch.onnx.export, opset {OPSET}): "
                            f"{type(exc).__name__}: {exc}") from exc
    finally:
        gc.collect()  # the traced torch model is not kept: the trial's memory is the session's
    os.replace(partial, graph)  # atomic: two trials exporting at once leave one whole file
    facts = {**facts, "cache_key": key, "onnx_sha256": _sha256(graph),
             "export_s": round(time.perf_counter() - started, 3)}
    partial_facts = folder / f"export.json.{os.getpid()}.partial"
    partial_facts.write_text(json.dumps(facts, indent=1, sort_keys=True))
    os.replace(partial_facts, facts_file)
    return Export(graph, {**facts, "cache_hit": False, "cache_dir": str(folder)})


def export_checkpoint(task: str, path: Path, torch: Any, target: Path, attention: str = "sdpa") -> dict[str, Any]:
    """Trace the checkpoint in fp32 on the CPU with a padded batch and write its graph to ``target``.

    The trace batch is always :data:`TRACE_TEXTS`, untruncated: a batch without padding would let the exporter
    record the unmasked path, wrong for every padded batch after it."""
    import onnx
    import transformers
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    loader = AutoModelForSequenceClassification if task == "text-classification" else AutoModel
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = loader.from_pretrained(str(path), local_files_only=True, attn_implementation=attention)
    model.to(dtype=torch.float32)
    model.eval()
    batch = tokenizer(TRACE_TEXTS, padding=True, return_tensors="pt")
    names = list(batch.keys())
    output = TASK_OUTPUTS[task]
    wrapper = _forward_module(torch, model, names, output)
    wrapper.eval()  # a new module trains by default, and the exporter restores that mode on the model after
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes[output] = {0: "batch"} if output == "logits" else {0: "batch", 1: "sequence"}
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript path's deprecation and tracer warnings
        torch.onnx.export(wrapper, tuple(batch[name] for name in names), str(target), dynamo=False,
                          opset_version=OPSET, input_names=names, output_names=[output], dynamic_axes=axes)
    config = model.config
    return {"exporter": "torch.onnx.export (TorchScript, dynamo=False)", "opset": OPSET,
            "torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__,
            "inputs": names, "output": output, "architecture": list(getattr(config, "architectures", None) or []),
            "model_type": getattr(config, "model_type", None),
            "parameters": int(sum(p.numel() for p in model.parameters()))}


def _forward_module(torch: Any, model: Any, names: list[str], output: str) -> Any:
    """A ``torch.nn.Module`` running the model's forward on positional tensors and returning its one output."""

    class Forward(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return getattr(self.model(**dict(zip(names, tensors, strict=True))), output)

    return Forward()


def _sha256(file: Path) -> str:
    with file.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _classifier(path: Path, variant: Variant, torch: Any) -> OnnxClassifier:
    """The classifier's tokenizer and labels (its session comes after the export)."""
    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    labels = {int(k): str(v) for k, v in config.id2label.items()}
    return OnnxClassifier(tokenizer=tokenizer, model=None, variant=variant, torch=torch, labels=labels, device=None)


def _embedder(path: Path, variant: Variant, torch: Any, options: dict[str, Any]) -> OnnxEmbedder:
    """The embedder with the task's own checks (pooling, [CLS], the declared dimension), before any export."""
    from transformers import AutoConfig, AutoTokenizer

    pooling = options.get("pooling")
    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling {pooling!r} is not one this trial runner can do (mean, cls)")
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if pooling == "cls":
        _check_cls(tokenizer)
    dimension = int(options["dimension"])
    hidden = getattr(AutoConfig.from_pretrained(str(path), local_files_only=True), "hidden_size", dimension)
    if hidden != dimension:
        raise ValueError(f"the model's hidden size is {hidden}, the study declares dimension {dimension}")
    queries = [(str(item[0]), str(item[1])) for item in options.get("queries", {}).get("items", [])]
    return OnnxEmbedder(tokenizer=tokenizer, model=None, variant=variant, torch=torch, device=None, pooling=pooling,
                        normalize=bool(options["normalize"]), dimension=dimension, queries=queries)


TRIAL_ENGINE = OnnxRuntimeEngine()
