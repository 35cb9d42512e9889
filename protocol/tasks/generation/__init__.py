"""Text generation with a causal language model: greedy continuations of templated prompts, scored against the
corpus's ``reference`` texts and compared token by token with the reference variant.

The study declares the prompt (``[generation] template`` around the input's text, optionally inside the model's
chat template), ``max_new_tokens`` and the ``top_k`` log-probabilities kept per generated position; decoding is
greedy (sampling is refused: a sampled job needs common seeds and a metric-only rule). The unit of output is one
line per input in ``generations.jsonl`` (:mod:`protocol.tasks.generation.outputs`).

The gate of one pass (:meth:`TextGeneration.check_pass`): the exact id set; the format (token ids inside the
vocabulary, at most ``max_new_tokens``, ``top_k`` candidates per position); the task score
(:mod:`protocol.tasks.generation.scores`: ROUGE-L F1, chrF or exact match after a declared normalisation, the
mean over the inputs) at least the study's ``minimum``. Against the reference variant
(:meth:`TextGeneration.agreement`): the share of ids whose token sequences are identical and the share whose first
divergence is a near tie (each run's token inside the other run's top-k there), both always reported; the mean
generated length within ``length_window`` of the reference's; and, in the summary, the median score at least
``min_score_share`` of the reference variant's. ``min_agreement`` applies to the near-tie share, ``min_identical``
to the identical share.

Example::

    task = GENERATION
    check = task.check_pass(task.read_pass(trial_dir), task.reference(index_rows, study), study)
    check.accepted, check.metric_value
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from protocol.errors import UserError
from protocol.study.schema import KEYS, StudyKey
from protocol.tasks.base import TaskExample, TaskInit
from protocol.tasks.generation.init import GENERATION_INIT, PLACEHOLDER
from protocol.tasks.generation.keys import STUDY_KEYS
from protocol.tasks.generation.model import check_generation_model
from protocol.tasks.generation.outputs import (
    OUTPUT_FILE,
    Generation,
    ParsedGenerations,
    parse_generations,
    range_problems,
    read_vocab_size,
)
from protocol.tasks.generation.scores import NORMALISATIONS, SCORES, score_one
from protocol.tasks.output_checks import text_problems
from protocol.tasks.pass_check import Agreement, PassCheck, check_ids, id_problems

__all__ = ["GENERATION", "GenerationReference", "TextGeneration", "compare_generations", "decode_index_field"]

MAX_TEMPLATE_CHARS = 20_000


@dataclass(frozen=True)
class GenerationReference:
    """The reference text and subgroup membership of every corpus id, in corpus order."""

    ids: tuple[str, ...]
    references: dict[str, str]
    groups: dict[str, dict[str, str]]


def decode_index_field(cell: str, name: str, ident: str) -> str:
    """A task field as ``corpus_index.csv`` holds it (a JSON string, so that no cell reads as a formula)."""
    import json

    try:
        value = json.loads(cell)
    except ValueError:
        raise UserError(f"corpus_index.csv column {name!r} of id {ident!r} is not a JSON string", "corpus_index.csv",
                        "Restore the campaign directory from a bundle; it was changed after the start.") from None
    if not isinstance(value, str):
        raise UserError(f"corpus_index.csv column {name!r} of id {ident!r} is not a JSON string", "corpus_index.csv",
                        "Restore the campaign directory from a bundle; it was changed after the start.")
    return value


def _scores(outputs: ParsedGenerations, reference: GenerationReference, study: Any) -> dict[str, float]:
    """Each generated id's score against its reference."""
    metric = study.quality.metric
    normalisation = study.quality.extra.get("normalisation", KEYS["quality.normalisation"].value)
    return {item.id: score_one(metric, item.text, reference.references[item.id], normalisation)
            for item in outputs.items}


def _by_group(scores: Mapping[str, float], membership: Mapping[str, str]) -> dict[str, float]:
    collected: dict[str, list[float]] = {}
    for ident, score in scores.items():
        collected.setdefault(membership[ident], []).append(score)
    return {value: sum(values) / len(values) for value, values in sorted(collected.items())}


