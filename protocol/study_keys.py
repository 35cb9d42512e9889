"""Every study key: required or its default, and what it means (one line each).

One table feeds ``isocost init`` (every key written with its default and this
comment), the README's study key table (a test keeps them equal) and
``isocost check``. Paths in a study resolve relative to the study file.

Example::

    KEYS["quality.minimum"].meaning  # "the quality minimum the final corpus must meet (set on the tuning split)"
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StudyKey:
    key: str  # dotted path; "[]" marks an array of tables
    default: str  # "required", or the default as TOML text / words
    meaning: str

    @property
    def required(self) -> bool:
        return self.default == "required"


_ROWS = (
    ("schema_version", "required", "study format version: 1"),
    ("name", "required", "short name: up to 100 letters, digits, '-', '_', '.', the first a letter or digit"),
    ("question", "required", "the decision question, in words, written before any test"),
    ("scenario", "required", '"offline" (corpus processing; interactive serving is out of scope)'),
    ("expected_artifacts", "1", "accepted corpora the job needs, declared before the campaign"),
    ("task", '"text-classification"', "what each input yields and how a pass is checked (docs/tasks.md)"),
    ("corpus.path", "required", "the final comparison corpus (.jsonl or .csv: id, text, label), relative to the study"),
    ("corpus.fingerprint", "required", "sha256 of the corpus file, as `isocost fingerprint` prints it"),
    ("tuning.path", "required", "separate tuning split (thresholds and warm-up come from it, never the final corpus)"),
    ("tuning.fingerprint", "required", "sha256 of the tuning file"),
    ("model.path", "required", "checkpoint directory (save_pretrained: config.json with id2label, tokenizer.json)"),
    ("model.fingerprint", "required", "sha256 of the checkpoint directory tree"),
    ("length_buckets[].name", "none: no buckets",
     "name of a length bucket (tokens of the model's tokenizer): a plain name like the series'"),
    ("length_buckets[].max_tokens", "open-ended", "inclusive upper bound in tokens; only the last bucket may omit it"),
    ("quality.metric", "required", '"accuracy" or "macro_f1" (averaged over the labels of the truth or the '
                                   'predictions, as scikit-learn\'s f1_score(average="macro"))'),
    ("quality.minimum", "required", "minimum of the metric on the final corpus, set on the tuning split "
                                    "(`isocost tune`)"),
    ("quality.tuned_on", "required", 'where the minimum was set: "tuning" (never "corpus")'),
    ("quality.reference_variant", "required", "variant id the others are compared with, e.g. \"precision=fp32\""),
    ("quality.max_metric_drop", "0.0", "largest metric drop against the reference still equivalent"),
    ("quality.min_agreement", "0.0", "smallest share of predictions equal to the reference's"),
    ("quality.subgroups", "[]", 'subgroups evaluated too: "label", "length_bucket"'),
    ("quality.replay", '"identical"', 'what replay means: "identical", "bounded" (scores) or "quality"'),
    ("quality.max_score_delta", "none", 'largest score difference; required with replay = "bounded"'),
    ("warmup.source", '"tuning"', "warm-up inputs come from the tuning split"),
    ("warmup.inputs", "8", "warm-up inputs per trial (at most the tuning split's size)"),
    ("warmup.runs", "1", "warm-up runs over those inputs before the measured pass"),
    ("warmup.recompilation", '"warmup"', "recompilation happens inside the warm-up"),
    ("campaign.repetitions", "5", "full passes per variant"),
    ("campaign.order", '"rotate"', "rotated order, so no variant always runs first"),
    ("campaign.trial_timeout_s", "none (no limit)", "a trial running longer is killed and kept as a timeout row"),
    ("campaign.seeds", "[]", "common seeds: every variant runs under each, results kept apart"),
    ("campaign.memory_limit_bytes", "none", "container memory limit (docker launcher)"),
    ("base.stack", "required", '"cpu", "cuda" or "rocm"'),
    ("base.device", "required", '"cpu" (cpu stack) or "cuda" (cuda and rocm stacks)'),
    ("base.precision", "required", '"fp32", "bf16" or "fp16" (GPU only)'),
    ("base.quantization", "required", '"none" or "int8-dynamic" (CPU only)'),
    ("base.compile", "required", "torch.compile the model: true or false"),
    ("base.attention", "required", '"sdpa" or "eager"'),
    ("base.batch_size", "required", "inputs per forward pass"),
    ("base.padding", "required", '"longest" (per batch) or "max_length"'),
    ("base.max_length", "required", "tokens per input; longer inputs are truncated and counted"),
    ("base.length_grouping", "required", '"none" or "sort" (batches of similar length)'),
    ("base.resume", "required", '"none" or "halve-batch-on-oom"'),
    ("base.threads", "required", "torch CPU threads"),
    ("base.seed", "required", "random seed"),
    ("base.deterministic", "required", "torch deterministic algorithms: true or false"),
    ("series[].name", "required",
     "name of a series (at least one): up to 64 letters, digits, '_', '.', '-', the first a letter or digit"),
    ("series[].field", "required", "the ONE variant field this series varies"),
    ("series[].values", "required", "the values it takes; each makes a variant"),
    ("deadline.start", "required in [deadline]", "access window start, local time"),
    ("deadline.end", "required in [deadline]", "access window end, local time"),
    ("deadline.tz", "required in [deadline]", "IANA time zone of start and end"),
    ("deadline.waiting_h", "0", "declared waiting the rental must be held for (at most 87840 h, ten years)"),
    ("costing.catalog", "the shipped dated snapshot", "your dated plan catalog CSV"),
    ("images.cpu / images.cuda / images.rocm", "none: images/images.lock", "REPO@sha256:… to run for that stack"),
    # sentence-embedding (docs/tasks.md): the [embedding] table and the [quality] key of that task only; its
    # quality.metric is "ndcg@10", "mrr@10" or "recall@10" over the queries
    ("embedding.pooling", "required", '"mean" (over the attention mask) or "cls" (the first token\'s state)'),
    ("embedding.normalize", "required", "L2-normalise every vector in the trial: true or false"),
    ("embedding.dimension", "required", "values per vector: the model's hidden size (config.json hidden_size)"),
    ("embedding.queries.path", "required",
     "the final query set: JSONL id, text, relevant (ids of final corpus inputs), kept apart from the tuning split"),
    ("embedding.queries.fingerprint", "required", "sha256 of the query file"),
    ("embedding.tuning_queries.path", "required",
     "the tuning split's queries (relevant ids are tuning inputs): `isocost tune` measures the metric on them"),
    ("embedding.tuning_queries.fingerprint", "required", "sha256 of the tuning query file"),
    ("quality.min_cosine", "0.999", "cosine to the reference variant's vector an input needs to agree, in (0, 1]"),
    # text-generation (docs/tasks.md#text-generation)
    ("generation.template", "required in [generation]",
     "the prompt around each input: text with {text} where the input goes (no other placeholder is read)"),
    ("generation.chat_template", "false", "true: the templated text is the user's turn in the model's chat template"),
    ("generation.max_new_tokens", "required in [generation]",
     "tokens generated at most per input (greedy, stops at the end-of-sequence token)"),
    ("generation.top_k", "5", "candidates (token ids and log-probabilities) kept per generated position"),
    ("generation.decoding", '"greedy"', '"greedy" only: sampling is refused (it needs seeds and a metric-only rule)'),
    ("quality.min_score_share", "0.99", "text-generation: median score at least this share of the reference "
                                        "variant's (MLPerf's 99 %)"),
    ("quality.length_window", "[0.9, 1.1]", "text-generation: mean generated length against the reference "
                                            "variant's, per pass"),
    ("quality.min_identical", "0.0", "text-generation: smallest share of ids with token sequences identical to the "
                                     "reference's (min_agreement applies to identical-or-near-tie)"),
    ("quality.normalisation", '"whitespace"', 'text-generation exact_match: "none", "whitespace" or "casefold"'),
)

KEYS: dict[str, StudyKey] = {key: StudyKey(key, default, meaning) for key, default, meaning in _ROWS}

#: Keys (or key prefixes ending in ".") that only the studies of one task have; every other key is every task's.
TASK_KEYS: dict[str, tuple[str, ...]] = {
    "sentence-embedding": ("embedding.", "quality.min_cosine"),
    "text-generation": ("generation.", "quality.min_score_share", "quality.length_window", "quality.min_identical",
                        "quality.normalisation"),
}


def keys_for(task: str) -> dict[str, StudyKey]:
    """The keys a study of ``task`` has (what ``isocost init --task`` writes): every task's, and its own."""
    others = [prefix for name, prefixes in TASK_KEYS.items() if name != task for prefix in prefixes]
    return {key: entry for key, entry in KEYS.items()
            if not any(key == p or (p.endswith(".") and key.startswith(p)) for p in others)}


def markdown_table() -> str:
    """The README's study key table."""
    lines = ["| key | required / default | meaning |", "|---|---|---|"]
    lines += [f"| `{k.key}` | {k.default} | {k.meaning} |" for k in KEYS.values()]
    return "\n".join(lines)
