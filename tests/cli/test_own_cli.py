"""init, check and rental without a model run (your own data to a first decision): every friction point, CLI level."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

from click.testing import CliRunner
from recordfiles import write_campaign_record
from workspace import write_corpus

from protocol.costing.plans import default_catalog_path
from protocol.records.raw_columns import RAW_SCHEMA_VERSION
from protocol.records.stages import CampaignRecord
from protocol.study.schema import KEYS, keys_for
from runner.cli import main


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def fake_checkpoint(path: Path, labels: dict[str, str], texts: list[str]) -> Path:
    """config.json with id2label and a real tokenizer.json (no weights needed by init)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    path.mkdir()
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]"]))
    tok.save(str(path / "tokenizer.json"))
    (path / "config.json").write_text(json.dumps({"id2label": labels, "max_position_embeddings": 64}),
                                      encoding="utf-8")
    return path


def corpus_and_model(tmp_path: Path, labels: dict[str, str]) -> tuple[Path, Path, Path]:
    write_corpus(tmp_path / "mine.jsonl", "m", 20, seed=3)  # labels x, y
    write_corpus(tmp_path / "mine-tuning.jsonl", "u", 6, seed=4)
    texts = [json.loads(line)["text"] for line in (tmp_path / "mine.jsonl").read_text().splitlines()]
    return tmp_path / "mine.jsonl", tmp_path / "mine-tuning.jsonl", fake_checkpoint(tmp_path / "ckpt", labels, texts)


def test_init_writes_every_key_with_a_comment_and_counts(tmp_path: Path) -> None:
    corpus, tuning, model = corpus_and_model(tmp_path, {"0": "x", "1": "y"})
    study = tmp_path / "study.toml"
    code, out = cli("init", str(corpus), str(model), "--tuning", str(tuning), "--out", str(study), "--stack", "cuda")
    assert code == 0, out
    text = study.read_text(encoding="utf-8")
    for key in keys_for("text-classification"):  # every key but another task's (sentence-embedding's [embedding])
        leaf = "cuda" if key.startswith("images") else key.split(".")[-1]
        assert f"{leaf} = " in text, key
        assert KEYS[key].meaning in text, key  # with its one-line comment
    data = tomllib.loads(text)
    assert data["base"]["stack"] == "cuda" and data["base"]["device"] == "cuda"
    assert [s["values"] for s in data["series"]][0] == ["fp32", "bf16", "fp16"]
    assert data["corpus"]["path"] == "mine.jsonl"  # relative to the study file
    counts = [line for line in text.splitlines() if line.startswith("max_tokens = ")]
    assert counts and all("inputs" in line for line in counts)
    assert "length buckets (model tokenizer): short ≤" in out


def test_init_without_tuning_holds_out_a_split(tmp_path: Path) -> None:
    corpus, _, model = corpus_and_model(tmp_path, {"0": "x", "1": "y"})
    code, out = cli("init", str(corpus), str(model), "--out", str(tmp_path / "s.toml"))
    assert code == 0, out
    assert (tmp_path / "mine.final.jsonl").is_file() and (tmp_path / "mine.tuning.jsonl").is_file()
    assert len((tmp_path / "mine.tuning.jsonl").read_text().splitlines()) == 4


def test_init_refuses_a_label_the_model_does_not_have(tmp_path: Path) -> None:
    corpus, tuning, model = corpus_and_model(tmp_path, {"0": "x", "1": "renamed"})
    code, out = cli("init", str(corpus), str(model), "--tuning", str(tuning), "--out", str(tmp_path / "s.toml"))
    assert code == 2
    assert "'y'" in out and "'x', 'renamed'" in out
    assert not (tmp_path / "s.toml").exists()