def check_generation_pass(outputs: ParsedGenerations, reference: GenerationReference, study: Any) -> PassCheck:
    """The verdict on one pass: ids exactly the corpus's, every line well-formed and inside the study's limits,
    and the mean score at least the minimum; every reason for a rejection is listed."""
    options, quality = study.task_options, study.quality
    ids = check_ids(outputs.ids, reference.ids, reference.references)
    format_errors = [*outputs.format_errors,
                     *range_problems(outputs, int(options["max_new_tokens"]), int(options["top_k"])),
                     *text_problems(outputs.items, getattr(getattr(study, "model", None), "path", None))]
    reasons = id_problems(format_errors, ids)
    metric_value: float | None = None
    subgroups: dict[str, dict[str, float]] = {}
    if not reasons:
        scores = _scores(outputs, reference, study)
        metric_value = sum(scores.values()) / len(scores)
        subgroups = {name: _by_group(scores, membership) for name, membership in reference.groups.items()}
        if metric_value < quality.minimum:
            reasons.append(f"{quality.metric} {metric_value:.4f} below the study's minimum {quality.minimum}")
    else:
        reasons.append("incomplete or malformed pass: quality not computed")
    return PassCheck(
        expected_ids=len(reference.ids), observed_ids=len(outputs.ids), ids_match=ids.ids_match,
        duplicate_ids=len(ids.duplicates), missing_ids=len(ids.missing), unexpected_ids=len(ids.unexpected),
        format_errors=len(format_errors), metric=quality.metric, metric_value=metric_value, subgroups=subgroups,
        accepted=not reasons, reasons=tuple(reasons),
    )


def first_divergence(ours: Generation, theirs: Generation) -> int | None:
    """The first position where the two token sequences differ (None when identical)."""
    for position, (a, b) in enumerate(zip(ours.tokens, theirs.tokens, strict=False)):
        if a != b:
            return position
    return None if len(ours.tokens) == len(theirs.tokens) else min(len(ours.tokens), len(theirs.tokens))


def near_tie(ours: Generation, theirs: Generation, position: int) -> bool:
    """At ``position``, each run's token is inside the other run's top-k (a divergence within the numerics)."""
    if position >= len(ours.tokens) or position >= len(theirs.tokens):
        return False  # one run stopped without an end-of-sequence token there: nothing to judge it by
    return ours.tokens[position] in theirs.top_ids[position] and theirs.tokens[position] in ours.top_ids[position]


def logprob_delta(ours: Generation, theirs: Generation, until: int | None) -> float:
    """The largest difference of the chosen token's log-probability over the common prefix (a greedy run's
    chosen token is its top-1 candidate): 0.0 when the numerics are the same."""
    stop = min(len(ours.tokens), len(theirs.tokens)) if until is None else until
    return max((abs(ours.top_logprobs[j][0] - theirs.top_logprobs[j][0]) for j in range(stop)), default=0.0)


def compare_generations(candidate: ParsedGenerations, reference: ParsedGenerations, rule: Mapping[str, Any],
                        min_identical: float = 0.0) -> Agreement:
    """Identity and near ties by id, the length ratio, and the conditions of the rule that do not hold;
    ``max_score_delta`` is the largest log-probability difference of the chosen tokens before any divergence."""
    ours, theirs = candidate.by_id(), reference.by_id()
    if not ours or ours.keys() != theirs.keys():
        return Agreement(None, None, None)
    identical = near = 0
    delta = 0.0
    first_diverging = ""
    apart: list[str] = []  # ids whose first divergence is no near tie: where the two disagree
    for ident, mine in ours.items():
        position = first_divergence(mine, theirs[ident])
        delta = max(delta, logprob_delta(mine, theirs[ident], position))
        if position is None:
            identical += 1
            near += 1
        elif near_tie(mine, theirs[ident], position):
            near += 1
        else:
            apart.append(ident)
            if not first_diverging:
                first_diverging = f"{ident!r} at token {position}"
    n = len(ours)
    mean_ours = statistics.fmean(item.n_tokens for item in ours.values())
    mean_theirs = statistics.fmean(item.n_tokens for item in theirs.values())
    ratio = mean_ours / mean_theirs if mean_theirs else (1.0 if not mean_ours else float("inf"))
    low, high = rule.get("length_window", KEYS["quality.length_window"].value)
    failures = []
    if not low <= ratio <= high:
        failures.append(f"mean generated length {mean_ours:.2f} tokens is {ratio:.3f}× the reference variant's "
                        f"{mean_theirs:.2f}, outside the window {low}–{high}")
    if identical / n < min_identical:
        failures.append(f"identical token sequences {identical / n:.4f} < required {min_identical}")
    details = {"identical_share": identical / n, "near_tie_share": near / n, "identical": identical,
               "near_ties": near - identical, "inputs": n, "mean_generated_tokens": mean_ours,
               "reference_mean_generated_tokens": mean_theirs, "length_ratio": ratio,
               "first_non_tie_divergence": first_diverging}
    return Agreement(agreement=near / n, max_score_delta=delta, identical=identical == n, details=details,
                     failures=tuple(failures), differing_ids=tuple(apart))


