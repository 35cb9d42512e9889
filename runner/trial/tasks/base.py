"""What a task is, for the trial: a loaded model (:class:`TaskModel`) and the task that loads it (:class:`TrialTask`).

The trial (``runner.trial.run``, ``runner.trial.measured_pass``) drives every task through these two types and
nothing else: no attribute is looked up by name. A task's trial half subclasses both and keeps its
``TRIAL_TASK`` in the module its host half names (``Task.trial_module``): for the tasks shipped with isocost a
module beside this one, for your own a ``trial.py`` in your task's package. It lives here, under
``runner/trial/``, because it is the only code that imports torch and transformers.

What a pass writes is declared, not coded: :attr:`TrialTask.pass_files`, in the order one batch writes them,
one of them the JSON-lines file with a line per id (:meth:`TrialTask.lines`, what a fault injection may corrupt),
any other a binary file whose bytes :meth:`TrialTask.chunk` gives (with its header before the first batch).
:class:`runner.trial.tasks.sink.OutputSink` writes them for every task.

Example::

    class EchoTrial(TrialTask):
        name = "echo"
        pass_files = (PassFile("echo.jsonl"),)
        def load(self, path, variant, torch, options): return EchoModel(...)
        def lines(self, ids, outputs): return "".join(json.dumps({"id": i, "text": o}) + "\\n" for i, o in …)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.records.stages import Variant

#: One batch's features: token ids per input (``input_ids``, ``attention_mask``), truncated, not padded.
Features = list[dict[str, list[int]]]


class TaskModel(ABC):
    """A checkpoint loaded under one variant's settings: what the warm-up, the probe and the measured pass run."""

    #: When a list (CUDA/ROCm trials during the measured pass), each forward appends its (start, stop) CUDA
    #: events: device time of the forward alone. None elsewhere.
    forward_events: list[tuple[Any, Any]] | None = None
    #: A serving run's first-token hook (``runner.trial.serving.sut`` sets it before each batch; None offline).
    on_first_token: Callable[..., None] | None = None
    #: Whether the model calls :attr:`on_first_token` when rows of a batch have their first token (``hook()``:
    #: every row, ``hook(rows)``: those rows), as a generator does. False: the model generates no tokens, and a
    #: server study that measures token latencies refuses it rather than report every first token at completion.
    reports_first_token: bool = False

    @abstractmethod
    def tokenize(self, texts: list[str]) -> Features:
        """Token ids per text, truncated at the variant's ``max_length``, not padded yet."""

    @abstractmethod
    def untruncated_lengths(self, texts: list[str]) -> list[int]:
        """Tokens per text without truncation (the trial's ``truncated_count``)."""

    @abstractmethod
    def predict_encoded(self, features: Features) -> Any:
        """One batch run and brought to the host: the task's outputs for these inputs, in order."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the manifest records of the loaded model."""

    def predict(self, texts: list[str]) -> Any:
        return self.predict_encoded(self.tokenize(texts))

    @property
    def concurrent(self) -> bool:
        """Whether it runs several batches at once (:meth:`predict_concurrent`; ``[traffic] max_batches_in_flight``)."""
        return False

    def predict_concurrent(self, features: Features, on_first_token: Callable[..., None] | None) -> Any:
        """One of several batches in flight at once, with its own first-token hook (a model that is
        :attr:`concurrent`); a model that runs one batch at a time has none."""
        raise NotImplementedError(f"{type(self).__name__} runs one batch at a time (concurrent is False)")

    def probe_encoded(self, features: Features) -> Any:
        """The forward the attention probe profiles (a generator: one token only)."""
        return self.predict_encoded(features)

    def take_batch_figures(self) -> dict[str, float]:
        """The task's own figures since the last call, added to the batch's ``batches.jsonl`` line ({} if none)."""
        return {}

    def finish_pass(self, out: Path) -> dict[str, Any]:
        """Work after the measured pass, outside ``pass_s`` and inside ``write_s`` (an embedding's queries);
        returns what the manifest records of it ({} if none)."""
        return {}


@dataclass(frozen=True)
class PassFile:
    """One file a batch of the measured pass appends to: the JSON-lines file (``binary`` False, one line per id)
    or a binary file beside it."""

    name: str
    binary: bool = False


class TrialTask(ABC):
    """One task as the trial runs it: load the model, and say what a batch's outputs write."""

    #: The study's ``task`` value (the host half's ``name``).
    name: str
    #: The files one batch writes, in order; exactly one is the JSON-lines file (``binary`` False).
    pass_files: tuple[PassFile, ...]

    @abstractmethod
    def load(self, path: Path, variant: Variant, torch: Any, options: dict[str, Any]) -> TaskModel:
        """The checkpoint under the variant's settings; ``options`` are the spec's ``task_options``."""

    @abstractmethod
    def lines(self, ids: Sequence[str], outputs: Any) -> str:
        """The JSON lines of one batch (materialised inside the measured pass; a fault injection may corrupt them)."""

    def chunk(self, name: str, outputs: Any, first: bool) -> bytes:
        """The bytes one batch appends to the binary pass file ``name`` (``first``: its header before them)."""
        raise NotImplementedError(f"task {self.name} declares no binary pass file {name!r}")

    def answer(self, ids: Sequence[str], outputs: Any) -> str:
        """A serving run's answers to one batch (``runner.trial.serving``): one JSON line per id holding all that
        the task's gate judges. The offline lines by default; a task whose offline lines do not hold its outputs
        (an embedding's vectors go to a binary file) puts them in and says how to read them back
        (:meth:`answer_outputs`)."""
        return self.lines(ids, outputs)

    def answer_outputs(self, answers: Sequence[dict[str, Any]]) -> Any:
        """The outputs that :meth:`answer` turned into ``answers`` (parsed lines, one per id), for writing the pass
        files; None when the answers are the offline lines themselves (they are written as they are)."""
        return None

    def token_counts(self, outputs: Any) -> Sequence[int] | None:
        """Tokens generated per output (a serving run's time per output token); None for a task that generates none."""
        return None

    def perturb(self, ids: Sequence[str], outputs: Any, model: Any, picked: set[str]) -> Any:
        """Test fault ``disagree:SHARE``: the outputs changed on the ``picked`` ids, well-formed still."""
        raise NotImplementedError(f"task {self.name} has no disagree fault")

    @property
    def lines_file(self) -> str:
        return next(f.name for f in self.pass_files if not f.binary)
