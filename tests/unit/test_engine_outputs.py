"""The summary's ``## Engines: where the outputs differ`` (runner/analysis/engine_outputs.py): every differing id,
with a generation's first divergence and whether it is a near tie; nothing for a study without engines."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from protocol.tasks import task_named
from protocol.tasks.generation.outputs import Generation, ParsedGenerations
from runner.analysis.engine_outputs import differences, engine_difference_lines


def _generation(ident: str, tokens: tuple[int, ...], tops: tuple[tuple[int, ...], ...]) -> Generation:
    return Generation(ident, tokens, "", tops, tuple((-0.1,) * len(t) for t in tops))


def test_a_generation_names_each_divergence_and_whether_it_is_a_near_tie() -> None:
    reference = ParsedGenerations((_generation("a", (1, 2, 3), ((1, 9), (2, 8), (3, 7))),
                                   _generation("b", (4, 5), ((4, 9), (5, 6))),
                                   _generation("c", (7, 8), ((7, 9), (8, 6)))), (), None)
    candidate = ParsedGenerations((_generation("a", (1, 2, 3), ((1, 9), (2, 8), (3, 7))),
                                   _generation("b", (4, 6), ((4, 9), (6, 5))),      # 5 and 6 in each other's top-k
                                   _generation("c", (7, 1), ((7, 9), (1, 2)))), (), None)  # 8 not in ours
    found = differences(task_named("text-generation"), candidate, reference, None)
    assert found == ("1 of 3 token sequences identical; first divergences: 'b' at token 1 (near tie), 'c' at "
                     "token 1 (NOT a near tie)")
    assert differences(task_named("text-generation"), reference, reference, None) == (
        "3 of 3 token sequences identical")


def test_no_section_without_another_engine_and_one_line_per_variant_with_one(tmp_path: Path) -> None:
    study = SimpleNamespace(reference_for=lambda variant_id: "engine=transformers", task="text-generation",
                            quality=SimpleNamespace(extra={}))
    plain = [SimpleNamespace(variant_id="batch_size=1", engine="transformers")]
    assert engine_difference_lines(None, study, [], {}, plain) == ""
    variants = [SimpleNamespace(variant_id="engine=transformers", engine="transformers"),
                SimpleNamespace(variant_id="engine=vllm", engine="vllm"),
                SimpleNamespace(variant_id="precision=bf16", engine="vllm")]
    rows = [SimpleNamespace(trial_id="t1", variant_id="engine=transformers"),
            SimpleNamespace(trial_id="t2", variant_id="engine=vllm")]
    verdicts: dict[str, Any] = {"t1": {"corpus_accepted": True, "reference_trial": "t1"},
                                "t2": {"corpus_accepted": True, "reference_trial": "t1"}}
    for trial in ("t1", "t2"):
        (tmp_path / trial).mkdir()
        (tmp_path / trial / "generations.jsonl").write_text(
            '{"id": "a", "tokens": [1, 2], "text": "x", "n_tokens": 2, "top_ids": [[1, 3], [2, 4]], '
            '"top_logprobs": [[-0.1, -2.0], [-0.2, -3.0]]}\n', encoding="utf-8")
    paths = SimpleNamespace(trial_dir=lambda trial: tmp_path / trial)
    text = engine_difference_lines(paths, study, rows, verdicts, variants)
    assert "- engine=transformers (transformers): the reference" in text
    assert "- engine=vllm (vllm; trial t2 against t1): 1 of 1 token sequences identical" in text
    assert "- precision=bf16 (vllm): not compared (no accepted pass, or no reference pass)" in text
