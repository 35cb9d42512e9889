"""``isocost init --task text-generation`` and ``isocost check`` on a generation study, without a model run."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from click.testing import CliRunner

from protocol.tasks import task_named
from runner.cli import main


def causal_checkpoint(path: Path, texts: list[str], context: int = 256, chat: bool = True) -> Path:
    """config.json of a causal LM, generation_config.json, a chat template, a real tokenizer.json (no weights)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    path.mkdir()
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]"]))
    tok.save(str(path / "tokenizer.json"))
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                  "max_position_embeddings": context}))
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": 0}))
    if chat:
        (path / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    return path


def workspace(tmp_path: Path, context: int = 256) -> tuple[Path, Path]:
    rows = [{"id": f"s{i}", "text": f"story number {i} about the town council and its plans",
             "reference": f"council plan {i}"} for i in range(30)]
    corpus = tmp_path / "stories.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return corpus, causal_checkpoint(tmp_path / "lm", [r["text"] for r in rows], context)


def test_init_writes_a_generation_study_that_check_reads(tmp_path: Path) -> None:
    corpus, model = workspace(tmp_path)
    out = tmp_path / "study.toml"
    result = CliRunner().invoke(main, ["init", str(corpus), str(model), "--task", "text-generation", "--template",
                                       "Headline: {text}", "--max-new-tokens", "12", "--score", "chrf",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "text-generation: template 'Headline: {text}', max_new_tokens 12, score chrf" in result.output
    text = out.read_text()
    own = [entry.key for entry in task_named("text-generation").study_keys]
    assert len(own) == 9
    for key in own:
        assert f"{key.split('.')[-1]} = " in text, key
    data = tomllib.loads(text)
    assert data["task"] == "text-generation"
    assert data["generation"] == {"template": "Headline: {text}", "chat_template": True, "max_new_tokens": 12,
                                  "top_k": 5, "decoding": "greedy"}
    assert data["quality"]["metric"] == "chrf" and data["quality"]["subgroups"] == ["length_bucket"]
    assert data["base"]["max_length"] + 12 <= 256
    tuning = [json.loads(line) for line in (tmp_path / "stories.tuning.jsonl").read_text().splitlines()]
    assert tuning and all(set(row) == {"id", "text", "reference"} for row in tuning)
    checked = CliRunner().invoke(main, ["check", str(out)])
    assert "the checkpoint can run task text-generation" in checked.output, checked.output


def test_init_refuses_what_cannot_generate(tmp_path: Path) -> None:
    corpus, model = workspace(tmp_path, context=16)
    no_placeholder = CliRunner().invoke(main, ["init", str(corpus), str(model), "--task", "text-generation",
                                               "--template", "Headline:", "--out", str(tmp_path / "a.toml")])
    assert no_placeholder.exit_code != 0 and "has no {text} placeholder" in no_placeholder.output
    too_long = CliRunner().invoke(main, ["init", str(corpus), str(model), "--task", "text-generation",
                                         "--max-new-tokens", "16", "--out", str(tmp_path / "b.toml")])
    assert too_long.exit_code != 0 and "leaves no room for a prompt" in too_long.output
    unlabelled = CliRunner().invoke(main, ["init", str(corpus), str(model), "--out", str(tmp_path / "c.toml")])
    assert unlabelled.exit_code != 0 and "missing field 'label'" in unlabelled.output