def test_check_lists_every_key_error_and_fails(tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text('schema_version = 1\nname = "mine"\n[base]\nstack = "cpu"\n', encoding="utf-8")
    code, out = cli("check", str(study))
    assert code == 2
    for key in ("key question", "key corpus", "key base.device", "key series", "key quality"):
        assert key in out, key
    assert "isocost run would not start" in out


def test_check_fails_on_missing_inputs(tmp_path: Path, study_text) -> None:
    study = tmp_path / "study.toml"
    study.write_text(study_text(), encoding="utf-8")
    code, out = cli("check", str(study))
    assert code == 2
    assert "FAIL  corpus path" in out and "relative to the study file" in out


def fake_campaign(root: Path) -> Path:
    root.mkdir()
    write_campaign_record(root, CampaignRecord(campaign_id="c", raw_schema_version=RAW_SCHEMA_VERSION))
    shutil.copyfile(default_catalog_path(), root / "catalog.csv")
    return root


def test_rental_is_appended_never_edited(tmp_path: Path) -> None:
    root = fake_campaign(tmp_path / "results")
    code, out = cli("rental", str(root), "--gpu", "RTX-4090", "--lots", "2", "--plan-start", "2026-12-01T09:00")
    assert code == 0, out
    first = (root / "rentals.jsonl").read_text(encoding="utf-8")
    code, out = cli("rental", str(root), "--gpu", "b200", "--lots", "1")
    assert code == 0, out
    lines = (root / "rentals.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines[0] + "\n" == first and len(lines) == 2
    a, b = (json.loads(line) for line in lines)
    assert (a["gpu"], a["lots"], a["plan_start"], a["schema_version"]) == ("rtx-4090", 2, "2026-12-01T09:00", 2)
    assert a["chain_sha256"] != b["chain_sha256"] and len(b["chain_sha256"]) == 64  # each line chained
    assert (b["gpu"], b["plan_start"]) == ("b200", None)
    assert not (root / "events.jsonl").exists()  # rentals never go to events.jsonl


def test_rental_refuses_an_unknown_gpu_and_a_non_campaign(tmp_path: Path) -> None:
    root = fake_campaign(tmp_path / "results")
    code, out = cli("rental", str(root), "--gpu", "rtx-9999")
    assert code == 2 and "Known GPUs:" in out
    (tmp_path / "empty").mkdir()
    code, out = cli("rental", str(tmp_path / "empty"), "--gpu", "rtx-4090")
    assert code == 2 and "campaign.json" in out


def test_check_fails_on_a_missing_catalog(tmp_path: Path, study_text) -> None:
    study = tmp_path / "study.toml"
    study.write_text(study_text() + '\n[costing]\ncatalog = "nope.csv"\n', encoding="utf-8")
    code, out = cli("check", str(study))
    assert code == 2
    assert "FAIL  catalog" in out


def test_check_asks_each_host(tmp_path: Path, study_text) -> None:
    study = tmp_path / "study.toml"
    study.write_text(study_text(), encoding="utf-8")
    code, out = cli("check", str(study), "--host", f"gone=unix://{tmp_path}/no-engine.sock")
    assert code == 2
    assert "FAIL  host gone" in out


def test_length_buckets_count_every_input() -> None:
    from runner.own.init import length_buckets

    lengths = [5] * 60 + [20] * 30 + [90] * 10
    buckets = length_buckets(lengths)
    assert buckets == [("short", 5, 60), ("medium", 20, 30), ("long", None, 10)]
    assert length_buckets([7, 7, 7]) == [("all", None, 3)]  # no spread: one open-ended bucket


def test_init_job_table_uncommented_is_a_valid_study(tmp_path: Path) -> None:
    """The [job] lines init writes commented out must load once uncommented: the mix shares sum to exactly 1."""
    from protocol.study.load import load_study

    corpus, tuning, model = corpus_and_model(tmp_path, {"0": "x", "1": "y"})
    study = tmp_path / "study.toml"
    code, out = cli("init", str(corpus), str(model), "--tuning", str(tuning), "--out", str(study))
    assert code == 0, out
    lines = study.read_text(encoding="utf-8").splitlines()
    start = lines.index(next(line for line in lines if line.startswith("# [job]")))
    job = [line[2:] for line in lines[start:] if line.startswith("# ")]
    assert any(line.startswith("mix = ") for line in job)
    (tmp_path / "job.toml").write_text("\n".join(lines[:start] + job) + "\n", encoding="utf-8")
    loaded = load_study(tmp_path / "job.toml")
    assert loaded.job is not None and loaded.job.mix is not None
    assert abs(sum(share for _, share in loaded.job.mix) - 1.0) < 1e-9
