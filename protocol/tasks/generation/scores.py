"""The task scores of a generation against its reference text: exact match, ROUGE-L F1 and chrF, each in [0, 1].

Each is computed per input and averaged over the inputs (a macro average: every input weighs the same), in pure
Python so that ``protocol/`` needs nothing installed:

- ``exact_match``: 1 when the generated text equals the reference after the declared normalisation
  (:data:`NORMALISATIONS`: ``none``, ``whitespace`` strips and collapses runs of whitespace, ``casefold`` also
  applies NFKC and case folding), else 0;
- ``rouge_l``: the F1 of the longest common subsequence of words, tokenised as Google's ``rouge-score`` package
  does without stemming (lower case, every run of characters other than ``a-z0-9`` a separator): the same figure
  as ``rouge_scorer.RougeScorer(["rougeL"]).score(reference, generated).fmeasure``;
- ``chrf``: character n-gram F-score (orders 1 to 6, beta 2, whitespace removed, no word n-grams), as
  ``sacrebleu``'s ``CHRF().sentence_score(generated, [reference]).score`` divided by 100.

The tests compare each with its reference implementation where it is installed.

Example::

    score_one("rouge_l", "Rooney charged by FA", "FA charges Rooney")   # 0.2857…
    score_one("exact_match", " Yes ", "yes", "casefold")                 # 1.0
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

SCORES = ("rouge_l", "chrf", "exact_match")
NORMALISATIONS = ("whitespace", "none", "casefold")

_NON_ALPHANUM = re.compile(r"[^a-z0-9]+")
_SPACES = re.compile(r"\s+")
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")
CHRF_ORDER = 6
CHRF_BETA = 2.0


def normalise(text: str, normalisation: str) -> str:
    """The text as exact match compares it."""
    if normalisation == "none":
        return text
    if normalisation == "casefold":
        text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.split())


def rouge_tokens(text: str) -> list[str]:
    """Words as ``rouge-score``'s default tokenizer makes them (no stemming)."""
    spaced = _NON_ALPHANUM.sub(" ", text.lower())
    return [token for token in _SPACES.split(spaced) if _VALID_TOKEN.match(token)]


def _lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence (one row of the table at a time)."""
    if len(b) > len(a):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for item in a:
        current = [0]
        for j, other in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if item == other else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(generated: str, reference: str) -> float:
    """ROUGE-L F1 of one generation against its reference."""
    target, prediction = rouge_tokens(reference), rouge_tokens(generated)
    if not target or not prediction:
        return 0.0
    lcs = _lcs_length(target, prediction)
    precision, recall = lcs / len(prediction), lcs / len(target)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _char_ngrams(text: str) -> list[Counter[str]]:
    line = "".join(text.split())
    return [Counter(line[i:i + n] for i in range(len(line) - n + 1)) for n in range(1, CHRF_ORDER + 1)]


def chrf(generated: str, reference: str) -> float:
    """chrF (sacrebleu's defaults: effective-order averaging of precision and recall), in [0, 1]."""
    factor = CHRF_BETA**2
    precision_sum = recall_sum = 0.0
    effective = 0
    for hyp, ref in zip(_char_ngrams(generated), _char_ngrams(reference), strict=True):
        n_hyp = sum(hyp.values()) if ref else 0
        n_ref = sum(ref.values())
        n_match = sum(min(count, ref[gram]) for gram, count in hyp.items() if gram in ref)
        if n_hyp > 0 and n_ref > 0:
            precision_sum += n_match / n_hyp
            recall_sum += n_match / n_ref
            effective += 1
    if effective == 0:
        return 0.0
    precision, recall = precision_sum / effective, recall_sum / effective
    if precision + recall == 0:
        return 0.0
    return (1 + factor) * precision * recall / (factor * precision + recall)


def score_one(score: str, generated: str, reference: str, normalisation: str = "whitespace") -> float:
    """One input's score, in [0, 1]."""
    if score == "rouge_l":
        return rouge_l(generated, reference)
    if score == "chrf":
        return chrf(generated, reference)
    if score == "exact_match":
        return 1.0 if normalise(generated, normalisation) == normalise(reference, normalisation) else 0.0
    raise ValueError(f"unknown generation score {score!r}")
