"""Text generation in the trial: an ``AutoModelForCausalLM`` checkpoint, greedy continuations of templated prompts.

:class:`Generator` loads the checkpoint under the variant's settings, makes each input's prompt from the study's
template (``{text}`` replaced by the input, by plain replacement: no other brace is read; inside the model's chat
template when declared), truncates the input (never the template) when the prompt would be longer than
``max_length``, and runs one batch with ``model.generate``: greedy, at most ``max_new_tokens``, stopping at the
end-of-sequence token, left padding, the KV cache on. A logits processor appended after the model's own keeps
the ``top_k`` log-probabilities of every step (on the device, copied once per batch) and the time of the first
step (the prefill). Outputs go one line per input into ``generations.jsonl`` (flushed per batch). The host side
of the task is ``protocol.tasks.generation``.

Example::

    generator = Generator.load(Path("smollm2"), variant, torch, {"template": "{text}", "max_new_tokens": 8,
                                                                 "top_k": 5, "chat_template": False})
    generator.predict(["The headline of this story is"])[0]["text"]
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.records.stages import Variant
from runner.trial.measure import clock
from runner.trial.model import describe_common, prepare_model
from runner.trial.tasks.base import PassFile, TaskModel, TrialTask

OUTPUT_FILE = "generations.jsonl"
PLACEHOLDER = "{text}"
#: Attempts at cutting an input's text so that its templated prompt fits max_length, before cutting the prompt.
FIT_ATTEMPTS = 8
LOGPROB_DIGITS = 6


class _StepRecorder:
    """A logits processor that changes nothing: it keeps each step's top-k and the time of the first step, and
    calls ``on_first_token`` (a serving run's hook: every row of the batch has its first token's scores) then."""

    def __init__(self, torch: Any, top_k: int, sync: Any, on_first_token: Callable[[], None] | None = None) -> None:
        self.torch, self.top_k, self.sync, self.on_first_token = torch, top_k, sync, on_first_token
        self.values: list[Any] = []
        self.indices: list[Any] = []
        self.first_step_at: float | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.first_step_at is None:
            self.sync()
            self.first_step_at = clock()
            if self.on_first_token is not None:
                self.on_first_token()
        top = self.torch.log_softmax(scores, dim=-1).topk(min(self.top_k, scores.shape[-1]), dim=-1)
        self.values.append(top.values)
        self.indices.append(top.indices)
        return scores


def load_tokenizer(path: Path) -> tuple[Any, Any, tuple[int, ...], int]:
    """The checkpoint's tokenizer (left padding, a pad token), its generation config, end-of-sequence ids and pad
    id: what every engine of the task reads the same way (the prompts and the end of a row are isocost's)."""
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    tokenizer.padding_side = "left"
    config = GenerationConfig.from_pretrained(str(path), local_files_only=True)
    eos = config.eos_token_id if config.eos_token_id is not None else tokenizer.eos_token_id
    eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else (int(eos),)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else config.pad_token_id
    if pad is None:
        pad = eos_ids[0]
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token_id = pad
    return tokenizer, config, eos_ids, int(pad)


class GenerationText:
    """The prompts and the rows of a generation, whatever engine generates: every engine's model inherits them, so
    each tokenizes its inputs and writes its rows exactly as :class:`Generator` does."""

    tokenizer: Any
    variant: Variant
    options: dict[str, Any]
    eos_ids: tuple[int, ...]
    figures: dict[str, float]

    # -- prompts ----------------------------------------------------------------------------------------------------

    def prompt(self, text: str) -> str:
        """The input inside the template (and the chat template, when declared)."""
        filled = self.options["template"].replace(PLACEHOLDER, text)
        if not self.options.get("chat_template"):
            return filled
        return self.tokenizer.apply_chat_template([{"role": "user", "content": filled}], tokenize=False,
                                                  add_generation_prompt=True)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(self.prompt(text), add_special_tokens=not self.options.get("chat_template"))
                    ["input_ids"])

    def _fitted(self, text: str) -> list[int]:
        """The prompt's ids, the input's text cut at its end until the prompt fits max_length."""
        limit = self.variant.max_length
        ids = self._encode(text)
        if len(ids) <= limit:
            return ids  # the usual input: one tokenisation, as a hand-written loop does
        words = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        for _ in range(FIT_ATTEMPTS):
            if len(ids) <= limit or not words:
                break
            words = words[: max(len(words) - (len(ids) - limit), 0)]
            ids = self._encode(self.tokenizer.decode(words))
        return ids if len(ids) <= limit else ids[-limit:]  # the template alone is too long: keep its end

    def tokenize(self, texts: list[str]) -> list[dict[str, list[int]]]:
        """Prompt ids per text, fitted to ``max_length``, not padded yet."""
        return [{"input_ids": ids, "attention_mask": [1] * len(ids)} for ids in map(self._fitted, texts)]

    def untruncated_lengths(self, texts: list[str]) -> list[int]:
        return [len(self._encode(text)) for text in texts]

    def _row(self, tokens: list[int], top_ids: list[list[int]], top_logprobs: list[list[float]]) -> dict[str, Any]:
        """One row's generation: cut after its first end-of-sequence token (padding never counted)."""
        end = next((i + 1 for i, token in enumerate(tokens) if token in self.eos_ids), len(tokens))
        kept = tokens[:end]
        return {"tokens": kept, "text": self.tokenizer.decode(kept, skip_special_tokens=True), "n_tokens": len(kept),
                "top_ids": top_ids[:end],
                "top_logprobs": [[round(v, LOGPROB_DIGITS) for v in row] for row in top_logprobs[:end]]}

    def _count(self, prefill_s: float, decode_s: float, generated: int, steps: int) -> None:
        for key, value in (("prefill_s", prefill_s), ("decode_s", decode_s), ("generated_tokens", generated),
                           ("decode_steps", steps)):
            self.figures[key] = self.figures.get(key, 0) + value

    def take_batch_figures(self) -> dict[str, float]:
        """Prefill and decode seconds, generated tokens and decode steps since the last call (for batches.jsonl)."""
        figures, self.figures = self.figures, {}
        return figures


