"""Engine vllm's trial half without vLLM: its output mapping (log-probabilities by rank, the chosen token beyond the
top k dropped, the end-of-sequence cut), its batch loop on a fake engine, its refusals, and the stop of leftover
processes. The real engine against transformers: tests/e2e/test_vllm_engine.py."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from recordfiles import SAMPLE_VARIANT

from protocol.engines.vllm.trial.engine import (
    DEFAULTS,
    TRIAL_ENGINE,
    VllmGenerator,
    completion_columns,
    resolved_settings,
    top_k_by_rank,
)
from protocol.tasks.generation.trial import GenerationTrial, Generator
from runner.trial.engines.base import EngineRefused, settings_differences
from runner.trial.tasks.base import TrialTask

EOS = 2
OPTIONS = {"template": "{text}", "chat_template": False, "max_new_tokens": 4, "top_k": 2}


def lp(logprob: float, rank: int | None) -> Any:
    return SimpleNamespace(logprob=logprob, rank=rank, decoded_token=None)


class FakeTokenizer:
    """Words are token ids: ``"7 8"`` is [7, 8]; decoding drops the end-of-sequence token as a special one."""

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": [int(word) for word in text.split()]}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return " ".join(str(i) for i in ids if not (skip_special_tokens and i == EOS))


def test_top_k_is_taken_by_rank_and_the_chosen_token_beyond_it_is_dropped() -> None:
    # vLLM's dict for one position: the top 2 plus the chosen token (rank 5), in no particular order.
    position = {40: lp(-3.5, 5), 11: lp(-0.25, 1), 12: lp(-1.75, 2)}
    assert top_k_by_rank(position, 2) == ([11, 12], [-0.25, -1.75])
    assert top_k_by_rank({9: lp(-0.5, 1)}, 2) == ([9], [-0.5])


def test_completion_columns_and_the_rows_equal_the_transformers_generators() -> None:
    completion = SimpleNamespace(token_ids=[5, EOS, 7], logprobs=[
        {5: lp(-0.1234567, 1), 6: lp(-2.5, 2)},
        {EOS: lp(-0.5, 1), 9: lp(-1.0, 2), 4: lp(-6.0, 7)},
        {7: lp(-0.3, 1), 8: lp(-0.9, 2)},
    ])
    tokens, top_ids, top_logprobs = completion_columns(completion, 2)
    assert tokens == [5, EOS, 7] and top_ids == [[5, 6], [EOS, 9], [7, 8]]
    text_side = dict(tokenizer=FakeTokenizer(), variant=SAMPLE_VARIANT, options=OPTIONS, eos_ids=(EOS,))
    ours = _generator(**text_side)._row(tokens, top_ids, top_logprobs)
    theirs = Generator(model=None, torch=None, device="cpu", generation_config=None, vocab_size=50,
                       **text_side)._row(tokens, top_ids, top_logprobs)
    assert ours == theirs == {"tokens": [5, EOS], "text": "5", "n_tokens": 2, "top_ids": [[5, 6], [EOS, 9]],
                              "top_logprobs": [[-0.123457, -2.5], [-0.5, -1.0]]}


def test_logprobs_missing_for_a_token_is_an_error_not_a_short_row() -> None:
    with pytest.raises(RuntimeError, match="1 of 2 generated tokens"):
        completion_columns(SimpleNamespace(token_ids=[5, 6], logprobs=[{5: lp(-0.1, 1)}]), 2)


@dataclass
class Kind(Enum):
    """vLLM's ``RequestOutputKind``."""

    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


@dataclass
class FakeEngine:
    """Steps like vLLM's LLMEngine: every request's first token at the first step (seen only with cumulative
    outputs), every request finished at the second step, out of order."""

    pending: list[Any] = field(default_factory=list)
    seen: list[Any] = field(default_factory=list)
    steps: int = 0

    def add_request(self, request_id: str, prompt: dict[str, list[int]], params: Any) -> str:
        self.seen.append((prompt, params.max_tokens, params.output_kind))
        ids = prompt["prompt_token_ids"]
        tokens = [ids[-1] + 1, EOS] if params.max_tokens > 1 else [ids[-1] + 1]
        logprobs = [{token: lp(-0.5, 1), 1: lp(-1.5, 2)} for token in tokens]
        self.pending.append((request_id, params.output_kind, tokens, logprobs))
        return request_id

    def has_unfinished_requests(self) -> bool:
        return bool(self.pending)

    def step(self) -> list[Any]:
        self.steps += 1
        if self.steps % 2:
            return [SimpleNamespace(request_id=ident, finished=False, outputs=[SimpleNamespace(
                token_ids=tokens[:1], logprobs=logprobs[:1])]) for ident, kind, tokens, logprobs in self.pending
                if kind == Kind.CUMULATIVE]
        done, self.pending = list(reversed(self.pending)), []
        return [SimpleNamespace(request_id=ident, finished=True, outputs=[SimpleNamespace(
            token_ids=tokens, logprobs=logprobs)]) for ident, _, tokens, logprobs in done]


@dataclass
class FakeLLM:
    llm_engine: FakeEngine = field(default_factory=FakeEngine)


class FakeParams(SimpleNamespace):
    def clone(self) -> FakeParams:
        return FakeParams(**vars(self))