class TextGeneration:
    """The text-generation task (see the module docstring)."""

    name: str = "text-generation"
    output_files: tuple[str, ...] = (OUTPUT_FILE,)
    trial_module: str = "protocol.tasks.generation.trial"
    study_keys: tuple[StudyKey, ...] = STUDY_KEYS
    init: TaskInit = GENERATION_INIT
    docs: Mapping[str, str] = MappingProxyType({
        "yields": 'greedily generated tokens and their text', "model": 'any `AutoModelForCausalLM`',
        "metrics": "`rouge_l`, `chrf`, `exact_match` against each input's `reference`",
        "agreement": "share of ids whose tokens are identical or first diverge at a near tie "
                     "([below](#text-generation))"})
    metrics: tuple[str, ...] = SCORES
    labels_required: bool = False
    corpus_fields: tuple[str, ...] = ("reference",)
    subgroups: tuple[str, ...] = ("length_bucket",)
    option_tables: Mapping[str, str] = MappingProxyType(
        {"generation": "the prompt template, max_new_tokens, top_k and decoding of a text-generation study"})
    #: How the summary and the memo name the outputs and the agreement (never "labels").
    words: Mapping[str, str] = MappingProxyType({
        "outputs": "generated token sequences and their text", "done": "generated", "units": "inputs",
        "agreement": "share of inputs whose tokens are identical to the reference variant's or first diverge at a "
                     "near tie (each run's token inside the other's top-k); the identical share is reported "
                     "beside it"})
    #: The shares every summary reports against the reference variant (keys of the verdict's agreement_details).
    reported_shares: tuple[tuple[str, str], ...] = (
        ("identical_share", "identical token sequences"),
        ("near_tie_share", "identical or first divergence at a near tie"))

    def parse_options(self, top: Any, base_dir: Path) -> dict[str, Any]:
        """``[generation]``: template (with ``{text}``), chat_template, max_new_tokens, top_k, decoding."""
        from protocol.study.reader import sub_table

        table = sub_table(top, "generation")
        template = table.declared("template", fix=f'Add `template = "… {PLACEHOLDER} …"` around the input text.')
        if PLACEHOLDER not in template:
            raise UserError(f"the template has no {PLACEHOLDER} placeholder for the input's text",
                            table.where("template"), f"Write {PLACEHOLDER} where the input goes, e.g. "
                            f'"Write a headline for this story:\\n\\n{PLACEHOLDER}".')
        if len(template) > MAX_TEMPLATE_CHARS or "\x00" in template:
            raise UserError(f"the template must be text of at most {MAX_TEMPLATE_CHARS} characters",
                            table.where("template"))
        chat = table.declared("chat_template")
        max_new = table.declared("max_new_tokens", fix="Add `max_new_tokens = 64` (tokens generated at most).")
        top_k = table.declared("top_k")
        decoding = table.declared("decoding")
        if decoding != "greedy":
            raise UserError(f"decoding {decoding[:40]!r} is not supported: only greedy decoding is measured",
                            table.where("decoding"),
                            'Use decoding = "greedy". A sampled job has no single right output: it needs common '
                            "seeds (campaign.seeds) and a rule on the metric alone, which this task does not offer.")
        table.finish()
        return {"template": template, "chat_template": chat, "max_new_tokens": max_new, "top_k": top_k,
                "decoding": decoding}

    def parse_quality_extras(self, quality: Any) -> dict[str, Any]:
        """min_score_share, length_window, min_identical and normalisation of ``[quality]``."""
        share, identical = quality.declared("min_score_share"), quality.declared("min_identical")
        window = quality.declared("length_window")
        if len(window) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in window) \
                or not 0 < window[0] <= 1 <= window[1] <= 100:
            raise UserError(f"length_window must be [low, high] with 0 < low ≤ 1 ≤ high, got {window!r}",
                            quality.where("length_window"), "Use MLPerf's window: length_window = [0.9, 1.1].")
        normalisation = quality.choice("normalisation", NORMALISATIONS)
        return {"min_score_share": share, "min_identical": identical,
                "length_window": [float(window[0]), float(window[1])], "normalisation": normalisation}

    def check_model(self, model_dir: Path, records: Sequence[Any], study: Any, where: str) -> tuple[str, ...]:
        """The checkpoint can run this study: a causal LM with a tokenizer, a generation config, a chat template
        where one is declared, and a context that holds max_length + max_new_tokens."""
        return check_generation_model(model_dir, study, where)

    def reference(self, index_rows: Sequence[Mapping[str, str]], study: Any,
                  subgroups: Sequence[str] | None = None) -> GenerationReference:
        """Reference texts (the frozen index's ``reference`` column) and the subgroups scored, in corpus order."""
        ids = tuple(row["id"] for row in index_rows)
        references = {row["id"]: decode_index_field(row["reference"], "reference", row["id"]) for row in index_rows}
        groups = {group: {row["id"]: row["length_bucket"] for row in index_rows}
                  for group in (study.quality.subgroups if subgroups is None else subgroups)
                  if group in self.subgroups}
        return GenerationReference(ids=ids, references=references, groups=groups)

    def read_pass(self, trial_dir: Path) -> ParsedGenerations:
        return parse_generations(trial_dir / OUTPUT_FILE, read_vocab_size(trial_dir / "manifest.json"))

    def check_pass(self, outputs: ParsedGenerations, reference: GenerationReference, study: Any) -> PassCheck:
        return check_generation_pass(outputs, reference, study)

    def agreement(self, candidate: ParsedGenerations, reference: ParsedGenerations, study: Any) -> Agreement:
        extra = study.quality.extra
        identical = extra.get("min_identical", KEYS["quality.min_identical"].value)
        return compare_generations(candidate, reference, extra, float(identical))

    def pass_figures(self, trial_dir: Path, pass_s: float | None) -> dict[str, Any]:
        """Output tokens per second, time to first token per batch, time per output token
        (:mod:`protocol.tasks.generation.figures`)."""
        from protocol.tasks.generation.figures import read_pass_figures

        return read_pass_figures(trial_dir, pass_s)

    def is_proportion(self, metric: str) -> bool:
        return metric == "exact_match"

    def check_inputs(self, study: Any, corpus: Sequence[Any], tuning: Sequence[Any]) -> None:
        return None  # every input's reference is read with the corpus (corpus_fields); the model: check_model

    def frozen_files(self, study: Any) -> dict[str, Path]:
        return {}  # corpus_index.csv holds the references

    def tuning_study(self, study: Any) -> Any:
        return study

    def scored_units(self, reference: GenerationReference) -> int:
        return len(reference.ids)

    def resampled_metric(self, outputs: ParsedGenerations, reference: GenerationReference,
                         study: Any) -> Callable[[Sequence[int]], float]:
        """The mean score over a resample of the inputs (indices into the corpus order, repeats allowed)."""
        scores = _scores(outputs, reference, study)
        in_order = [scores[ident] for ident in reference.ids]

        def score(indices: Sequence[int]) -> float:
            return sum(in_order[i] for i in indices) / len(indices)

        return score


    def example(self) -> TaskExample:
        rows = tuple({"id": f"e{i}", "label": "", "n_tokens": "4", "length_bucket": "all",
                      "reference": '"a b"'} for i in range(3))
        line = {"tokens": [5, 6], "text": "a b", "n_tokens": 2, "top_ids": [[5, 1, 2, 3, 4], [6, 1, 2, 3, 4]],
                "top_logprobs": [[-0.1, -2.0, -3.0, -4.0, -5.0], [-0.2, -2.0, -3.0, -4.0, -5.0]]}
        return TaskExample("rouge_l", 0.9, {}, {"template": "{text}", "max_new_tokens": 4, "top_k": 5}, rows,
                           [dict(line) for _ in rows], described={"vocab_size": 100})

GENERATION = TASK = TextGeneration()
