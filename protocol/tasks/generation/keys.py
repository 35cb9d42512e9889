"""The text-generation task's own study keys: the ``[generation]`` table and its ``[quality]`` keys
(docs/tasks.md#text-generation).

Example::

    STUDY_KEYS[0].key      # "generation.template"
"""

from __future__ import annotations

from protocol.study.keys import Bounds, key_rows

STUDY_KEYS = key_rows(
    ("generation.template", "string", "required in [generation]", None,
     "the prompt around each input: text with {text} where the input goes (no other placeholder is read)"),
    ("generation.chat_template", "boolean", "false", None,
     "true: the templated text is the user's turn in the model's chat template"),
    ("generation.max_new_tokens", "integer", "required in [generation]", Bounds(1, 32_768),
     "tokens generated at most per input (greedy, stops at the end-of-sequence token)"),
    ("generation.top_k", "integer", "5", Bounds(1, 100),
     "candidates (token ids and log-probabilities) kept per generated position"),
    ("generation.decoding", "string", '"greedy"', None,
     '"greedy" only: sampling is refused (it needs seeds and a metric-only rule)'),
    ("quality.min_score_share", "number", "0.99", Bounds(0, 1),
     "text-generation: median score at least this share of the reference variant's (MLPerf's 99 %)"),
    ("quality.length_window", "array", "[0.9, 1.1]", None,
     "text-generation: mean generated length against the reference variant's, per pass: [low, high], "
     "0 < low ≤ 1 ≤ high ≤ 100"),
    ("quality.min_identical", "number", "0.0", Bounds(0, 1),
     "text-generation: smallest share of ids with token sequences identical to the reference's "
     "(min_agreement applies to identical-or-near-tie)"),
    ("quality.normalisation", "string", '"whitespace"', None,
     'text-generation exact_match: "none", "whitespace" or "casefold"'),
)