def _generator(**text_side: Any) -> VllmGenerator:
    return VllmGenerator(llm=FakeLLM(), pad_id=EOS, vocab_size=50, hf_config=None,
                         params=FakeParams(max_tokens=4, output_kind=Kind.CUMULATIVE), **text_side)


def test_a_batch_is_added_as_token_ids_and_its_rows_come_back_in_order() -> None:
    model = _generator(tokenizer=FakeTokenizer(), variant=SAMPLE_VARIANT, options=OPTIONS, eos_ids=(EOS,))
    rows = model.predict(["3 4", "10", "20 21 22"])
    assert model.llm.llm_engine.seen == [({"prompt_token_ids": [3, 4]}, 4, Kind.FINAL_ONLY),
                                         ({"prompt_token_ids": [10]}, 4, Kind.FINAL_ONLY),
                                         ({"prompt_token_ids": [20, 21, 22]}, 4, Kind.FINAL_ONLY)]
    assert [row["tokens"] for row in rows] == [[5, EOS], [11, EOS], [23, EOS]]
    figures = model.take_batch_figures()
    assert figures["generated_tokens"] == 6 and figures["decode_steps"] == 2
    assert figures["prefill_s"] >= 0 and figures["decode_s"] >= 0 and model.take_batch_figures() == {}
    assert [row["tokens"] for row in model.probe_encoded(model.tokenize(["7"]))] == [[8]]
    assert model.llm.llm_engine.seen[-1][1] == 1 and model.params.max_tokens == 4 and model.take_batch_figures() == {}


def test_a_served_batch_reads_outputs_as_they_grow_and_reports_each_first_token_once() -> None:
    model = _generator(tokenizer=FakeTokenizer(), variant=SAMPLE_VARIANT, options=OPTIONS, eos_ids=(EOS,))
    told: list[list[int]] = []
    model.on_first_token = told.append
    rows = model.predict(["3 4", "10"])
    assert [kind for _, _, kind in model.llm.llm_engine.seen] == [Kind.CUMULATIVE] * 2
    assert told == [[0, 1]]  # both first tokens at the first step, once
    assert [row["tokens"] for row in rows] == [[5, EOS], [11, EOS]]


def test_tokenize_is_the_transformers_generators() -> None:
    text_side = dict(tokenizer=FakeTokenizer(), variant=SAMPLE_VARIANT, options={**OPTIONS, "template": "1 {text}"},
                     eos_ids=(EOS,))
    transformers = Generator(model=None, torch=None, device="cpu", generation_config=None, vocab_size=50, **text_side)
    texts = ["3 4", " ".join(["9"] * 300)]  # the second is cut to max_length (128) as the generator cuts it
    assert _generator(**text_side).tokenize(texts) == transformers.tokenize(texts)
    assert _generator(**text_side).untruncated_lengths(texts) == [3, 301]


class OtherTask(TrialTask):
    name = "text-classification"
    pass_files = ()

    def load(self, path: Path, variant: Any, torch: Any, options: dict[str, Any]) -> Any:
        raise AssertionError("never loaded")

    def lines(self, ids: Any, outputs: Any) -> str:
        return ""


def test_refusals_name_the_task_the_setting_and_the_context() -> None:
    with pytest.raises(EngineRefused, match="'text-generation' only, not 'text-classification'"):
        TRIAL_ENGINE.load(OtherTask(), Path("m"), SAMPLE_VARIANT, None, {}, {})
    with pytest.raises(EngineRefused, match="no setting 'swap_space'"):
        resolved_settings({"swap_space": 4})
    with pytest.raises(EngineRefused, match="max_model_len 100 is shorter than max_length 128 \\+ max_new_tokens 4"):
        TRIAL_ENGINE.load(GenerationTrial(), Path("m"), SAMPLE_VARIANT, None, OPTIONS, {"max_model_len": 100})
    assert resolved_settings({"max_num_seqs": 8}) == {**DEFAULTS, "max_num_seqs": 8}


def test_a_setting_the_engine_changed_is_a_difference() -> None:
    read_back = {**DEFAULTS, "kv_cache_gib": 1.0, "max_model_len": 1024}
    assert settings_differences({**DEFAULTS, "kv_cache_gib": 1}, {**DEFAULTS, "kv_cache_gib": 1.0}) == []
    assert settings_differences(DEFAULTS, read_back) == ["max_model_len: declared 2048, engine runs 1024"]


STOP_SCRIPT = """
import json, os, subprocess, sys, time
from pathlib import Path
from protocol.engines.vllm.trial.engine import _children, stop_children
stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
child = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE)
quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
child.stdout.readline()  # its SIGTERM handler is in place
before = sorted(_children(os.getpid()))
start = time.monotonic()
stopped = sorted(stop_children(grace_s=1.0))
print(json.dumps({"started": sorted([child.pid, quick.pid]), "before": before, "stopped": stopped,
                  "seconds": time.monotonic() - start, "after": _children(os.getpid()),
                  "in_proc": [pid for pid in (child.pid, quick.pid) if Path(f"/proc/{pid}").exists()]}))
"""


def test_stop_children_stops_and_reaps_what_the_process_started() -> None:
    # In a process of its own: stop_children stops every child of the process that calls it.
    import json

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", STOP_SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["started"] == result["before"] == result["stopped"]  # a SIGTERM-proof child too
    assert result["after"] == [] and result["in_proc"] == [] and result["seconds"] < 10  # killed and reaped
