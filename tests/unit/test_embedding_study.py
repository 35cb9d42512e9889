"""An embedding study's own keys and inputs: [embedding], [quality] min_cosine, the query sets against the corpora.

Every problem is an error naming the file and the key, all of one file at once; no model weights are needed
(the encoder directory holds a config.json only).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from embedworkspace import write_embed_workspace
from recordfiles import sample_spec

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.records import codec
from protocol.records.stages import TrialSpec
from protocol.study.load import load_study
from protocol.study.reader import StudyErrors
from protocol.tasks import read_task_corpus, study_task
from protocol.tasks.embedding.options import FROZEN_QUERIES
from protocol.tasks.embedding.queries import read_queries


def messages(exc: UserError) -> list[str]:
    return [e.message for e in exc.errors] if isinstance(exc, StudyErrors) else [exc.message]


def check_inputs(study_path: Path) -> None:
    study = load_study(study_path)
    task = study_task(study)
    task.check_inputs(study, read_task_corpus(study.corpus.path, task), read_task_corpus(study.tuning.path, task))


def test_a_valid_embedding_study_carries_its_queries_into_every_spec(tmp_path: Path) -> None:
    study = load_study(write_embed_workspace(tmp_path / "ws"))
    assert (study.task, study.quality.metric, study.quality.extra) == ("sentence-embedding", "ndcg@10",
                                                                        {"min_cosine": 0.999})
    options = study.task_options
    assert (options["pooling"], options["normalize"], options["dimension"]) == ("mean", True, 384)
    assert [item[0] for item in options["queries"]["items"]][:2] == ["qc-000", "qc-001"]
    assert "items" not in options["tuning_queries"]  # read by `isocost tune` only
    assert not study_task(study).labels_required
    check_inputs(study.path)
    json.dumps(dict(options))  # JSON-ready, as every TrialSpec.task_options
    written = sample_spec(variant=study.variants()[0], warmup=study.warmup, task=study.task, task_options=dict(options))
    spec = codec.from_dict(TrialSpec, json.loads(json.dumps(codec.to_dict(written))))
    assert spec.task_options["queries"]["items"][0][2] == ["c-000"]


@pytest.mark.parametrize(("old", "new", "key", "message"), [
    ("min_cosine = 0.999", "min_cosine = 0", "quality.min_cosine",
     "min_cosine must be between 0 (excluded) and 1, got 0.0"),
    ("min_cosine = 0.999", "min_cosine = 1.5", "quality.min_cosine",
     "min_cosine must be between 0 (excluded) and 1, got 1.5"),
    ("min_cosine = 0.999", "min_cosine = -0.2", "quality.min_cosine",
     "min_cosine must be between 0 (excluded) and 1, got -0.2"),
    ('pooling = "mean"', 'pooling = "max"', "embedding.pooling", "'max' is not one of mean, cls"),
    ("dimension = 384", "dimension = 0", "embedding.dimension", "dimension must be between 1 and 65536"),
    ("normalize = true", 'normalize = "yes"', "embedding.normalize", "expected true or false"),
    ('metric = "ndcg@10"', 'metric = "accuracy"', "quality.metric", "'accuracy' is not one of ndcg@10, mrr@10"),
    ('subgroups = ["length_bucket"]', 'subgroups = ["label"]', "quality.subgroups", "unknown subgroup 'label'"),
    ('path = "queries.jsonl"', 'path = "tuning-queries.jsonl"', "embedding.tuning_queries.path",
     "the final and the tuning query sets are the same file"),
])
def test_a_bad_key_names_its_file_and_key(tmp_path: Path, old: str, new: str, key: str, message: str) -> None:
    path = write_embed_workspace(tmp_path / "ws", replace={old: new})
    with pytest.raises(UserError) as caught:
        load_study(path)
    found = [m for m in messages(caught.value) if f"key {key}" in m]
    assert found and message in found[0], messages(caught.value)


def test_min_cosine_of_one_is_allowed(tmp_path: Path) -> None:
    study = load_study(write_embed_workspace(tmp_path / "ws", replace={"min_cosine = 0.999": "min_cosine = 1"}))
    assert study.quality.extra["min_cosine"] == 1.0


def test_every_problem_of_the_table_at_once(tmp_path: Path) -> None:
    path = write_embed_workspace(tmp_path / "ws", replace={'pooling = "mean"': 'pooling = "max"',
                                                           "dimension = 384": "dimension = -1",
                                                           "min_cosine = 0.999": "min_cosine = 2",
                                                           "normalize = true": "normalise = true"})
    with pytest.raises(StudyErrors) as caught:
        load_study(path)
    found = messages(caught.value)
    for key, message in (("embedding.pooling", "'max' is not one of"), ("embedding.dimension", "got -1"),
                         ("quality.min_cosine", "got 2"), ("embedding.normalize", "missing required key"),
                         ("embedding.normalise", "unknown key 'normalise'")):
        assert any(f"key {key})" in m and message in m for m in found), (key, found)
    assert len(found) == 5


def test_no_embedding_table_is_an_error_with_the_fix(tmp_path: Path) -> None:
    text = write_embed_workspace(tmp_path / "ws").read_text()
    start = text.index("[embedding]")
    (tmp_path / "ws" / "study.toml").write_text(text[:start] + text[text.index("[[length_buckets]]"):])
    with pytest.raises(UserError) as caught:
        load_study(tmp_path / "ws" / "study.toml")
    assert "key embedding" in caught.value.message and "--task sentence-embedding" in caught.value.message


def test_an_embedding_table_in_a_classification_study_is_named(tmp_path: Path) -> None:
    path = write_embed_workspace(tmp_path / "ws", replace={'task = "sentence-embedding"\n': ""})
    with pytest.raises(UserError) as caught:
        load_study(path)
    assert any("[embedding] is read by task 'sentence-embedding'" in m for m in messages(caught.value))


def _append_query(path: Path, ident: str, text: str, relevant: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": ident, "text": text, "relevant": relevant}) + "\n")


def _refingerprint(root: Path) -> None:
    study = root / "study.toml"
    text = study.read_text()
    for name in ("queries.jsonl", "tuning-queries.jsonl"):
        marker = f'path = "{name}"\nfingerprint = "'
        start = text.index(marker) + len(marker)
        text = text[:start] + fingerprint_path(root / name) + text[start + 71:]
    study.write_text(text)


@pytest.mark.parametrize(("edit", "message", "key"), [
    (lambda r: _append_query(r / "queries.jsonl", "qx", "gone", ["c-999"]),
     "1 relevant document(s) absent from the final corpus: query 'qx' names document 'c-999'", "embedding.queries"),
    (lambda r: _append_query(r / "tuning-queries.jsonl", "qy", "nowhere", ["c-001"]),
     "absent from the tuning split: query 'qy' names document 'c-001'", "embedding.tuning_queries"),
    (lambda r: _append_query(r / "queries.jsonl", "qt-000", "a tuning query id", ["c-001"]),
     "the final query set overlaps the tuning split (1): query id 'qt-000' is also a tuning query's",
     "embedding.queries"),
    (lambda r: _append_query(r / "queries.jsonl", "qz", "x", ["c-001", "t-002"]),
     "query 'qz' names tuning input 't-002'", "embedding.queries"),
])
def test_query_sets_are_checked_against_the_corpora(tmp_path: Path, edit, message: str, key: str) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ws"
    write_embed_workspace(root)
    edit(root)
    _refingerprint(root)
    with pytest.raises(UserError) as caught:
        check_inputs(root / "study.toml")
    found = [m for m in messages(caught.value) if message in m]
    assert found and f"key {key}" in found[0], messages(caught.value)


def test_a_query_text_equal_to_a_tuning_input_is_an_overlap(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_embed_workspace(root)
    tuning_text = json.loads((root / "tuning.jsonl").read_text().splitlines()[3])["text"]
    _append_query(root / "queries.jsonl", "qq", tuning_text.upper(), ["c-001"])
    _refingerprint(root)
    with pytest.raises(UserError, match="query 'qq' has the text of tuning input 't-003'"):
        check_inputs(root / "study.toml")


def test_model_problems_are_named_with_the_key(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_embed_workspace(root, replace={'pooling = "mean"': 'pooling = "cls"'})
    (root / "encoder" / "config.json").write_text(json.dumps({"hidden_size": 256}))
    (root / "encoder" / "tokenizer_config.json").write_text(json.dumps({"pad_token": "<pad>"}))
    text = (root / "study.toml").read_text().replace(
        f'fingerprint = "{load_study(root / "study.toml").model.fingerprint}"',
        f'fingerprint = "{fingerprint_path(root / "encoder")}"')
    (root / "study.toml").write_text(text)
    with pytest.raises(StudyErrors) as caught:
        check_inputs(root / "study.toml")
    found = messages(caught.value)
    assert any("hidden_size is 256, the study declares dimension 384" in m and "key embedding.dimension" in m
               for m in found), found
    assert any('pooling = "cls" needs a [CLS] token' in m and "key embedding.pooling" in m for m in found), found


def test_a_changed_or_missing_query_file_is_named(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_embed_workspace(root)
    _append_query(root / "queries.jsonl", "qn", "new", ["c-001"])
    (root / "tuning-queries.jsonl").unlink()
    with pytest.raises(StudyErrors) as caught:
        check_inputs(root / "study.toml")
    found = messages(caught.value)
    assert any("query file fingerprint" in m and "key embedding.queries.fingerprint" in m for m in found), found
    assert any("query file not found" in m and "key embedding.tuning_queries.path" in m for m in found), found
    study = load_study(root / "study.toml")
    assert "items" not in study.task_options["queries"]  # not trusted: the reference is refused by name
    with pytest.raises(UserError, match="the query set is not readable with the study's fingerprint"):
        study_task(study).reference([], study)


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "a", "text": "t", "relevant": []}', "relevant must be a non-empty list"),
    ('{"id": "a", "text": "", "relevant": ["d"]}', "text must be a non-empty string"),
    ('{"id": "a", "id": "b", "text": "t", "relevant": ["d"]}', "duplicate key 'id'"),
    ('{"id": "a", "text": "t", "relevant": ["d", "d"]}', "a relevant document is named twice"),
    ("not json", "not valid JSON"),
])
def test_malformed_query_lines_are_listed_by_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "ok", "text": "fine", "relevant": ["d"]}\n' + line + "\n")
    with pytest.raises(UserError) as caught:
        read_queries(path, "study.toml, key embedding.queries.path")
    assert "line 2:" in caught.value.message and message in caught.value.message
    assert str(path) in caught.value.message


def test_a_campaign_reads_its_frozen_copy_of_the_queries(tmp_path: Path) -> None:
    """The frozen study.toml of a campaign directory reads queries.jsonl beside it, checked by fingerprint."""
    root = tmp_path / "ws"
    study_path = write_embed_workspace(root)
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    shutil.copy(study_path, campaign / "study.toml")
    (campaign / "campaign.json").write_text("{}")
    shutil.copy(root / "queries.jsonl", campaign / FROZEN_QUERIES)
    (root / "queries.jsonl").unlink()  # the original is gone: the frozen copy is what counts
    frozen = load_study(campaign / "study.toml")
    assert len(frozen.task_options["queries"]["items"]) == 12
    (campaign / FROZEN_QUERIES).write_text((campaign / FROZEN_QUERIES).read_text().replace("c-001", "c-002"))
    assert "items" not in load_study(campaign / "study.toml").task_options["queries"]  # an edited copy is refused
