"""Choosing the demo texts: every corpus, the tuning split and the classifier's training split, from the articles.

Per length bucket, the class distribution follows the source's unique-article
counts (largest remainder). An article gives at most one text to all outputs
together and no normalised text appears twice; smaller corpora are subsets of
larger ones, the tuning split comes from other articles and the training split of the demo classifier's head
from others still (so that the tuning split measures a held-out score). The result is a
pure function of the articles, their token counts, the sizes and the seed.

Example::

    from runner.demo.selection import select_texts

    selection = select_texts(articles, counts, {"quick": (180, 90, 30)}, tuning_size=600, seed=0)
    print(len(selection.corpora["quick"]), len(selection.tuning))   # 300 600
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.jsonio import write_text_atomic
from protocol.records import codec
from runner.demo.source import (
    BUCKET_PARTS,
    BUCKETS,
    MEDIUM_MAX_TOKENS,
    SHORT_MAX_TOKENS,
    Article,
    bucket_of,
    normalise,
)

#: Per (label, bucket): how many texts.
Quota = dict[str, dict[str, int]]


@dataclass(frozen=True)
class DemoText:
    """One selected text: a row of a demo corpus or of the tuning split (``codec.to_dict``: its keys in this
    order), with its token count (not written)."""

    id: str
    text: str
    label: str
    length_bucket: str
    n_tokens: int = field(metadata=codec.options(written=False))


@dataclass(frozen=True)
class Selection:
    """The texts of every corpus (by study name) and of the tuning split, and how they were chosen."""

    corpora: Mapping[str, tuple[DemoText, ...]]
    tuning: tuple[DemoText, ...]
    summary: Mapping[str, Any]
    #: The demo classifier head's own training texts: disjoint from the tuning split and every corpus.
    training: tuple[DemoText, ...] = ()


@dataclass(frozen=True)
class _Quotas:
    """How many texts each output takes, per bucket and class."""

    corpus: Mapping[str, Quota]  # study name -> bucket -> label -> texts
    tuning: Quota  # bucket -> label -> texts
    pool: Quota  # bucket -> label -> texts: the most any corpus takes
    training: Quota  # bucket -> label -> texts


def largest_remainder(total: int, weights: Mapping[str, int]) -> dict[str, int]:
    """Split ``total`` proportionally to ``weights`` (Hamilton's method).

    Ties in the remainders go to the key that comes first in ``weights``.
    """
    weight_sum = sum(weights.values())
    if weight_sum <= 0:
        raise ValueError("weights must have a positive sum")
    exact = {k: Fraction(total * w, weight_sum) for k, w in weights.items()}
    shares = {k: math.floor(v) for k, v in exact.items()}
    left = total - sum(shares.values())
    keys = list(weights)
    by_remainder = sorted(keys, key=lambda k: (-(exact[k] - shares[k]), keys.index(k)))
    for key in by_remainder[:left]:
        shares[key] += 1
    return shares


def select_texts(
    articles: Sequence[Article],
    counts: Mapping[str, Sequence[int]],
    sizes: Mapping[str, tuple[int, int, int]],
    tuning_size: int,
    seed: int,
    training_size: int = 0,
) -> Selection:
    """Choose the texts of every corpus and of the tuning split.

    ``counts[bucket][i]`` is the token count of ``articles[i].text(bucket)``. Per bucket, the class distribution follows
    the source's unique-article counts (largest remainder). An article gives at most one text to all outputs together,
    and no normalised text appears twice. One pool per (bucket, class) holds as many texts as the largest corpus needs;
    every corpus takes a prefix of it, so smaller corpora are subsets of larger ones. The tuning split, with the bucket
    proportions of the largest corpus, takes further articles, and the training split (``training_size`` texts, the same
    proportions) further ones still.
    """
    rng = random.Random(seed)
    labels = sorted({a.label for a in articles})
    class_weights = {label: sum(1 for a in articles if a.label == label) for label in labels}
    quotas = _quotas(sizes, tuning_size, labels, class_weights, training_size)
    eligible = _eligible_articles(articles, counts, labels)
    pools, tuning_parts, training_parts = _draw_pools(articles, counts, labels, eligible, quotas, rng)

    corpora: dict[str, tuple[DemoText, ...]] = {}
    for name in sorted(sizes):
        rows = [
            row
            for label in labels
            for bucket in BUCKETS
            for row in pools[(label, bucket)][: quotas.corpus[name][bucket][label]]
        ]
        corpora[name] = _shuffled(rows, rng)
    tuning = _shuffled([row for part in tuning_parts.values() for row in part], rng)
    training = _shuffled([row for part in training_parts.values() for row in part], rng)

    summary = {
        "bucket_parts": dict(BUCKET_PARTS),
        "bucket_max_tokens": {"short": SHORT_MAX_TOKENS, "medium": MEDIUM_MAX_TOKENS, "long": None},
        "token_counter": "fast tokenizer of the model, special tokens included, no truncation",
        "eligible_articles": {
            bucket: {label: eligible[(label, bucket)] for label in labels} for bucket in BUCKETS
        },
        "part_token_buckets": _part_token_buckets(counts),
        "class_weights": class_weights,
        "corpora": {name: _count_table(rows) for name, rows in corpora.items()},
        "tuning": _count_table(tuning),
        "training": _count_table(training),
        "subset_of": _subset_relations(corpora),
    }
    return Selection(corpora=corpora, tuning=tuning, summary=summary, training=training)


def _quotas(
    sizes: Mapping[str, tuple[int, int, int]],
    tuning_size: int,
    labels: Sequence[str],
    class_weights: Mapping[str, int],
    training_size: int = 0,
) -> _Quotas:
    """Per corpus and bucket, texts per class; the tuning and training splits follow the largest corpus's buckets."""
    corpus = {
        name: {
            bucket: largest_remainder(size, class_weights)
            for bucket, size in zip(BUCKETS, sizes[name], strict=True)
        }
        for name in sorted(sizes)
    }
    largest = max(sorted(sizes), key=lambda n: sum(sizes[n]))
    shares = dict(zip(BUCKETS, sizes[largest], strict=True))
    tuning = {b: largest_remainder(n, class_weights) for b, n in largest_remainder(tuning_size, shares).items()}
    training = {b: largest_remainder(n, class_weights) for b, n in largest_remainder(training_size, shares).items()}
    pool = {b: {c: max(corpus[n][b][c] for n in corpus) for c in labels} for b in BUCKETS}
    return _Quotas(corpus=corpus, tuning=tuning, pool=pool, training=training)


def _eligible_articles(
    articles: Sequence[Article], counts: Mapping[str, Sequence[int]], labels: Sequence[str]
) -> dict[tuple[str, str], int]:
    """Per (label, bucket): how many articles' text for that bucket falls in that bucket."""
    eligible = {(label, bucket): 0 for label in labels for bucket in BUCKETS}
    for i, article in enumerate(articles):
        for bucket in BUCKETS:
            if bucket_of(counts[bucket][i]) == bucket:
                eligible[(article.label, bucket)] += 1
    return eligible


def _draw_pools(
    articles: Sequence[Article],
    counts: Mapping[str, Sequence[int]],
    labels: Sequence[str],
    eligible: Mapping[tuple[str, str], int],
    quotas: _Quotas,
    rng: random.Random,
) -> tuple[dict[tuple[str, str], list[DemoText]], ...]:
    """Per (label, bucket): the corpus pool, the tuning part and the training part, drawn from the class's
    shuffled articles (in that order, so a build without a training split draws as before)."""
    index = {id(a): i for i, a in enumerate(articles)}
    used_texts: set[str] = set()
    pools: dict[tuple[str, str], list[DemoText]] = {}
    tuning_parts: dict[tuple[str, str], list[DemoText]] = {}
    training_parts: dict[tuple[str, str], list[DemoText]] = {}
    for label in labels:
        order = [a for a in articles if a.label == label]
        rng.shuffle(order)
        taken: set[int] = set()
        # The scarcest bucket of the class picks first, so it is not starved.
        for bucket in sorted(BUCKETS, key=lambda b: (eligible[(label, b)], BUCKETS.index(b))):
            pool_size = quotas.pool[bucket][label]
            tuning_size = quotas.tuning[bucket][label]
            wanted = pool_size + tuning_size + quotas.training[bucket][label]
            picked = [
                DemoText(article.text_id(bucket), article.text(bucket), label, bucket, counts[bucket][i])
                for i, article in _pick_articles(order, index, counts[bucket], bucket, wanted, taken, used_texts)
            ]
            if len(picked) < wanted:
                raise UserError(
                    f"only {len(picked)} {bucket} texts of class {label!r} are available, "
                    f"{wanted} are needed",
                    "demo sizes",
                    "Ask for fewer texts (sizes, tuning_size or training_size).",
                )
            pools[(label, bucket)] = picked[:pool_size]
            tuning_parts[(label, bucket)] = picked[pool_size:pool_size + tuning_size]
            training_parts[(label, bucket)] = picked[pool_size + tuning_size:]
    return pools, tuning_parts, training_parts


def _pick_articles(
    order: Sequence[Article],
    index: Mapping[int, int],
    bucket_counts: Sequence[int],
    bucket: str,
    wanted: int,
    taken: set[int],
    used_texts: set[str],
) -> list[tuple[int, Article]]:
    """Up to ``wanted`` (index, article) in ``order`` whose ``bucket`` text fits, is new, from an unused article.

    Marks the picked articles in ``taken`` and their normalised texts in ``used_texts``.
    """
    picked: list[tuple[int, Article]] = []
    for article in order:
        if len(picked) == wanted:
            break
        i = index[id(article)]
        if i in taken or bucket_of(bucket_counts[i]) != bucket:
            continue
        key = normalise(article.text(bucket))
        if key in used_texts:
            continue
        taken.add(i)
        used_texts.add(key)
        picked.append((i, article))
    return picked


def _shuffled(rows: Iterable[DemoText], rng: random.Random) -> tuple[DemoText, ...]:
    ordered = sorted(rows, key=lambda r: r.id)
    rng.shuffle(ordered)
    return tuple(ordered)


def _count_table(rows: Iterable[DemoText]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {bucket: {} for bucket in BUCKETS}
    for row in rows:
        table[row.length_bucket][row.label] = table[row.length_bucket].get(row.label, 0) + 1
    return {bucket: dict(sorted(per.items())) for bucket, per in table.items()}


def _part_token_buckets(counts: Mapping[str, Sequence[int]]) -> dict[str, dict[str, int]]:
    """How the text of each bucket's part falls into the buckets, over all unique articles."""
    result = {}
    for bucket in BUCKETS:
        tally = {b: 0 for b in BUCKETS}
        for n_tokens in counts[bucket]:
            tally[bucket_of(n_tokens)] += 1
        result[BUCKET_PARTS[bucket]] = tally
    return result


def _subset_relations(corpora: Mapping[str, Sequence[DemoText]]) -> dict[str, list[str]]:
    ids = {name: {row.id for row in rows} for name, rows in corpora.items()}
    return {name: sorted(other for other in ids if other != name and ids[name] <= ids[other]) for name in sorted(ids)}


def selection_labels(selection: Selection) -> list[str]:
    """Every label of the tuning and training splits and of the corpora, sorted: the classifier's labels."""
    corpus_labels = {row.label for rows in selection.corpora.values() for row in rows}
    return sorted({row.label for row in (*selection.tuning, *selection.training)} | corpus_labels)


def bucket_counts_line(rows: Sequence[DemoText]) -> str:
    """``"300 texts (180 short, 90 medium, 30 long)"``."""
    per = {b: sum(1 for r in rows if r.length_bucket == b) for b in BUCKETS}
    return f"{len(rows)} texts (" + ", ".join(f"{per[b]} {b}" for b in BUCKETS) + ")"


def write_jsonl(path: Path, rows: Sequence[DemoText]) -> None:
    """Write ``rows`` as a corpus file: one ``{id, text, label, length_bucket}`` object a line, atomically."""
    lines = [json.dumps(codec.to_dict(row), ensure_ascii=False, sort_keys=False) for row in rows]
    write_text_atomic(path, "".join(line + "\n" for line in lines))
