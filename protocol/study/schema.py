"""The declared study schema: every key with its type, default, bounds and help text (one line each).

This one table feeds the parser (:meth:`protocol.study.reader.TableReader.declared` reads each
key's type, default and bounds from it; tests/unit/test_study_schema.py checks that every table
accepts exactly its declared keys, gives the declared defaults, refuses just outside the declared
bounds and a value of another type), ``isocost init`` (every key written with
its default and this help text), the key table of docs/study.md (``python -m
protocol.study.schema`` prints it; tests/cli/test_docs.py keeps them equal) and
``isocost check``. Paths in a study resolve relative to the study file.

Example::

    KEYS["campaign.repetitions"].bounds  # Bounds(low=1, high=1000)
    KEYS["quality.minimum"].meaning      # "minimum of the metric on the final corpus, set on the tuning split …"
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from protocol.engines import all_engines, image_stacks
from protocol.study.keys import KINDS, Bounds, StudyKey, key_rows
from protocol.tasks import all_tasks, task_named

__all__ = ["KEYS", "KINDS", "Bounds", "COMMON_KEYS", "StudyKey", "bound", "key_rows", "keys_for", "markdown_table",
           "table_keys", "task_key_table"]

_MIB, _PIB, _DAY = 2**20, 2**50, 86400
_ROWS: tuple[tuple[str, str, str, Bounds | None, str], ...] = (
    ("schema_version", "integer", "required", None, "study format version: 1"),
    ("name", "string", "required", None,
     "short name: up to 100 letters, digits, '-', '_', '.', the first a letter or digit"),
    ("question", "string", "required", None, "the decision question, in words, written before any test"),
    ("scenario", "string", "required", None,
     '"offline" (corpus processing) or "server" (requests at a declared rate, MLPerf LoadGen\'s Server scenario; '
     'needs [traffic])'),
    ("expected_artifacts", "integer", "1", Bounds(1, 1_000_000),
     "accepted corpora the job needs, declared before the campaign"),
    ("task", "string", '"text-classification"', None,
     "what each input yields and how a pass is checked (docs/tasks.md)"),
    ("corpus.path", "string", "required", None,
     "the final comparison corpus (.jsonl or .csv: id, text, label), relative to the study"),
    ("corpus.fingerprint", "string", "required", None, "sha256 of the corpus file, as `isocost fingerprint` prints it"),
    ("tuning.path", "string", "required", None,
     "separate tuning split (thresholds and warm-up come from it, never the final corpus)"),
    ("tuning.fingerprint", "string", "required", None, "sha256 of the tuning file"),
    ("model.path", "string", "required", None,
     "checkpoint directory (save_pretrained: config.json with id2label, tokenizer.json)"),
    ("model.fingerprint", "string", "required", None, "sha256 of the checkpoint directory tree"),
    ("length_buckets[].name", "string", "none: no buckets", None,
     "name of a length bucket (tokens of the model's tokenizer): a plain name like the series'; at most 64 buckets"),
    ("length_buckets[].max_tokens", "integer", "open-ended", Bounds(1, _MIB),
     "inclusive upper bound in tokens; only the last bucket may omit it"),
    ("quality.metric", "string", "required", None,
     '"accuracy" or "macro_f1" (averaged over the labels of the truth or the predictions, as scikit-learn\'s '
     'f1_score(average="macro")); each task has its own (docs/tasks.md)'),
    ("quality.minimum", "number", "required", Bounds(0, 1),
     "minimum of the metric on the final corpus, set on the tuning split (`isocost tune`)"),
    ("quality.tuned_on", "string", "required", None, 'where the minimum was set: "tuning" (never "corpus")'),
    ("quality.reference_variant", "string", "required", None,
     "variant id the others are compared with, e.g. \"precision=fp32\""),
    ("quality.max_metric_drop", "number", "0.0", Bounds(0, 1),
     "largest metric drop against the reference still equivalent"),
    ("quality.min_agreement", "number", "0.0", Bounds(0, 1), "smallest share of predictions equal to the reference's"),
    ("quality.subgroups", "array", "[]", None, 'subgroups evaluated too: "label", "length_bucket"'),
    ("quality.replay", "string", '"identical"', None,
     'what replay means: "identical", "bounded" (scores) or "quality"'),
    ("quality.max_score_delta", "number", "none", Bounds(0, 1),
     'largest score difference; required with replay = "bounded"'),
    ("warmup.source", "string", '"tuning"', None, "warm-up inputs come from the tuning split"),
    ("warmup.inputs", "integer", "8", Bounds(0, 100_000), "warm-up inputs per trial (at most the tuning split's size)"),
    ("warmup.runs", "integer", "1", Bounds(0, 100), "warm-up runs over those inputs before the measured pass"),
    ("warmup.recompilation", "string", '"warmup"', None, "recompilation happens inside the warm-up"),
    ("campaign.repetitions", "integer", "5", Bounds(1, 1000),
     "full passes per variant (variants × repetitions at most 100,000)"),
    ("campaign.order", "string", '"rotate"', None, "rotated order, so no variant always runs first"),
    ("campaign.trial_timeout_s", "number", "none (no limit)", Bounds(0, 7 * _DAY, low_open=True),
     "a trial running longer is killed and kept as a timeout row"),
    ("campaign.seeds", "array", "[]", None,
     "common seeds (at most 100, each a seed as base.seed): every variant runs under each, results kept apart"),
    ("campaign.memory_limit_bytes", "integer", "none: derived from the engine's machine", Bounds(6 * _MIB, _PIB),
     "container memory limit (container launchers; at least Docker's 6 MiB)"),
    ("campaign.cpu_limit", "number", "none: all the engine's CPUs", Bounds(0.01, 4096),
     "container CPU limit in CPUs (container launchers)"),
    ("campaign.output_file_limit_bytes", "integer", "none: 4 GiB", Bounds(2**16, _PIB),
     "largest file a trial container may write (container launchers)"),
    ("base.stack", "string", "required", None, '"cpu", "cuda" or "rocm"'),
    ("base.device", "string", "required", None, '"cpu" (cpu stack) or "cuda" (cuda and rocm stacks)'),
    ("base.precision", "string", "required", None, '"fp32", "bf16" or "fp16" (GPU only)'),
    ("base.quantization", "string", "required", None, '"none" or "int8-dynamic" (CPU only)'),
    ("base.compile", "boolean", "required", None, "torch.compile the model: true or false"),
    ("base.attention", "string", "required", None, '"sdpa" or "eager"'),
    ("base.batch_size", "integer", "required", Bounds(1, 65536), "inputs per forward pass"),
    ("base.padding", "string", "required", None, '"longest" (per batch) or "max_length"'),
    ("base.max_length", "integer", "required", Bounds(1, _MIB),
     "tokens per input; longer inputs are truncated and counted"),
    ("base.length_grouping", "string", "required", None, '"none" or "sort" (batches of similar length)'),
    ("base.resume", "string", "required", None, '"none" or "halve-batch-on-oom"'),
    ("base.threads", "integer", "required", Bounds(1, 1024), "torch CPU threads"),
    ("base.seed", "integer", "required", Bounds(0, 2**32 - 1), "random seed"),
    ("base.deterministic", "boolean", "required", None, "torch deterministic algorithms: true or false"),
    ("base.engine", "string", '"transformers"', None,
     'what runs the model: "transformers" (PyTorch), or another engine found by name (docs/engines.md)'),
    ("engines", "table", "none: each engine's defaults", None,
     "table: one sub-table per engine a variant runs, [engines.NAME], its settings (docs/engines.md)"),
    ("traffic", "table", "none: offline", None,
     'table: the requests of a scenario = "server" study: a rate or a series of rates (one variant per '
     'configuration and rate), latency bound, query count (docs/serving.md)'),
    ("series[].name", "string", "required", None,
     "name of a series (at least one): up to 64 letters, digits, '_', '.', '-', the first a letter or digit"),
    ("series[].field", "string", "required", None, "the ONE variant field this series varies"),
    ("series[].values", "array", "required", None, "the values it takes; each makes a variant"),
    ("deadline.start", "string", "required in [deadline]", None, "access window start, local time"),
    ("deadline.end", "string", "required in [deadline]", None, "access window end, local time"),
    ("deadline.tz", "string", "required in [deadline]", None, "IANA time zone of start and end"),
    ("deadline.waiting_h", "number", "0", Bounds(0, 87_840),
     "declared waiting the rental must be held for (at most 87840 h, ten years)"),
    ("costing.catalog", "string", "the shipped dated snapshot", None, "your dated plan catalog CSV"),
    ("images.cpu / images.cuda / images.rocm", "string", "none: images/images.lock", None,
     "REPO@sha256:… to run for that stack (an engine's own image too: images.cpu-vllm)"),
    # [job] (docs/job.md): the real job a study is benchmarked for; without it decide prices the campaign itself
    ("job.inputs", "integer", "required in [job] (or inputs_per_day and days)", Bounds(1, 10**12),
     "inputs the job processes (or inputs_per_day × days)"),
    ("job.inputs_per_day", "integer", "none", Bounds(1, 10**12), "inputs per day (with days)"),
    ("job.days", "integer", "none", Bounds(1, 3650), "days at inputs_per_day"),
    ("job.corpora", "integer", "expected_artifacts", Bounds(1, 1_000_000), "accepted corpora the job must deliver"),
    ("job.cards_per_lot", "integer", "the catalog's cards per lot", Bounds(1, 1024),
     "workers one rented lot runs in parallel"),
    ("job.fit_level", "number", "0.95", Bounds(0.5, 1, high_open=True),
     "probability of fitting the deadline needed to be ranked (0.5 to 1)"),
    ("job.bootstrap_resamples", "integer", "2000", Bounds(100, 20_000), "bootstrap resamples over passes"),
    ("job.bootstrap_seed", "integer", "0", Bounds(0, 2**64 - 1), "seed of the bootstrap (recorded in the decision)"),
    ("job.mix", "table", "the corpus's own bucket shares", None,
     "table: length bucket = share of the job's inputs (each in [0, 1], summing to 1)"),
)

#: The keys every study has, whatever its task; a task's own keys are its package's (``Task.study_keys``).
COMMON_KEYS: dict[str, StudyKey] = {row[0]: StudyKey(*row) for row in _ROWS}


class _Keys(Mapping[str, StudyKey]):
    """Every declared key: the common ones, then each task's own, tasks in :func:`protocol.tasks.task_names` order
    (a key two tasks declare must be declared alike)."""

    def _all(self) -> dict[str, StudyKey]:
        keys = dict(COMMON_KEYS)
        for task in all_tasks():
            for entry in task.study_keys:
                if keys.setdefault(entry.key, entry) != entry:
                    raise ValueError(f"task {task.name} declares study key {entry.key} unlike another declaration")
        for engine in all_engines():
            for entry in engine.settings:
                if not entry.key.startswith(f"engines.{engine.name}.") or keys.setdefault(entry.key, entry) != entry:
                    raise ValueError(f"engine {engine.name} declares study key {entry.key} outside "
                                     f"[engines.{engine.name}] or unlike another declaration")
        return keys

    def __getitem__(self, key: str) -> StudyKey:
        return COMMON_KEYS[key] if key in COMMON_KEYS else self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


KEYS: Mapping[str, StudyKey] = _Keys()


def keys_for(task: str) -> dict[str, StudyKey]:
    """The keys a study of ``task`` has (what ``isocost init --task`` writes): every task's, and its own."""
    return {**COMMON_KEYS, **{entry.key: entry for entry in task_named(task).study_keys}}


