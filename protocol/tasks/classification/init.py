"""``isocost init`` for text classification: the corpus labels against the model's ``id2label``, and the rule.

Example::

    found = CLASSIFICATION_INIT.inputs(facts)     # the model's labels absent from the corpus
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protocol.study.init_text import untuned_quality
from protocol.tasks.base import InitInputs, InitOption
from protocol.tasks.classification.labels import check_labels


class ClassificationInit:
    """The text-classification part of ``isocost init``."""

    options: tuple[InitOption, ...] = ()
    verb = "classifies"

    def check_options(self, values: Mapping[str, Any]) -> None:
        return None

    def split(self, values: Mapping[str, Any], corpus: Path, records: tuple[Any, ...],
              out_dir: Path) -> tuple[Path, Path, tuple[Path, ...], Mapping[str, Any]] | None:
        return None

    def inputs(self, facts: InitInputs) -> tuple[str, ...]:
        """The model's labels the corpora lack (a corpus label the model lacks is an error)."""
        return tuple(check_labels([r.label for r in (*facts.records, *facts.tuning_records)], facts.model,
                                  f"{facts.corpus} and {facts.tuning}"))

    def max_length(self, found: Any, lengths: tuple[int, ...], limit: int) -> int | None:
        return None

    def input_lines(self, found: tuple[str, ...], facts: InitInputs) -> list[str]:
        lines = [f"# labels: {', '.join(_labels(facts))} (all known to the model's id2label)"]
        if found:
            lines.append(f"# warning: the model also predicts {', '.join(found)}, absent from the corpus: any such "
                         "prediction rejects a pass")
        return lines

    def table_lines(self, found: Any, facts: InitInputs) -> list[str]:
        return []

    def quality_lines(self, found: Any, facts: InitInputs) -> list[str]:
        return untuned_quality(facts.reference, "accuracy", ["label", "length_bucket"])

    def report(self, found: tuple[str, ...], facts: InitInputs) -> tuple[list[str], list[str], int, str]:
        warnings = [f"warning: the model also predicts {', '.join(found)}, absent from the corpus: any such "
                    "prediction rejects a pass"] if found else []
        return ([f"labels: {', '.join(_labels(facts))} (all in the model's id2label)"], warnings,
                len(facts.tuning_records), "input(s)")


def _labels(facts: InitInputs) -> list[str]:
    return sorted({r.label for r in facts.records} - {""})


CLASSIFICATION_INIT = ClassificationInit()
