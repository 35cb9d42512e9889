"""A corpus and checkpoint isocost has never seen: made-up weather reports and a tiny BERT trained on them.

Nothing here comes from the demo: a word-level tokenizer is trained on the texts, a
2-layer BERT with hidden size 32 is trained for a few steps on made-up labels, and both
are saved with ``save_pretrained``, as a user's own checkpoint would be.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

LABELS = ("sunny", "rainy", "windy")
_WORDS = {
    "sunny": "sun bright clear warm blue dry",
    "rainy": "rain wet drizzle shower umbrella puddle",
    "windy": "wind gust breeze storm blowing gale",
}
_FILLER = "today the morning afternoon evening city coast valley expected later near over across".split()


def write_reports(path: Path, prefix: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            label = LABELS[i % len(LABELS)]
            words = [rng.choice(_WORDS[label].split()) for _ in range(2)]
            words += [rng.choice(_FILLER) for _ in range(rng.choice([3, 8, 30]))]
            rng.shuffle(words)
            handle.write(json.dumps({"id": f"{prefix}{i:04d}", "text": " ".join(words) + f" #{prefix}{i}",
                                     "label": label}) + "\n")


def build_own_model(out: Path, texts_path: Path) -> Path:
    """Train a tokenizer and a tiny classifier on ``texts_path``; save both to ``out``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    rows = [json.loads(line) for line in texts_path.read_text(encoding="utf-8").splitlines()]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([r["text"] for r in rows],
                            trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls),
                                                                                                 ("[SEP]", sep)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                        cls_token="[CLS]", sep_token="[SEP]", model_max_length=128)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=len(LABELS),
                        id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})
    model = BertForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    targets = torch.tensor([LABELS.index(r["label"]) for r in rows])
    batch = tokenizer([r["text"] for r in rows], padding=True, truncation=True, max_length=64, return_tensors="pt")
    model.train()
    for _ in range(30):
        optimizer.zero_grad()
        loss = model(**batch, labels=targets).loss
        loss.backward()
        optimizer.step()
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":  # python tests/ownmodel.py DIR: the data of README "Your own data"
    import sys

    root = Path(sys.argv[1])
    root.mkdir(parents=True, exist_ok=True)
    write_reports(root / "train.jsonl", "tr", 90, seed=0)
    write_reports(root / "reports.jsonl", "r", 24, seed=1)
    write_reports(root / "reports-tuning.jsonl", "t", 12, seed=2)
    build_own_model(root / "weather-model", root / "train.jsonl")
    (root / "train.jsonl").unlink()
