"""What a task is, for the host: the unit every stage after the pass check is blind to.

A task (text classification, sentence embeddings, …) says what a valid output of one pass is and how two
passes compare: the files a pass writes (sealed in its raw row), the reference it is checked against (built
from the frozen ``corpus_index.csv`` and the study), how a pass's outputs are read, the check of one pass
against the study's quality rule (a :class:`~protocol.tasks.pass_check.PassCheck`, which the raw row, the verdicts,
the summary and the decision read), the agreement of two passes by id (an
:class:`~protocol.tasks.pass_check.Agreement`), and which metrics it knows. Everything after the pass check (summary,
decision, costing, bundles) is the same for every task. Tasks are found by name, from their folders, in
:mod:`protocol.tasks`.

Example::

    task = task_named("text-classification", "study.toml, key task")
    outputs = task.read_pass(trial_dir)
    task.check_pass(outputs, task.reference(index_rows, study), study.quality).accepted
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from protocol.study.keys import StudyKey
from protocol.tasks.pass_check import Agreement, PassCheck


@dataclass(frozen=True)
class TaskExample:
    """A tiny valid case of a task: what the conformance test (``tests/unit/test_task_conformance.py``) runs every
    task through alike. The study's rule (``metric``, ``minimum``, ``extra``: its own ``[quality]`` keys) and
    ``task_options``, ``corpus_index.csv`` rows, and one batch's ``outputs`` for their ids as the trial half's
    model returns them; ``after``: the pass's other writes (renamed pass files, ids, outputs: an embedding's
    queries); ``described``: the manifest's ``model`` block, as the trial half's model describes itself."""

    metric: str
    minimum: float
    extra: Mapping[str, Any]
    task_options: Mapping[str, Any]
    index_rows: tuple[Mapping[str, str], ...]
    outputs: Any
    after: tuple[tuple[Mapping[str, str], tuple[str, ...], Any], ...] = ()
    described: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InitOption:
    """One option of ``isocost init`` that a task reads: its flag, help, default and kind (``text``, ``integer``,
    ``file``: an existing file; ``choices`` for a closed set of texts)."""

    flag: str
    help: str
    default: Any = None
    kind: str = "text"
    choices: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The name its value goes by: ``--max-new-tokens`` → ``max_new_tokens``."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class InitInputs:
    """What ``isocost init`` gives a task's init hooks: the files, the records read, the reference variant and
    the task's own option values (by :attr:`InitOption.key`; None where not given)."""

    out: Path
    corpus: Path
    tuning: Path
    model: Path
    records: tuple[Any, ...]
    tuning_records: tuple[Any, ...]
    reference: str
    values: Mapping[str, Any]

    def rel(self, path: Path) -> str:
        """``path`` relative to the study file's folder."""
        import os

        return os.path.relpath(Path(path).resolve(), self.out.parent)


class TaskInit(Protocol):
    """A task's part of ``isocost init``: its options, its checks of the inputs, its lines of the study."""

    #: The options of ``isocost init`` this task reads.
    options: tuple[InitOption, ...]
    #: What a configuration does to every input, in the study's question ("classifies").
    verb: str

    def check_options(self, values: Mapping[str, Any]) -> None:
        """The task's option values (None where not given; ``tuning``: the tuning split given or None) before
        anything is read: UserError naming the flag. Another task's option was refused before."""

    def split(self, values: Mapping[str, Any], corpus: Path, records: tuple[Any, ...],
              out_dir: Path) -> tuple[Path, Path, tuple[Path, ...], Mapping[str, Any]] | None:
        """The task's own tuning split when none is given (final, tuning, files written, its option values as
        they now are), or None: the usual split."""

    def inputs(self, facts: InitInputs) -> Any:
        """The task's checks of the corpora and the model (every problem at once); what the study is written from."""

    def max_length(self, found: Any, lengths: tuple[int, ...], limit: int) -> int | None:
        """``base.max_length`` for these token lengths within the model's limit, or None: the usual rule."""

    def input_lines(self, found: Any, facts: InitInputs) -> list[str]:
        """Lines after ``[model]``: a comment on the inputs, or the task's input tables."""

    def table_lines(self, found: Any, facts: InitInputs) -> list[str]:
        """The task's own tables after the length buckets."""

    def quality_lines(self, found: Any, facts: InitInputs) -> list[str]:
        """``[quality]``, its minimum left for ``isocost tune``."""

    def report(self, found: Any, facts: InitInputs) -> tuple[list[str], list[str], int, str]:
        """What ``isocost init`` prints: lines, warnings, and the units ``tune`` scores (count, word)."""


