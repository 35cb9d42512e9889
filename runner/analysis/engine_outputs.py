"""The summary's ``## Engines: where the outputs differ``: which ids an engine's outputs differ on, and where.

Written only when a variant of the campaign runs another engine than the default (a study without engines: its
summary as before, byte for byte). For every variant but the reference, its first accepted pass is compared by id
with the reference pass its verdict names (``reference_trial``), by the task's own comparison: a text
generation's every differing id with the token its first divergence is at and whether that is a near tie (each
run's token inside the other's top-k: :func:`protocol.tasks.generation.near_tie`); any other task's differing ids
(:meth:`protocol.tasks.base.Task.agreement`'s ``differing_ids``). The verdict (same accepted result or not) is the
``## Engines`` section's; this one shows the evidence behind it, so a reader sees which engine gave the same
outputs, which did not, and where they part.

Example::

    text = engine_difference_lines(paths, study, rows, verdicts, campaign.record.variants)
    # "- precision=bf16 (vllm; trial 003-r1-precision-bf16 against 001-r1-engine-transformers): 22 of 24 …"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from protocol.io.names import markdown_text
from protocol.records.stages import DEFAULT_ENGINE
from protocol.tasks import study_task

#: How many differing ids a line names before "and N more".
EXAMPLES = 8


def engine_difference_lines(paths: Any, study: Any, rows: Sequence[Any], verdicts: Mapping[str, Mapping[str, Any]],
                            variants: Sequence[Any]) -> str:
    """The section's Markdown ("" when every variant runs the default engine)."""
    engines = {v.variant_id: v.engine for v in variants}
    if set(engines.values()) <= {DEFAULT_ENGINE}:
        return ""
    first: dict[str, str] = {}
    for row in rows:
        if (verdicts.get(row.trial_id) or {}).get("corpus_accepted"):
            first.setdefault(str(row.variant_id), str(row.trial_id))
    task = study_task(study)
    lines = ["", "## Engines: where the outputs differ (each variant's first accepted pass against the reference "
             "pass its verdict names, by id)", ""]
    for variant_id, engine in engines.items():
        trial = first.get(variant_id)
        reference = (verdicts.get(trial) or {}).get("reference_trial") if trial else None
        if variant_id == study.reference_for(variant_id):
            lines.append(f"- {variant_id} ({engine}): the reference")
        elif trial is None or reference is None:
            lines.append(f"- {variant_id} ({engine}): not compared (no accepted pass, or no reference pass)")
        else:
            found = differences(task, task.read_pass(paths.trial_dir(trial)),
                                task.read_pass(paths.trial_dir(reference)), study)
            lines.append(f"- {variant_id} ({engine}; trial {trial} against {reference}): {found}")
    return "\n".join(lines) + "\n"


def differences(task: Any, candidate: Any, reference: Any, study: Any) -> str:
    """How ``candidate`` differs from ``reference`` by id, in words (ids quoted as written, Markdown-safe)."""
    if hasattr(candidate, "by_id") and task.name == "text-generation":
        return _generation_differences(candidate, reference)
    agreement = task.agreement(candidate, reference, study)
    ids = list(candidate.ids)
    differing = list(agreement.differing_ids)
    if agreement.agreement is None:
        return "not comparable (the two passes do not cover the same ids)"
    head = f"the same {task.words.get('outputs', 'outputs')} on {len(ids) - len(differing)} of {len(ids)} ids"
    return head + (f"; differ on {_examples([repr(i) for i in differing])}" if differing else "; none differs")


def _generation_differences(candidate: Any, reference: Any) -> str:
    from protocol.tasks.generation import first_divergence, near_tie

    ours, theirs = candidate.by_id(), reference.by_id()
    if not ours or ours.keys() != theirs.keys():
        return "not comparable (the two passes do not cover the same ids)"
    apart = []
    for ident, mine in ours.items():
        position = first_divergence(mine, theirs[ident])
        if position is not None:
            tie = "near tie" if near_tie(mine, theirs[ident], position) else "NOT a near tie"
            apart.append(f"{ident!r} at token {position} ({tie})")
    head = f"{len(ours) - len(apart)} of {len(ours)} token sequences identical"
    return head + (f"; first divergences: {_examples(apart)}" if apart else "")


def _examples(items: list[str]) -> str:
    shown = ", ".join(markdown_text(item) for item in items[:EXAMPLES])
    return shown + (f" and {len(items) - EXAMPLES} more" if len(items) > EXAMPLES else "")
