"""Engine ``vllm`` against the transformers generator on the demo's SmolLM2 checkpoint, in real processes.

Each engine runs in its own environment (tests/engine_rows.py: vLLM with ``.venv-vllm``'s interpreter, transformers
with this one's), on the same 8 prompts: in fp32 the token ids must be identical (8/8) and so must the top-k ids;
in bf16 vLLM's rows are compared with the fp32 reference and each divergence is reported (position, near tie or
not, the reference's margin), not asserted away. The vLLM process must leave no process behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from vllm_env import ROOT, session_processes, vllm_python

from protocol.tasks.generation import first_divergence, near_tie
from protocol.tasks.generation.outputs import Generation

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]

SCRIPT = ROOT / "tests" / "engine_rows.py"


@pytest.fixture(scope="module", autouse=True)
def _vllm_environment() -> None:
    """Skip (or fail, with ISOCOST_REQUIRE_VLLM=1) before any model is loaded when .venv-vllm is missing."""
    vllm_python()


def _rows(python: Path, engine: str, precision: str, model: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen([str(python), str(SCRIPT), engine, precision, str(model), str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    log, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, log.decode(errors="replace")[-4000:]
    assert session_processes(proc.pid) == [], "the engine left a process of its session behind"
    return json.loads(out.read_text(encoding="utf-8"))


def _generation(row: dict[str, Any], ident: str) -> Generation:
    return Generation(id=ident, tokens=tuple(row["tokens"]), text=row["text"],
                      top_ids=tuple(map(tuple, row["top_ids"])), top_logprobs=tuple(map(tuple, row["top_logprobs"])))


@pytest.fixture(scope="module")
def reference(smollm2: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The transformers generator's fp32 rows, in this (the project's) environment."""
    return _rows(Path(sys.executable), "transformers", "fp32", smollm2.path,
                 tmp_path_factory.mktemp("tf") / "rows.json")


@pytest.mark.parametrize("engine", ["vllm", "vllm-server"])
def test_fp32_vllm_gives_the_transformers_tokens(smollm2: Any, reference: dict[str, Any], tmp_path: Path,
                                                 engine: str) -> None:
    """``vllm-server``: the same through vLLM's HTTP server (``server = true``), each prompt a streaming request."""
    got = _rows(vllm_python(), engine, "fp32", smollm2.path, tmp_path / "rows.json")
    identical = sum(a["tokens"] == b["tokens"] for a, b in zip(got["rows"], reference["rows"], strict=True))
    print(f"vllm fp32: {identical}/8 identical to transformers fp32; load {got['load_s']:.1f} s, "
          f"{got['figures']['generated_tokens']} tokens in {got['generate_s']:.2f} s")
    assert identical == 8
    for ours, theirs in zip(got["rows"], reference["rows"], strict=True):
        assert ours["top_ids"] == theirs["top_ids"]
        assert ours["text"] == theirs["text"] and ours["n_tokens"] == len(ours["tokens"])
        assert max(abs(x - y) for a, b in zip(ours["top_logprobs"], theirs["top_logprobs"], strict=True)
                   for x, y in zip(a, b, strict=True)) < 1e-3
    assert got["figures"]["generated_tokens"] == sum(row["n_tokens"] for row in got["rows"])
    readback = got["readback"]
    assert readback["name"] == "vllm" and readback["version"] and readback["dtype"] == "float32"
    assert readback["settings"] == {"enforce_eager": True, "max_model_len": 2048, "max_num_seqs": 8,
                                    "kv_cache_gib": 1.0, "block_size": 128, "enable_prefix_caching": False,
                                    "server": engine == "vllm-server"}
    assert got["children_left"] == []
    if engine == "vllm-server":  # the server's own times per request, beside the client's
        requests = [json.loads(line) for line in (tmp_path / "vllm_requests.jsonl").read_text().splitlines()]
        assert [r["tokens"] for r in requests[-8:]] == [row["n_tokens"] for row in got["rows"]]
        assert all(r["server"]["time_to_first_token_ms"] > 0 for r in requests)


def test_bf16_vllm_divergences_are_reported(smollm2: Any, reference: dict[str, Any], tmp_path: Path) -> None:
    got = _rows(vllm_python(), "vllm", "bf16", smollm2.path, tmp_path / "rows.json")
    assert got["readback"]["dtype"] == "bfloat16"
    lines = []
    for index, (ours, theirs) in enumerate(zip(got["rows"], reference["rows"], strict=True)):
        mine, ref = _generation(ours, str(index)), _generation(theirs, str(index))
        position = first_divergence(mine, ref)
        if position is None:
            continue
        tie = near_tie(mine, ref, position)
        margin = (ref.top_logprobs[position][0] - ref.top_logprobs[position][1]
                  if position < len(ref.tokens) else None)
        lines.append(f"prompt {index}: first divergence at {position}, near tie {tie}, reference margin {margin}")
    print(f"vllm bf16: {8 - len(lines)}/8 identical to transformers fp32", *lines, sep="\n")
    assert all(len(row["top_ids"]) == row["n_tokens"] for row in got["rows"])
