"""The model and texts ``isocost selfcheck`` runs its trials on, built without any download.

The model is the one given (``--model``: a study's or the demo's checkpoint directory), else a small
randomly initialised BERT encoder built from a config, with a word-level tokenizer made from the
check's own vocabulary (seeded: the same weights every time), saved as an ordinary checkpoint
directory so the trials load it through the same code path as any other. The texts are the first
``--texts`` of the given corpus, else generated sentences of three lengths (short, medium, long); the
warm-up texts are generated apart from them, as a study's tuning split is.

Example::

    workload = prepare_workload(out, model_dir=None, corpus=None, texts=24, source="random")
    workload.model_dir   # out/random-model, a checkpoint AutoModelForSequenceClassification loads
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.corpus import read_corpus, token_lengths
from protocol.io.fingerprint import fingerprint_path

#: The generated texts' words: plain English, so any real tokenizer splits them too.
WORDS = ("the market rose after the bank said prices would fall while the team won its match and the film "
         "opened to strong reviews as new phones and chips were shown at a show where the minister spoke about "
         "tax health schools and the election").split()
LABELS = ("business", "sport", "tech")
#: Words per generated text, cycled: short, medium and long inputs (the demo's 60/30/10 mix, roughly).
LENGTHS = (6, 9, 12, 40, 7, 60, 10, 8, 150, 30)
RANDOM_SEED = 0


@dataclass(frozen=True)
class Workload:
    """What the selfcheck's trials run on."""

    source: str  # given | demo | random
    model_dir: Path
    corpus_path: Path  # the texts of the trials, written by the selfcheck (a prefix of the corpus given)
    warmup_texts: tuple[str, ...]
    description: str
    texts: int
    model_fingerprint: str
    corpus_fingerprint: str
    #: Tokens per text with the special tokens, untruncated (as the host's corpus_index.csv has them).
    token_counts: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "path": str(self.model_dir), "corpus": str(self.corpus_path),
                "description": self.description, "texts": self.texts, "fingerprint": self.model_fingerprint}


def generated_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(LENGTHS[i % len(LENGTHS)])) for i in range(count)]


def write_corpus(path: Path, corpus: Path | None, count: int) -> int:
    """The check's texts as a JSONL corpus: the first ``count`` of ``corpus``, else generated; returns how many."""
    if corpus is not None:
        rows = [{"id": r.id, "text": r.text, "label": r.label} for r in read_corpus(corpus)[:count]]
    else:
        rows = [{"id": f"s{i:04d}", "text": text, "label": LABELS[i % len(LABELS)]}
                for i, text in enumerate(generated_texts(count, RANDOM_SEED))]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return len(rows)


def build_random_encoder(out: Path, max_positions: int = 512, initializer_range: float = 0.2) -> str:
    """A small BERT classifier with random (seeded) weights and a word-level tokenizer, saved in ``out``.

    ``initializer_range`` 0.2 (ten times BERT's) spreads the labels over the texts, so the comparisons by id
    compare something; the price is many near-ties, which is why its agreement is reported, not judged. At
    0.05 every text gets the same label by a wide margin (what tests use when they need a stable answer)."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {word: i for i, word in enumerate(special + sorted(set(WORDS)))}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", model_max_length=max_positions)
    config = BertConfig(vocab_size=len(vocab), hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=1024, max_position_embeddings=max_positions,
                        initializer_range=initializer_range,
                        id2label=dict(enumerate(LABELS)),
                        label2id={label: i for i, label in enumerate(LABELS)})
    torch.manual_seed(RANDOM_SEED)
    model = BertForSequenceClassification(config)
    model.save_pretrained(str(out))
    fast.save_pretrained(str(out))
    parameters = sum(p.numel() for p in model.parameters())
    return (f"a randomly initialised BERT encoder built from a config (no download): 4 layers, hidden 256, "
            f"{parameters / 1e6:.1f}M parameters, seed {RANDOM_SEED}; its labels mean nothing, its numbers are real")


def stored_dtypes(model_dir: Path) -> list[str]:
    """The dtypes of the weights as stored (safetensors headers), e.g. ``['F16']`` for an fp16 copy."""
    found: set[str] = set()
    for path in sorted(model_dir.glob("*.safetensors")):
        try:
            with open(path, "rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                header = json.loads(handle.read(min(size, 64 * 2**20)))
        except (OSError, ValueError):
            continue
        found.update(str(v.get("dtype")) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict))
    return sorted(found)


def describe_checkpoint(model_dir: Path) -> str:
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"checkpoint directory (config.json unreadable: {exc})"
    arch = ", ".join(config.get("architectures") or []) or config.get("model_type", "?")
    stored = "/".join(stored_dtypes(model_dir)) or "no safetensors weights"
    return (f"{arch}, {config.get('num_hidden_layers', '?')} layers, hidden {config.get('hidden_size', '?')}, "
            f"weights stored as {stored}, cast by each trial to its precision")


def prepare_workload(out: Path, model_dir: Path | None, corpus: Path | None, texts: int, source: str) -> Workload:
    """The model (built when none is given) and the texts, under ``out``."""
    if model_dir is None:
        model_dir = out / "random-model"
        description = build_random_encoder(model_dir)
        source = "random"
    else:
        description = describe_checkpoint(model_dir)
    corpus_path = out / "selfcheck-corpus.jsonl"
    count = write_corpus(corpus_path, corpus, texts)
    warmup = tuple(generated_texts(8, RANDOM_SEED + 1))
    counts = token_lengths(model_dir, [r.text for r in read_corpus(corpus_path)])
    return Workload(source=source, model_dir=model_dir, corpus_path=corpus_path, warmup_texts=warmup,
                    description=description, texts=count, model_fingerprint=fingerprint_path(model_dir),
                    corpus_fingerprint=fingerprint_path(corpus_path), token_counts=tuple(counts))
