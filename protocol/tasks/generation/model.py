"""Whether a checkpoint directory can run a text-generation study, from its files alone (no torch).

Checked by ``isocost init``, ``isocost check``, ``isocost tune`` and at campaign start: ``config.json`` names a
causal language model (an architecture ``…ForCausalLM``); the tokenizer is saved (``tokenizer.json``); a
``generation_config.json`` is there (its end-of-sequence token is where generation stops); a chat template is
saved when the study declares ``chat_template = true``; and the context (``max_position_embeddings``) holds the
longest prompt (``base.max_length`` and every value a series gives it) plus ``max_new_tokens``.

Example::

    check_generation_model(Path("smollm2"), study, "study.toml")   # () or raises UserError
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.hardware.memory import read_model_config
from protocol.io.jsonio import loads_unique
from protocol.io.safe_read import read_text

#: config.json keys that hold a model's context length, in the order they are looked for.
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
MAX_SMALL_FILE_BYTES = 16 * 2**20


def model_context(config: dict[str, Any]) -> int | None:
    """The longest sequence (prompt + generated tokens) the model's positions cover, or None if it does not say."""
    for key in CONTEXT_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _has_chat_template(model_dir: Path) -> bool:
    if (model_dir / "chat_template.jinja").is_file() or (model_dir / "chat_template.json").is_file():
        return True
    path = model_dir / "tokenizer_config.json"
    if not path.is_file():
        return False
    try:
        config = loads_unique(read_text(path, "the model's tokenizer_config.json", max_bytes=MAX_SMALL_FILE_BYTES))
    except (UserError, ValueError, RecursionError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def _longest_prompt(study: Any) -> tuple[int, str]:
    """The largest max_length any variant runs with, and the key that sets it."""
    longest, key = int(study.base["max_length"]), "base.max_length"
    for series in study.series:
        if series.field == "max_length" and max(series.values) > longest:
            longest, key = int(max(series.values)), f"series {series.name!r}, values"
    return longest, key


def check_generation_model(model_dir: Path, study: Any, where: str) -> tuple[str, ...]:
    """Raise UserError naming the file or key to fix; returns warnings (none so far)."""
    model_dir = Path(model_dir)
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise UserError("the model directory has no config.json", str(model_dir),
                        "Save the checkpoint with model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR).")
    config = read_model_config(model_dir)
    architectures = [str(a) for a in config.get("architectures") or []]
    if not any(a.endswith("ForCausalLM") for a in architectures):
        raise UserError(f"config.json names {architectures or 'no architecture'}, not a causal language model",
                        str(config_path), "Point [model] at an AutoModelForCausalLM checkpoint (architectures "
                        "ending in ForCausalLM), or use the task that fits this model.")
    if not (model_dir / "tokenizer.json").is_file():
        raise UserError("the model directory has no tokenizer (tokenizer.json)", str(model_dir),
                        "Save the fast tokenizer with the checkpoint: tokenizer.save_pretrained(DIR).")
    if not (model_dir / "generation_config.json").is_file():
        raise UserError("the model directory has no generation_config.json", str(model_dir),
                        "Save it with the checkpoint (model.generation_config.save_pretrained(DIR)): it names the "
                        "end-of-sequence token where generation stops.")
    if study.base.get("compile") or any(s.field == "compile" and True in s.values for s in study.series):
        raise UserError("torch.compile is not supported for text-generation", f"{where}, key base.compile",
                        "Set compile = false (and drop a series over compile): generate() would run the "
                        "uncompiled forward and the measurement would not be of a compiled model.")
    options = study.task_options
    if options.get("chat_template") and not _has_chat_template(model_dir):
        raise UserError("the study declares chat_template = true and the model has no chat template",
                        f"{where}, key generation.chat_template",
                        "Save the tokenizer with its chat template, or set chat_template = false and write the "
                        "whole prompt in the template.")
    context = model_context(config)
    if context is None:
        return ("config.json gives no context length (max_position_embeddings): prompts and generations are "
                "not checked against it",)
    max_new = int(options["max_new_tokens"])
    if max_new >= context:
        raise UserError(f"max_new_tokens {max_new} is beyond the model's context of {context} tokens",
                        f"{where}, key generation.max_new_tokens", f"Use fewer than {context} new tokens.")
    longest, key = _longest_prompt(study)
    if longest + max_new > context:
        raise UserError(f"max_length {longest} + max_new_tokens {max_new} exceeds the model's context of {context} "
                        "tokens", f"{where}, key {key}",
                        f"Keep max_length + max_new_tokens ≤ {context}; longer prompts are truncated and counted.")
    return ()