class Task(Protocol):
    """One task, host side (the trial side is ``runner.trial.tasks``)."""

    #: The study's ``task`` value.
    name: str
    #: The files one pass writes into its trial directory besides spec, manifest, status and batches.
    output_files: tuple[str, ...]
    #: The module that holds the task's trial half, ``TRIAL_TASK`` (a ``runner.trial.tasks.base.TrialTask``):
    #: imported by the trial only, never by the host (it imports torch).
    trial_module: str
    #: The task's own study keys (its tables, its ``[quality]`` keys), each with its type, default, bounds and
    #: help: ``protocol.study.schema.KEYS`` adds them to the common ones.
    study_keys: tuple[StudyKey, ...]
    #: The values ``[quality] metric`` may take, the first the default.
    metrics: tuple[str, ...]
    #: Whether every corpus input must carry a ``label``.
    labels_required: bool
    #: Per-input text fields the corpus must carry besides id, text (and label), e.g. a generation's reference.
    corpus_fields: tuple[str, ...]
    #: The subgroups ``[quality] subgroups`` may name ("length_bucket" needs ``[[length_buckets]]``).
    subgroups: tuple[str, ...]
    #: Top-level study tables this task reads (name → what it holds), e.g. an embedding's ``[embedding]``.
    option_tables: Mapping[str, str]

    def parse_options(self, top: Any, base_dir: Path) -> dict[str, Any]:
        """The task's own study tables (``top`` is the study's :class:`~protocol.study.reader.TableReader`), as
        the JSON-ready ``task_options`` every trial spec carries; UserError naming the key."""

    def parse_quality_extras(self, quality: Any) -> dict[str, Any]:
        """The task's own ``[quality]`` keys (``quality`` is the table's reader), e.g. ``min_cosine``."""

    def check_inputs(self, study: Any, corpus: Sequence[Any], tuning: Sequence[Any]) -> None:
        """The task's own checks of its inputs before anything runs (``init``, ``check``, ``tune``, ``run``),
        every problem at once: UserError or StudyErrors naming the file and the key (e.g. an embedding's query
        set against the corpus)."""

    def frozen_files(self, study: Any) -> Mapping[str, Path]:
        """Input files the campaign keeps a byte copy of at its start (name in the campaign directory → the
        study's file), read back when its frozen study is parsed (e.g. an embedding's query set)."""

    def tuning_study(self, study: Any) -> Any:
        """The study as a pass over the tuning split sees it (``isocost tune``; e.g. the tuning queries)."""

    def scored_units(self, reference: Any) -> int:
        """How many units the metric averages over (the inputs; the queries of a retrieval metric): the ``n``
        of ``isocost tune``'s rule and of its bootstrap, whose indices ``resampled_metric`` takes."""

    def check_model(self, model_dir: Path, records: Sequence[Any], study: Any, where: str) -> tuple[str, ...]:
        """The checkpoint can run this study with these inputs (corpus and tuning records), from its files alone
        (a classifier: the corpus labels are the model's); UserError naming the fix, else warnings."""

    def reference(self, index_rows: Sequence[Mapping[str, str]], study: Any,
                  subgroups: Sequence[str] | None = None) -> Any:
        """What a pass is checked against, from ``corpus_index.csv``-shaped rows (id, label, n_tokens,
        length_bucket) and the study; ``subgroups`` (default: the study's) are the groups scored apart."""

    def read_pass(self, trial_dir: Path) -> Any:
        """One pass's outputs as written (malformed parts described, never fatal); ``.ids`` in file order."""

    def check_pass(self, outputs: Any, reference: Any, study: Any) -> PassCheck:
        """The verdict on one pass under the study's quality rule."""

    def agreement(self, candidate: Any, reference: Any, study: Any) -> Agreement:
        """How a pass compares with the reference variant's pass by id."""

    def pass_figures(self, trial_dir: Path, pass_s: float | None) -> dict[str, Any]:
        """The task's own figures of one accepted pass (a generation's output tokens per second…), {} if none."""

    def is_proportion(self, metric: str) -> bool:
        """Whether the metric is a share of inputs (its standard error is binomial), for ``isocost tune``."""

    def resampled_metric(self, outputs: Any, reference: Any, study: Any) -> Callable[[Sequence[int]], float]:
        """The metric over a resample of the scored units (indices in their order): for a seeded bootstrap."""

    #: The task's part of ``isocost init``.
    init: TaskInit
    #: The task's row of the table in docs/tasks.md (generated): ``yields`` (what each input yields), ``model``
    #: (the checkpoint it runs), ``metrics`` (its metrics, in words) and ``agreement`` (with the reference).
    docs: Mapping[str, str]

    def example(self) -> TaskExample:
        """A tiny valid case of the task (:class:`TaskExample`), for the conformance test every task passes."""
