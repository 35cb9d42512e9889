"""The text-generation gate: scores against their reference implementations, the output reader, the pass check,
identity and near ties with the reference variant, and the study keys of [generation]."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from workspace import base_toml, series_toml

from protocol.errors import UserError
from protocol.study.load import load_study
from protocol.tasks import task_named
from protocol.tasks.generation import GENERATION, compare_generations, first_divergence, near_tie
from protocol.tasks.generation.outputs import Generation, ParsedGenerations, parse_generations, range_problems
from protocol.tasks.generation.scores import chrf, normalise, rouge_l, score_one

WORDS = "the a economy grew US rate of iPod Apple new cheaper Rooney charged FA ! 3.8% Café déjà-vu".split()


def _pairs() -> list[tuple[str, str]]:
    rng = random.Random(7)
    pairs = [("Rooney charged by FA", "FA charges Rooney"), ("", "abc"), ("abc", ""), ("a a a b", "a b a b a"),
             ("Apple unveils cheaper iPod", "Apple unveils a cheaper iPod Shuffle!")]
    for _ in range(200):
        pairs.append((" ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 12))),
                      " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 12)))))
    return pairs


def test_rouge_l_is_rouge_score_packages_figure() -> None:
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    for generated, reference in _pairs():
        assert rouge_l(generated, reference) == pytest.approx(scorer.score(reference, generated)["rougeL"].fmeasure,
                                                              abs=1e-12)


def test_chrf_is_sacrebleus_figure_over_100() -> None:
    chrf_metric = pytest.importorskip("sacrebleu.metrics").CHRF()
    for generated, reference in _pairs():
        assert chrf(generated, reference) == pytest.approx(
            chrf_metric.sentence_score(generated, [reference]).score / 100, abs=1e-12)


def test_hand_computed_scores_and_normalisations() -> None:
    # LCS of (rooney charged by fa) and (fa charges rooney) is one word: P = 1/4, R = 1/3, F1 = 2/7.
    assert rouge_l("Rooney charged by FA", "FA charges Rooney") == pytest.approx(2 / 7)
    assert score_one("exact_match", " Yes  sir ", "Yes sir") == 1.0
    assert score_one("exact_match", " Yes  sir ", "Yes sir", "none") == 0.0
    assert score_one("exact_match", "YES Sir", "yes sir", "whitespace") == 0.0
    assert score_one("exact_match", "ＹＥＳ Sir", "yes sir", "casefold") == 1.0
    assert normalise("a\t b\n", "whitespace") == "a b"
    assert chrf("identical text", "identical text") == pytest.approx(1.0)


def _line(ident: str, tokens: list[int], text: str = "t", k: int = 2, **changes: Any) -> str:
    item = {"id": ident, "tokens": tokens, "text": text, "n_tokens": len(tokens),
            "top_ids": [[t, t + 1][:k] for t in tokens], "top_logprobs": [[-0.1, -2.0][:k] for _ in tokens]}
    item.update(changes)
    return json.dumps(item) + "\n"


def test_reader_describes_every_malformed_line(tmp_path: Path) -> None:
    path = tmp_path / "generations.jsonl"
    path.write_text(
        _line("a", [5, 6]) + "not json\n" + _line("b", [1], n_tokens=3) + _line("c", [1], extra=1)
        + _line("d", [1], top_ids=[]) + _line("e", [1], top_logprobs=[[0.5, -1.0]]) + _line("f", [True])
        + '{"id": "g", "id": "h"}\n' + _line("i", [2])[:-9])
    parsed = parse_generations(path, vocab_size=10)
    assert parsed.ids == ("a",)
    assert parsed.items[0] == Generation("a", (5, 6), "t", ((5, 6), (6, 7)), ((-0.1, -2.0), (-0.1, -2.0)))
    assert [e.split(":")[0] for e in parsed.format_errors] == [f"line {n}" for n in range(2, 10)]
    assert "truncated" in parsed.format_errors[-1]
    assert "n_tokens 3 is not the number of tokens" in parsed.format_errors[1]
    assert parse_generations(tmp_path / "absent.jsonl", 10).format_errors == ("generations.jsonl missing",)


def test_range_problems_vocabulary_length_and_k(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text(_line("a", [1, 2, 3]) + _line("b", [12]) + _line("c", [1], top_ids=[[1, 99]])
                    + _line("d", [1], k=1))
    problems = range_problems(parse_generations(path, vocab_size=10), max_new_tokens=2, top_k=2)
    assert problems == ["id 'a': 3 tokens, more than max_new_tokens 2",
                        "id 'b': token id 12 outside the vocabulary (0 to 9)",
                        "id 'c': a top-k token id outside the vocabulary (0 to 9)",
                        "id 'd': top-k rows are not of the declared k = 2"]
    assert "records no model.vocab_size" in range_problems(parse_generations(path, None), 5, 2)[0]


def _study(**extra: Any) -> Any:
    quality = SimpleNamespace(metric="rouge_l", minimum=0.3, subgroups=("length_bucket",),
                              extra={"normalisation": "whitespace", "length_window": [0.9, 1.1],
                                     "min_identical": 0.0, "min_score_share": 0.99, **extra})
    return SimpleNamespace(quality=quality, task_options={"max_new_tokens": 4, "top_k": 2})


def _reference() -> Any:
    rows = [{"id": i, "label": "", "n_tokens": "3", "length_bucket": b, "reference": json.dumps(r)}
            for i, b, r in (("a", "short", "Rooney charged by FA"), ("b", "long", "Apple unveils cheaper iPod"))]
    return GENERATION.reference(rows, _study())


def _parsed(*items: Generation, vocab: int | None = 100) -> ParsedGenerations:
    return ParsedGenerations(tuple(items), (), vocab)


def _gen(ident: str, tokens: tuple[int, ...], text: str, tops: tuple[tuple[int, ...], ...] | None = None) -> Generation:
    tops = tops or tuple((t, t + 1) for t in tokens)
    return Generation(ident, tokens, text, tops, tuple((-0.1, -2.0) for _ in tokens))


def test_pass_check_scores_ids_format_and_minimum() -> None:
    reference, study = _reference(), _study()
    good = _parsed(_gen("a", (1, 2), "Rooney charged by FA"), _gen("b", (3,), "Apple unveils an iPod"))
    check = GENERATION.check_pass(good, reference, study)
    assert check.accepted and check.metric == "rouge_l"
    second = rouge_l("Apple unveils an iPod", "Apple unveils cheaper iPod")
    assert check.metric_value == pytest.approx((1.0 + second) / 2)
    assert set(check.subgroups["length_bucket"]) == {"long", "short"}
    missing = GENERATION.check_pass(_parsed(_gen("a", (1,), "x")), reference, study)
    assert not missing.accepted and missing.missing_ids == 1 and missing.metric_value is None
    outside = GENERATION.check_pass(_parsed(_gen("a", (1,), "x"), _gen("b", (1000,), "x")), reference, study)
    assert outside.format_errors == 1 and "outside the vocabulary" in outside.verdict
    low = GENERATION.check_pass(_parsed(_gen("a", (1,), "nothing"), _gen("b", (1,), "alike")), reference, study)
    assert not low.accepted and "rouge_l 0.0000 below the study's minimum 0.3" in low.verdict


def test_identity_near_ties_and_divergence() -> None:
    ref = _gen("a", (1, 2, 3), "x", ((1, 7), (2, 9), (3, 4)))
    same = _gen("a", (1, 2, 3), "x")
    tie = _gen("a", (1, 9, 5), "y", ((1, 8), (9, 2), (5, 6)))  # 9 is in the reference's top-k, 2 in ours
    no_tie = _gen("a", (1, 5, 3), "y", ((1, 8), (5, 6), (3, 4)))  # 5 is not in the reference's top-k
    assert first_divergence(same, ref) is None and first_divergence(tie, ref) == 1
    assert near_tie(tie, ref, 1) and not near_tie(no_tie, ref, 1)
    stopped = _gen("a", (1, 2), "x", ((1, 7), (2, 9)))  # a strict prefix: nothing at position 2 to judge
    assert first_divergence(stopped, ref) == 2 and not near_tie(stopped, ref, 2)
    rule = {"length_window": [0.5, 1.5]}
    agreement = compare_generations(_parsed(tie, _gen("b", (4,), "z")), _parsed(ref, _gen("b", (4,), "z")), rule)
    assert agreement.agreement == 1.0 and agreement.details["identical_share"] == 0.5
    assert agreement.details["near_tie_share"] == 1.0 and agreement.identical is False and not agreement.failures
    assert agreement.max_score_delta == 0.0  # same log-probabilities before the divergence
    shifted = Generation("b", (4,), "z", ((4, 5),), ((-0.35, -2.0),))
    assert compare_generations(_parsed(shifted), _parsed(_gen("b", (4,), "z")), rule).max_score_delta == \
        pytest.approx(0.25)
    strict = compare_generations(_parsed(no_tie, _gen("b", (4,), "z")), _parsed(ref, _gen("b", (4,), "z")), rule, 0.9)
    assert strict.agreement == 0.5 and strict.details["first_non_tie_divergence"] == "'a' at token 1"
    assert strict.failures == ("identical token sequences 0.5000 < required 0.9",)
    assert strict.differing_ids == ("a",) and agreement.differing_ids == ()  # a near tie is no difference
    assert compare_generations(_parsed(ref), _parsed(_gen("z", (1,), "x")), rule).agreement is None


def test_length_window_is_a_failure_of_equivalence() -> None:
    long = _parsed(_gen("a", (1, 2, 3, 4), "x"))
    short = _parsed(_gen("a", (1, 2, 3), "x"))
    agreement = compare_generations(long, short, {"length_window": [0.9, 1.1]})
    assert agreement.details["length_ratio"] == pytest.approx(4 / 3)
    assert agreement.failures and "outside the window 0.9–1.1" in agreement.failures[0]


STUDY = """schema_version = 1
name = "g"
question = "Which batch size?"
scenario = "offline"
task = "text-generation"
[corpus]
path = "corpus.jsonl"
fingerprint = "sha256:{fp}"
[tuning]
path = "tuning.jsonl"
fingerprint = "sha256:{fp}"
[model]
path = "model"
fingerprint = "sha256:{fp}"
[generation]
template = "Headline: {{text}}"
max_new_tokens = 8
[quality]
metric = "rouge_l"
minimum = 0.2
tuned_on = "tuning"
reference_variant = "batch_size=1"
min_agreement = 0.9
""" + base_toml(64) + series_toml("[1, 2]")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text.replace("{fp}", "0" * 64) if "{fp}" in text else text, encoding="utf-8")
    return path


def test_a_generation_study_parses_with_its_defaults(tmp_path: Path) -> None:
    study = load_study(_write(tmp_path, STUDY.format(fp="0" * 64)))
    assert study.task == "text-generation" and task_named(study.task) is GENERATION
    assert dict(study.task_options) == {"template": "Headline: {text}", "chat_template": False, "max_new_tokens": 8,
                                        "top_k": 5, "decoding": "greedy"}
    assert dict(study.quality.extra) == {"min_score_share": 0.99, "min_identical": 0.0, "length_window": [0.9, 1.1],
                                         "normalisation": "whitespace"}


@pytest.mark.parametrize(("old", "new", "message"), [
    ('template = "Headline: {text}"', 'template = "Headline: {input}"', "no {text} placeholder"),
    ("max_new_tokens = 8", "max_new_tokens = 0", "max_new_tokens must be between 1"),
    ("max_new_tokens = 8", 'max_new_tokens = 8\ndecoding = "sampling"', "only greedy decoding is measured"),
    ("max_new_tokens = 8", "max_new_tokens = 8\ntemperature = 0.7", "unknown key 'temperature'"),
    ("max_new_tokens = 8\n", "", "missing required key"),
    ("min_agreement = 0.9", "min_agreement = 0.9\nlength_window = [1.2, 1.5]", "length_window must be"),
    ("min_agreement = 0.9", "min_agreement = 0.9\nmin_score_share = 1.5", "min_score_share must be between"),
    ('metric = "rouge_l"', 'metric = "accuracy"', "'accuracy' is not one of rouge_l, chrf, exact_match"),
    ('task = "text-generation"\n', "", "[generation] is read by task 'text-generation'"),
])
def test_bad_generation_keys_are_clear_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = STUDY.format(fp="0" * 64)
    assert old in text
    with pytest.raises(UserError) as caught:
        load_study(_write(tmp_path, text.replace(old, new, 1)))
    assert message in str(caught.value)


def _model_dir(tmp_path: Path, **config: Any) -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                   "max_position_embeddings": 128, **config}))
    (model / "tokenizer.json").write_text("{}")
    (model / "generation_config.json").write_text("{}")
    return model


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: (m / "tokenizer.json").unlink(), "no tokenizer"),
    (lambda m: (m / "generation_config.json").unlink(), "no generation_config.json"),
    (lambda m: (m / "config.json").write_text(json.dumps({"architectures": ["BertModel"]})), "not a causal language"),
    (lambda m: (m / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                          "max_position_embeddings": 8})),
     "beyond the model's context"),
    (lambda m: (m / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                          "max_position_embeddings": 70})),
     "max_length 64 + max_new_tokens 8 exceeds the model's context of 70"),
])
def test_a_model_that_cannot_generate_is_refused(tmp_path: Path, change: Any, message: str) -> None:
    study = load_study(_write(tmp_path, STUDY.format(fp="0" * 64)))
    model = _model_dir(tmp_path)
    assert GENERATION.check_model(model, (), study, "study.toml") == ()
    change(model)
    with pytest.raises(UserError, match=re.escape(message)):
        GENERATION.check_model(model, (), study, "study.toml")


def test_chat_template_and_compile_need_what_they_use(tmp_path: Path) -> None:
    text = STUDY.format(fp="0" * 64).replace("max_new_tokens = 8", "max_new_tokens = 8\nchat_template = true")
    model = _model_dir(tmp_path)
    with pytest.raises(UserError, match="has no chat template"):
        GENERATION.check_model(model, (), load_study(_write(tmp_path, text)), "study.toml")
    (model / "chat_template.jinja").write_text("{{ messages }}")
    assert GENERATION.check_model(model, (), load_study(_write(tmp_path, text)), "study.toml") == ()
    compiled = load_study(_write(tmp_path, text.replace("compile = false", "compile = true")))
    with pytest.raises(UserError, match="torch.compile is not supported"):
        GENERATION.check_model(model, (), compiled, "study.toml")
