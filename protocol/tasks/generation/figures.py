"""What a generation pass yields per second: derived from its ``batches.jsonl`` and ``pass_s``, never measured twice.

Each batch line of a text-generation pass carries ``prefill_s`` (from the start of ``generate`` to its first
step: the prompt's forward, the time to the first token of every input of the batch), ``decode_s`` (the other
steps), ``generated_tokens`` and ``decode_steps``. Per pass:

- ``generated_tokens``: the sum over the batches (equal to the tokens counted in ``generations.jsonl``);
- ``output_tokens_per_s``: generated tokens ÷ ``pass_s`` (the whole measured pass: tokenisation, prefill,
  decoding, materialising the outputs);
- ``median_ttft_s``, ``max_ttft_s``: time to first token per batch (its ``prefill_s``), median and largest;
- ``time_per_output_token_s``: Σ decode_s ÷ Σ (decode_steps − 1): seconds per decoding step after the first
  token (a step yields one token for every input still generating).

Example::

    pass_figures([{"prefill_s": 0.2, "decode_s": 0.6, "generated_tokens": 8, "decode_steps": 4}], pass_s=1.0)
    # {"generated_tokens": 8, "output_tokens_per_s": 8.0, "median_ttft_s": 0.2, …, "time_per_output_token_s": 0.2}
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol.io.jsonio import loads_unique

FIGURES = ("generated_tokens", "output_tokens_per_s", "median_ttft_s", "max_ttft_s", "time_per_output_token_s")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def pass_figures(batches: Sequence[dict[str, Any]], pass_s: float | None) -> dict[str, Any]:
    """The per-pass figures of the module docstring (each None when a batch lacks what it needs)."""
    prefill = [_number(b.get("prefill_s")) for b in batches]
    decode = [_number(b.get("decode_s")) for b in batches]
    tokens = [_number(b.get("generated_tokens")) for b in batches]
    steps = [_number(b.get("decode_steps")) for b in batches]
    complete = bool(batches) and None not in (*prefill, *decode, *tokens, *steps)
    if not complete:
        return dict.fromkeys(FIGURES)
    generated = int(sum(t for t in tokens if t is not None))
    after_first = sum(max(s - 1, 0) for s in steps if s is not None)
    ttft = [p for p in prefill if p is not None]
    return {
        "generated_tokens": generated,
        "output_tokens_per_s": generated / pass_s if pass_s else None,
        "median_ttft_s": statistics.median(ttft),
        "max_ttft_s": max(ttft),
        "time_per_output_token_s": sum(d for d in decode if d is not None) / after_first if after_first else None,
    }


def read_pass_figures(trial_dir: Path, pass_s: float | None) -> dict[str, Any]:
    """:func:`pass_figures` of a trial directory's ``batches.jsonl`` (all None when it is missing or malformed)."""
    try:
        lines = (trial_dir / "batches.jsonl").read_text(encoding="utf-8").splitlines()
        batches = [loads_unique(line) for line in lines if line.strip()]
    except (OSError, ValueError, RecursionError):
        return dict.fromkeys(FIGURES)
    if not all(isinstance(b, dict) for b in batches):
        return dict.fromkeys(FIGURES)
    return pass_figures(batches, pass_s)
