"""The demo builder's steps on synthetic articles: no installed corpus, model, torch or training.

The end-to-end build (real packages, real training) is tests/e2e/test_demo.py.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.records import codec
from runner.demo.reuse import BUILDER_VERSION, make_readable, remove_outputs, reusable_record
from runner.demo.selection import (
    DemoText,
    bucket_counts_line,
    largest_remainder,
    select_texts,
    selection_labels,
    write_jsonl,
)
from runner.demo.source import BUCKETS, Article, bucket_of, normalise, read_articles
from runner.demo.study_files import (
    GPU_STACKS,
    require_templates,
    template_hashes,
    write_studies,
)
from runner.demo.training import HELDOUT, quality_minimum, training_request

# Token counts that put every article's text of a bucket into that bucket.
FITS = {"short": 10, "medium": 50, "long": 200}


def articles(per_label: dict[str, int]) -> list[Article]:
    return [
        Article(label, f"{i:03d}", f"{label} title {i}", f"{label} lead {i}", (f"{label} body {i}",))
        for label, n in per_label.items()
        for i in range(n)
    ]


def fitting_counts(rows: list[Article]) -> dict[str, list[int]]:
    return {bucket: [FITS[bucket]] * len(rows) for bucket in BUCKETS}


def article_of(text: DemoText) -> str:
    return text.id.rsplit("-", 1)[0].removesuffix("-title")


def test_bucket_of_and_the_parts_of_an_article() -> None:
    assert [bucket_of(n) for n in (1, 32, 33, 128, 129)] == ["short", "short", "medium", "medium", "long"]
    article = Article("sport", "012", "Title", "Lead.", ("Body one.", "Body two."))
    assert article.text("short") == "Title"
    assert article.text("medium") == "Title\n\nLead."
    assert article.text("long") == "Title\n\nLead.\n\nBody one.\n\nBody two."
    assert [article.text_id(b) for b in BUCKETS] == [
        "bbc-sport-012-title", "bbc-sport-012-title-lead", "bbc-sport-012-full"]
    assert normalise("  A  b\n\tC ") == "a b c"


def test_read_articles_drops_duplicates_conflicts_and_malformed_files(tmp_path: Path) -> None:
    def write(relative: str, data: bytes) -> None:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(data)

    write("sport/001.txt", b"Goal\n\nA late goal.\n\nMore.")
    write("sport/002.txt", b"GOAL\n\nA  late goal.\n\nMore.")  # the same text, normalised: dropped
    write("sport/003.txt", b"Caf\xe9 win\n\nIn cp1252.")  # not UTF-8
    write("sport/004.txt", b"one paragraph only")  # malformed
    write("tech/001.txt", b"Chip\n\nFaster.")
    write("tech/002.txt", b"Both\n\nSame text.")
    write("sport/005.txt", b"Both\n\nSame text.")  # under two classes: both dropped
    found, summary = read_articles(tmp_path)
    assert [(a.label, a.number) for a in found] == [("sport", "001"), ("sport", "003"), ("tech", "001")]
    assert found[1].title == "Café win"
    assert summary == {
        "files": 7,
        "files_per_class": {"sport": 5, "tech": 2},
        "duplicate_files_dropped": 1,
        "conflicting_label_files_dropped": 2,
        "malformed_files_skipped": ["sport/004.txt"],
        "decoded_as_cp1252": ["sport/003.txt"],
        "unique_articles": {"sport": 2, "tech": 1},
    }


def test_largest_remainder_splits_exactly() -> None:
    assert largest_remainder(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    assert largest_remainder(7, {"a": 5, "b": 2}) == {"a": 5, "b": 2}
    with pytest.raises(ValueError, match="positive sum"):
        largest_remainder(3, {"a": 0})


def test_select_texts_subsets_disjoint_articles_and_quotas() -> None:
    rows = articles({"business": 30, "sport": 20})
    sizes = {"small": (4, 2, 1), "large": (8, 4, 2)}
    selection = select_texts(rows, fitting_counts(rows), sizes, tuning_size=14, seed=0)
    small, large, tuning = selection.corpora["small"], selection.corpora["large"], selection.tuning
    assert [len(small), len(large), len(tuning)] == [7, 14, 14]
    assert {t.id for t in small} < {t.id for t in large}
    used = [article_of(t) for t in (*large, *tuning)]
    assert len(used) == len(set(used)), "an article gave two texts"
    for text in (*large, *tuning):
        assert bucket_of(text.n_tokens) == text.length_bucket
    # 30:20 per bucket, largest remainder: 8 -> 5/3 (4.8/3.2), 4 -> 2/2 (2.4/1.6), 2 -> 1/1.
    assert selection.summary["corpora"]["large"] == {
        "short": {"business": 5, "sport": 3}, "medium": {"business": 2, "sport": 2},
        "long": {"business": 1, "sport": 1}}
    assert selection.summary["subset_of"] == {"large": [], "small": ["large"]}
    assert selection.summary["class_weights"] == {"business": 30, "sport": 20}
    assert selection_labels(selection) == ["business", "sport"]
    assert bucket_counts_line(large) == "14 texts (8 short, 4 medium, 2 long)"


def test_select_texts_is_a_function_of_the_seed() -> None:
    rows = articles({"business": 30, "sport": 20})
    sizes = {"quick": (4, 2, 1)}
    first = select_texts(rows, fitting_counts(rows), sizes, 10, seed=3)
    again = select_texts(rows, fitting_counts(rows), sizes, 10, seed=3)
    other = select_texts(rows, fitting_counts(rows), sizes, 10, seed=4)
    assert first == again
    assert [t.id for t in first.corpora["quick"]] != [t.id for t in other.corpora["quick"]]


def test_select_texts_skips_texts_outside_the_bucket_and_refuses_too_few() -> None:
    rows = articles({"sport": 12})
    counts = fitting_counts(rows)
    counts["long"] = [FITS["long"]] * 2 + [FITS["medium"]] * 10  # only two full texts are long
    selection = select_texts(rows, counts, {"quick": (2, 2, 2)}, tuning_size=0, seed=0)
    assert {t.id.rsplit("-", 1)[0] for t in selection.corpora["quick"] if t.length_bucket == "long"} <= {
        "bbc-sport-000", "bbc-sport-001"}
    with pytest.raises(UserError, match=r"only 2 long texts of class 'sport' are available, 3 are needed"):
        select_texts(rows, counts, {"quick": (2, 2, 3)}, tuning_size=0, seed=0)


def test_the_training_request_holds_out_the_whole_tuning_split(tmp_path: Path) -> None:
    """The head trains on its own split and is scored on the tuning split, which it never sees (issue 22)."""
    training = [DemoText(f"r{i:02d}", f"text {i}", "ab"[i % 2], BUCKETS[i % 3], 5) for i in range(20)]
    tuning = [DemoText(f"t{i:02d}", f"tuning {i}", "ab"[i % 2], BUCKETS[i % 3], 5) for i in range(10)]
    request = training_request(tmp_path / "src", training, tuning, ["a", "b"], tmp_path / "model", seed=0)
    assert request["heldout"] == sorted(row.id for row in tuning)
    assert not set(request["heldout"]) & {row.id for row in training}
    assert [row["id"] for row in request["rows"]] == [r.id for r in (*training, *tuning)]
    assert request["rows"][0] == {"id": "r00", "text": "text 0", "label": "a", "length_bucket": "short"}
    assert request["heldout_split"] == HELDOUT
    assert json.loads(json.dumps(request)) == request


def test_the_training_split_is_disjoint_from_the_tuning_split_and_the_corpora() -> None:
    rows = articles({"business": 30, "sport": 20})
    selection = select_texts(rows, fitting_counts(rows), {"quick": (4, 2, 1)}, tuning_size=7, seed=0,
                             training_size=14)
    assert [len(selection.tuning), len(selection.training)] == [7, 14]
    used = [article_of(t) for t in (*selection.corpora["quick"], *selection.tuning, *selection.training)]
    assert len(used) == len(set(used)), "an article gave two texts"
    assert selection.summary["training"] == {"short": {"business": 5, "sport": 3},
                                             "medium": {"business": 2, "sport": 2}, "long": {"business": 1, "sport": 1}}
    for text in (*selection.tuning, *selection.training):
        assert bucket_of(text.n_tokens) == text.length_bucket


def test_quality_minimum_floors_after_the_margin() -> None:
    assert quality_minimum(Fraction(98, 120)) == "0.76"
    assert quality_minimum(Fraction(1, 1)) == "0.95"
    assert quality_minimum(Fraction(1, 100)) == "0.00"


def test_templates_and_the_study_files_written(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no demo study template for nope"):
        require_templates(["quick", "nope"])
    assert set(template_hashes(["quick"])) == {"quick"}
    assert set(template_hashes(["quick", "classify-1000"])) == {"quick", "classify-1000", "gpu"}
    inputs = {"corpus-quick.jsonl": "sha256:" + "1" * 64, "corpus-classify-1000.jsonl": "sha256:" + "2" * 64,
              "tuning.jsonl": "sha256:" + "3" * 64, "model": "sha256:" + "4" * 64}
    written = write_studies(tmp_path, {"quick": 21, "classify-1000": 42}, inputs, "0.80")
    expected = {"classify-1000.toml", "quick.toml", *(f"{s}-{g}.toml" for s in ("quick", "gpu") for g in GPU_STACKS)}
    assert set(written) == expected
    for name, fingerprint in written.items():
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert "@" not in text and fingerprint == fingerprint_path(tmp_path / name)
    quick = (tmp_path / "quick.toml").read_text(encoding="utf-8")
    assert "all 21 demo texts" in quick and inputs["corpus-quick.jsonl"] in quick and "0.80" in quick
    assert (tmp_path / "quick-rocm.toml").read_text(encoding="utf-8") == quick.replace(
        'stack = "cpu"\ndevice = "cpu"', 'stack = "rocm"\ndevice = "cuda"')
    assert inputs["corpus-classify-1000.jsonl"] in (tmp_path / "gpu-cuda.toml").read_text(encoding="utf-8")


def test_reusable_record_needs_same_parameters_and_intact_files(tmp_path: Path) -> None:
    rows = [DemoText("t1", "héllo", "a", "short", 3)]
    write_jsonl(tmp_path / "tuning.jsonl", rows)
    assert json.loads((tmp_path / "tuning.jsonl").read_text(encoding="utf-8")) == codec.to_dict(rows[0])
    parameters, packages = {"seed": 0}, {"torch": "2"}
    record = {"builder_version": BUILDER_VERSION, "parameters": parameters, "packages": packages,
              "files": {"tuning.jsonl": fingerprint_path(tmp_path / "tuning.jsonl")}}
    assert reusable_record(tmp_path, parameters, packages) is None  # no demo.json yet
    (tmp_path / "demo.json").write_text(json.dumps(record), encoding="utf-8")
    assert reusable_record(tmp_path, parameters, packages) == record
    assert reusable_record(tmp_path, {"seed": 1}, packages) is None
    assert reusable_record(tmp_path, parameters, {"torch": "3"}) is None
    (tmp_path / "tuning.jsonl").write_text("changed\n", encoding="utf-8")
    assert reusable_record(tmp_path, parameters, packages) is None
    (tmp_path / "demo.json").write_text("not json", encoding="utf-8")
    assert reusable_record(tmp_path, parameters, packages) is None


def test_remove_outputs_removes_only_the_builders_files(tmp_path: Path) -> None:
    for name in ("demo.json", "tuning.jsonl", "corpus-quick.jsonl", "quick.toml", "mine.toml", "model/w.bin"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x", encoding="utf-8")
    (tmp_path / "model" / "w.bin").chmod(0o600)
    make_readable(tmp_path)
    assert (tmp_path / "model" / "w.bin").stat().st_mode & 0o777 == 0o644
    remove_outputs(tmp_path, ["quick"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.toml"]