def task_key_table(task: str) -> str:
    """The key table of one task's own keys (docs/tasks.md), '' when it has none."""
    own = task_named(task).study_keys
    return _table(own) if own else ""


def table_keys(table: str, task: str) -> tuple[str, ...]:
    """The keys declared directly in ``table`` ("" the top level, "campaign", "length_buckets[]",
    "embedding.queries") for a study of ``task``, a sub-table counting as one key of its table.

    Example: ``table_keys("deadline", "text-classification") == ("start", "end", "tz", "waiting_h")``.
    """
    prefix = f"{table}." if table else ""
    found: list[str] = []
    for key in keys_for(task):
        names = [key]
        if key.startswith("images."):  # one row for the three stacks
            names = [f"images.{stack}" for stack in image_stacks(("cpu", "cuda", "rocm"))]
        for name in names:
            leaf = name[len(prefix):].split(".")[0].removesuffix("[]") if name.startswith(prefix) else ""
            if leaf and leaf not in found:
                found.append(leaf)
    return tuple(found)


def bound(key: str) -> Bounds:
    """The declared bounds of ``key`` (a KeyError for a key without any)."""
    declared = KEYS[key].bounds
    if declared is None:
        raise KeyError(f"{key} declares no bounds")
    return declared


def markdown_table() -> str:
    """The study key table of docs/study.md: every key, each task's own after the common ones."""
    return _table(KEYS.values())


def _table(keys: Iterable[StudyKey]) -> str:
    lines = ["| key | type | required / default | bounds | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{k.key}` | {k.kind} | {k.default} | {k.bounds.words() if k.bounds else ''} | {k.meaning} |"
              for k in keys]
    return "\n".join(lines)


if __name__ == "__main__":  # python -m protocol.study.schema > the table to paste into docs/study.md
    print(markdown_table())
