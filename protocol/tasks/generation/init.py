"""``isocost init --task text-generation`` (:data:`GENERATION_INIT`): what a generation study has of its own.

The ``[generation]`` table (the template around each input, the model's chat template when it has one,
``max_new_tokens``, ``top_k``), the ``[quality]`` rule of a generation (the score, the share of the reference
variant's score, the length window, identical and near-tie agreement) and the prompt length: ``max_length`` holds
the longest input plus room for the template, within the model's context less ``max_new_tokens``. The minimum is
left for ``isocost tune``. The checkpoint is checked after the study is written
(:func:`protocol.tasks.generation.model.check_generation_model`).

Example::

    lines = generation_lines(facts, GenerationChoice(template="Summarise:\\n\\n{text}", max_new_tokens=64,
                                                     score="rouge_l"))
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.study.init_text import comment, toml
from protocol.tasks.base import InitInputs, InitOption
from protocol.tasks.generation.model import _has_chat_template
from protocol.tasks.generation.scores import SCORES

#: Tokens of room left in max_length for the template (and a chat template's turn markers) around the input.
TEMPLATE_ROOM = 64
#: Where the input goes in a template (no other placeholder is read).
PLACEHOLDER = "{text}"
DEFAULT_TEMPLATE = PLACEHOLDER


@dataclass(frozen=True)
class GenerationChoice:
    """What the user chose on the command line for a generation study."""

    template: str = DEFAULT_TEMPLATE
    max_new_tokens: int = 64
    score: str = "rouge_l"

    def check(self) -> None:
        if PLACEHOLDER not in self.template:
            raise UserError(f"the template has no {PLACEHOLDER} placeholder for the input's text", "--template",
                            f'Write {PLACEHOLDER} where the input goes, e.g. --template "Summarise: {PLACEHOLDER}".')
        if self.max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}", "--max-new-tokens",
                            "Generate at least one token.")
        if self.score not in SCORES:
            raise UserError(f"unknown score {self.score!r}", "--score", f"Use one of: {', '.join(SCORES)}.")


def max_length(lengths: tuple[int, ...], limit: int, max_new_tokens: int) -> int:
    """Room for the longest input and the template, within the context less the generated tokens."""
    room = limit - max_new_tokens
    if room < 1:
        raise UserError(f"max_new_tokens {max_new_tokens} leaves no room for a prompt in the model's context of "
                        f"{limit} tokens", "--max-new-tokens", f"Use fewer than {limit} new tokens.")
    return max(1, min(room, 8 * math.ceil((max(lengths) + TEMPLATE_ROOM) / 8)))


def generation_lines(model: Path, choice: GenerationChoice, comment: Callable[[str], str],
                     toml: Callable[[Any], str]) -> list[str]:
    """The ``[generation]`` table."""
    chat = _has_chat_template(model)
    return [
        "[generation]",
        f"template = {toml(choice.template)}{comment('generation.template')}",
        f"chat_template = {toml(chat)}{comment('generation.chat_template')}"
        + ("; the model has one" if chat else "; the model has none: write the whole prompt in the template"),
        f"max_new_tokens = {choice.max_new_tokens}{comment('generation.max_new_tokens')}",
        f"top_k = 5{comment('generation.top_k')}",
        f'decoding = "greedy"{comment("generation.decoding")}',
        "",
    ]


def quality_lines(choice: GenerationChoice, reference: str, comment: Callable[[str], str],
                  toml: Callable[[Any], str]) -> list[str]:
    """``[quality]`` of a generation study (minimum left for ``isocost tune``)."""
    return [
        "[quality]",
        f"metric = {toml(choice.score)}  # rouge_l, chrf or exact_match (docs/tasks.md#text-generation)",
        f"minimum = 0.0{comment('quality.minimum')}; NOT TUNED YET",
        f'tuned_on = "not tuned yet"{comment("quality.tuned_on")}',
        f"reference_variant = {toml(reference)}{comment('quality.reference_variant')}",
        f"max_metric_drop = 0.0{comment('quality.max_metric_drop')}",
        f"min_agreement = 0.0{comment('quality.min_agreement')}: here, identical or a near tie",
        f"min_identical = 0.0{comment('quality.min_identical')}",
        f"min_score_share = 0.99{comment('quality.min_score_share')}",
        f"length_window = [0.9, 1.1]{comment('quality.length_window')}",
        f'normalisation = "whitespace"{comment("quality.normalisation")}',
        f'subgroups = ["length_bucket"]{comment("quality.subgroups")}',
        f'replay = "quality"{comment("quality.replay")}',
        "",
    ]


class GenerationInit:
    """The text-generation part of ``isocost init``: the choice, the prompt length, ``[generation]``, the rule."""

    options: tuple[InitOption, ...] = (
        InitOption("--template", "text-generation: the prompt around each input, {text} where the input goes.",
                   DEFAULT_TEMPLATE),
        InitOption("--max-new-tokens", "text-generation: tokens generated at most per input.", 64, "integer"),
        InitOption("--score", "text-generation: the task score against the references.", "rouge_l",
                   choices=tuple(SCORES)),
    )
    verb = "generates the outputs of"

    def check_options(self, values: Mapping[str, Any]) -> None:
        _choice(values).check()

    def split(self, values: Mapping[str, Any], corpus: Path, records: tuple[Any, ...],
              out_dir: Path) -> tuple[Path, Path, tuple[Path, ...], Mapping[str, Any]] | None:
        return None

    def inputs(self, facts: InitInputs) -> GenerationChoice:
        return _choice(facts.values)  # the checkpoint: check_model, once the study is written

    def max_length(self, found: GenerationChoice, lengths: tuple[int, ...], limit: int) -> int | None:
        return max_length(lengths, limit, found.max_new_tokens)

    def input_lines(self, found: Any, facts: InitInputs) -> list[str]:
        return ["# every input carries its reference text (the task score is measured against it)"]

    def table_lines(self, found: GenerationChoice, facts: InitInputs) -> list[str]:
        return generation_lines(facts.model, found, comment, toml)

    def quality_lines(self, found: GenerationChoice, facts: InitInputs) -> list[str]:
        return quality_lines(found, facts.reference, comment, toml)

    def report(self, found: GenerationChoice, facts: InitInputs) -> tuple[list[str], list[str], int, str]:
        return ([f"text-generation: template {found.template!r}, max_new_tokens {found.max_new_tokens}, score "
                 f"{found.score}"], [], len(facts.tuning_records), "input(s)")


def _choice(values: Mapping[str, Any]) -> GenerationChoice:
    return GenerationChoice(values["template"], values["max_new_tokens"], values["score"])


GENERATION_INIT = GenerationInit()