@dataclass
class Generator(GenerationText, TaskModel):
    """A tokenizer + ``AutoModelForCausalLM`` under one variant's settings and the study's [generation] table."""

    tokenizer: Any
    model: Any
    variant: Variant
    torch: Any
    device: Any
    options: dict[str, Any]
    generation_config: Any
    eos_ids: tuple[int, ...]
    vocab_size: int
    #: CUDA events around each generate call (device time of the batch's generation), as the classifier keeps.
    forward_events: list[tuple[Any, Any]] | None = None
    #: Prefill and decode seconds, generated tokens and decode steps since :meth:`take_batch_figures`.
    figures: dict[str, float] = field(default_factory=dict)
    #: A serving run's first-token hook (``runner.trial.serving.sut``), called once per batch at its first step
    #: (greedy decoding picks every row's first token from those scores). None offline.
    on_first_token: Callable[[], None] | None = None
    reports_first_token = True  # it calls on_first_token (TaskModel)

    @classmethod
    def load(cls, path: Path, variant: Variant, torch: Any, options: dict[str, Any]) -> Generator:
        from transformers import AutoModelForCausalLM

        if variant.compile:
            raise ValueError("torch.compile is not supported for text-generation; the study should have refused it")
        tokenizer, config, eos_ids, pad = load_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True,
                                                     attn_implementation=variant.attention)
        config.update(do_sample=False, num_beams=1, max_new_tokens=int(options["max_new_tokens"]), use_cache=True,
                      eos_token_id=list(eos_ids), pad_token_id=pad, temperature=None, top_p=None, top_k=None)
        config.max_length = None
        model, device = prepare_model(model, variant, torch)
        vocab = int(model.get_output_embeddings().weight.shape[0])
        return cls(tokenizer=tokenizer, model=model, variant=variant, torch=torch, device=device,
                   options=dict(options), generation_config=config, eos_ids=eos_ids, vocab_size=vocab)

    # -- generation ---------------------------------------------------------------------------------------------------

    def _sync(self) -> None:
        if self.variant.device == "cuda":
            self.torch.cuda.synchronize()

    def predict_encoded(self, features: list[dict[str, list[int]]]) -> list[dict[str, Any]]:
        """Left-pad one batch, generate greedily, bring every row's tokens, text and top-k to the host."""
        torch = self.torch
        from transformers import LogitsProcessorList

        padding = "longest" if self.variant.padding == "longest" else "max_length"
        batch = self.tokenizer.pad(features, padding=padding, max_length=self.variant.max_length, return_tensors="pt")
        batch = {key: value.to(self.device) for key, value in batch.items()}
        recorder = _StepRecorder(torch, int(self.options["top_k"]), self._sync, self.on_first_token)
        start = clock()
        with torch.inference_mode():
            events = self._start_events()
            sequences = self.model.generate(**batch, generation_config=self.generation_config,
                                            logits_processor=LogitsProcessorList([recorder]))
            self._stop_events(events)
            new = sequences[:, batch["input_ids"].shape[1]:].tolist()
            values = torch.stack(recorder.values, dim=1).tolist() if recorder.values else [[] for _ in new]
            indices = torch.stack(recorder.indices, dim=1).tolist() if recorder.indices else [[] for _ in new]
        outputs = [self._row(tokens, ids, logprobs) for tokens, ids, logprobs in zip(new, indices, values, strict=True)]
        first = recorder.first_step_at if recorder.first_step_at is not None else clock()
        self._count(first - start, clock() - first, sum(o["n_tokens"] for o in outputs), len(recorder.values))
        return outputs

    def _start_events(self) -> Any:
        if self.forward_events is None:
            return None
        start, stop = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        return start, stop

    def _stop_events(self, events: Any) -> None:
        if events is not None and self.forward_events is not None:
            events[1].record()
            self.forward_events.append(events)

    def probe_encoded(self, features: list[dict[str, list[int]]]) -> list[dict[str, Any]]:
        """One batch generating a single token (the prefill's forward): what the attention probe profiles."""
        config = self.generation_config
        full, config.max_new_tokens = config.max_new_tokens, 1
        try:
            return self.predict_encoded(features)
        finally:
            config.max_new_tokens = full
            self.take_batch_figures()

    def describe(self) -> dict[str, Any]:
        described = describe_common(self.model, self.tokenizer, self.variant)
        config = self.model.config
        return {**described, "vocab_size": self.vocab_size, "eos_token_ids": list(self.eos_ids),
                "pad_token_id": self.generation_config.pad_token_id,
                "context": getattr(config, "max_position_embeddings", None),
                "template_sha256": hashlib.sha256(self.options["template"].encode("utf-8")).hexdigest(),
                "chat_template": bool(self.options.get("chat_template")), "decoding": "greedy",
                "max_new_tokens": int(self.options["max_new_tokens"]), "top_k": int(self.options["top_k"]),
                "padding_side": "left", "kv_cache": True}


