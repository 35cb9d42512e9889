"""Issue 38, class 3: outputs that contradict themselves make the pass not accepted, with a reason.

A ``generations.jsonl`` line whose ``text`` is not the decoding of its ``tokens`` was accepted (and its ROUGE-L
rose); an invalid UTF-8 byte was read as U+FFFD; a vector of a normalising study with norm 7 was ranked. Each is
now a reason in the pass check (protocol/tasks/output_checks.py), never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from protocol.tasks.generation import GENERATION
from protocol.tasks.generation.outputs import Generation, ParsedGenerations, parse_generations

WORDS = ["[UNK]", "Rooney", "charged", "by", "FA", "Apple", "unveils", "an", "iPod", "cheaper"]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    folder = tmp_path / "model"
    folder.mkdir()
    tokenizer = Tokenizer(WordLevel({word: i for i, word in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()  # type: ignore[assignment]
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def _study(model: Path | None) -> Any:
    quality = SimpleNamespace(metric="rouge_l", minimum=0.3, subgroups=("length_bucket",),
                              extra={"normalisation": "whitespace", "length_window": [0.9, 1.1],
                                     "min_identical": 0.0, "min_score_share": 0.99})
    return SimpleNamespace(quality=quality, task_options={"max_new_tokens": 4, "top_k": 2},
                           model=SimpleNamespace(path=model) if model else None)


def _reference() -> Any:
    rows = [{"id": i, "label": "", "n_tokens": "3", "length_bucket": b, "reference": json.dumps(r)}
            for i, b, r in (("a", "short", "Rooney charged by FA"), ("b", "long", "Apple unveils cheaper iPod"))]
    return GENERATION.reference(rows, _study(None))


def _gen(ident: str, text: str, tokens: tuple[int, ...]) -> Generation:
    return Generation(ident, tokens, text, tuple((t, 0) for t in tokens), tuple((-0.1, -2.0) for _ in tokens))


TRUE_A = _gen("a", "Rooney charged by FA", (1, 2, 3, 4))
TRUE_B = _gen("b", "Apple unveils an iPod", (5, 6, 7, 8))


def test_a_text_that_is_the_decoding_of_its_tokens_is_accepted(model: Path) -> None:
    check = GENERATION.check_pass(ParsedGenerations((TRUE_A, TRUE_B), (), 100), _reference(), _study(model))
    assert check.accepted, check.verdict


def test_a_text_that_is_not_the_decoding_of_its_tokens_is_not_accepted(model: Path) -> None:
    """The named case: the text edited to the reference (ROUGE-L 1.0) while its tokens still say "an iPod"."""
    forged = _gen("b", "Apple unveils cheaper iPod", TRUE_B.tokens)
    honest = GENERATION.check_pass(ParsedGenerations((TRUE_A, TRUE_B), (), 100), _reference(), _study(model))
    check = GENERATION.check_pass(ParsedGenerations((TRUE_A, forged), (), 100), _reference(), _study(model))
    assert not check.accepted
    assert "whose text is not the decoding of its tokens" in check.verdict and "'b'" in check.verdict
    assert check.metric_value is None and honest.metric_value is not None  # the score cannot rise


def test_without_the_checkpoints_tokenizer_the_texts_are_not_checked(tmp_path: Path) -> None:
    forged = _gen("b", "Apple unveils cheaper iPod", TRUE_B.tokens)
    check = GENERATION.check_pass(ParsedGenerations((TRUE_A, forged), (), 100), _reference(),
                                  _study(tmp_path / "moved-away"))
    assert check.accepted  # a bundle verified without the model: the seal is what holds


def test_a_generation_line_with_invalid_utf8_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "generations.jsonl"
    line = json.dumps({"id": "a", "tokens": [1], "text": "Rooney", "n_tokens": 1, "top_ids": [[1, 0]],
                       "top_logprobs": [[-0.1, -2.0]]}).encode()
    path.write_bytes(line + b"\n" + line.replace(b"Rooney", b"Roo\xffney").replace(b'"a"', b'"b"') + b"\n")
    parsed = parse_generations(path, 100)
    assert parsed.ids == ("a",)
    assert parsed.format_errors == ("line 2: not valid UTF-8",)


def test_a_prediction_line_with_invalid_utf8_is_a_format_error(tmp_path: Path) -> None:
    from protocol.tasks.classification.predictions import parse_predictions

    path = tmp_path / "predictions.jsonl"
    path.write_bytes(b'{"id": "a", "label": "x", "score": 0.5}\n{"id": "b", "label": "\xff", "score": 0.5}\n')
    parsed = parse_predictions(path)
    assert parsed.ids == ("a",)
    assert parsed.format_errors == ("line 2: not valid UTF-8",)


@pytest.mark.parametrize("text", ['{"id": "b", "label": "x", "score": NaN}',
                                  '{"id": "b", "label": "x", "score": Infinity}'])
def test_a_prediction_with_nan_or_infinity_is_a_format_error(tmp_path: Path, text: str) -> None:
    from protocol.tasks.classification.predictions import parse_predictions

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": "a", "label": "x", "score": 0.5}\n' + text + "\n", encoding="utf-8")
    assert parse_predictions(path).format_errors == ("line 2: not valid JSON",)


def _embedding_check(directory: Path, normalize: bool, docs: Any = None) -> Any:
    from test_embedding_task import REFERENCE, study, write_pass

    from protocol.tasks.embedding import EMBEDDING

    np = pytest.importorskip("numpy")
    unit = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float32)
    queries = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0.6, 0.8]], dtype=np.float32)
    write_pass(directory, unit if docs is None else docs, queries=queries)
    return EMBEDDING.check_pass(EMBEDDING.read_pass(directory), REFERENCE,
                                SimpleNamespace(**vars(study()), task_options={"normalize": normalize}))


def test_unit_vectors_of_a_normalising_study_are_accepted(tmp_path: Path) -> None:
    assert _embedding_check(tmp_path / "t", normalize=True).accepted


def test_a_vector_not_of_norm_1_in_a_normalising_study_is_not_accepted(tmp_path: Path) -> None:
    import numpy as np

    docs = np.array([[7, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float32)
    check = _embedding_check(tmp_path / "t", normalize=True, docs=docs)
    assert not check.accepted and check.metric_value is None
    assert "1 vector(s) not of norm 1 though the study normalises them, e.g. id 'd0' (norm 7)" in check.verdict
    assert _embedding_check(tmp_path / "u", normalize=False, docs=docs).accepted  # no norm declared: any norm