class GenerationTrial(TrialTask):
    """The text-generation task as the trial runs it (``runner.trial.tasks``)."""

    name = "text-generation"
    pass_files = (PassFile(OUTPUT_FILE),)

    def load(self, path: Path, variant: Variant, torch: Any, options: dict[str, Any]) -> Generator:
        return Generator.load(path, variant, torch, options)

    def lines(self, ids: Sequence[str], outputs: list[dict[str, Any]]) -> str:
        return "".join(json.dumps({"id": ident, **output}, ensure_ascii=False) + "\n"
                       for ident, output in zip(ids, outputs, strict=True))

    def token_counts(self, outputs: list[dict[str, Any]]) -> list[int]:
        """Each answer's generated tokens (a serving run's time per output token)."""
        return [int(output["n_tokens"]) for output in outputs]

    def perturb(self, ids: Sequence[str], outputs: list[dict[str, Any]], model: Any,
                picked: set[str]) -> list[dict[str, Any]]:
        """Test fault ``disagree:SHARE``: each picked id's first token becomes one outside that position's top-k
        (a divergence that is no near tie), its text decoded again."""
        changed = []
        for ident, output in zip(ids, outputs, strict=True):
            if ident in picked and output["tokens"]:
                top = set(output["top_ids"][0]) if output["top_ids"] else set()
                other = next(token for token in range(model.vocab_size) if token not in top)
                tokens = [other, *output["tokens"][1:]]
                output = {**output, "tokens": tokens, "text": model.tokenizer.decode(tokens, skip_special_tokens=True)}
            changed.append(output)
        return changed


TRIAL_TASK = GenerationTrial()
