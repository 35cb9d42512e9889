"""Engine ``vllm`` behind its HTTP server (``server = true``) against the transformers generator on the demo's
SmolLM2 checkpoint, in real processes, below the trial.

Each engine runs in its own environment (tests/engine_rows.py: vLLM with ``.venv-vllm``'s interpreter, transformers
with this one's), on the same 8 prompts: in fp32 the token ids must be identical (8/8) and so must the top-k ids and
their log-probabilities; the vLLM process must leave no process behind. The in-process engine (``server = false``),
fp32 and bf16, is held to the same through a whole campaign in tests/e2e/test_vllm_campaign.py.
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


@pytest.fixture(scope="module")
def reference(smollm2: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The transformers generator's fp32 rows, in this (the project's) environment."""
    return _rows(Path(sys.executable), "transformers", "fp32", smollm2.path,
                 tmp_path_factory.mktemp("tf") / "rows.json")


def test_fp32_vllm_server_gives_the_transformers_tokens(smollm2: Any, reference: dict[str, Any],
                                                        tmp_path: Path) -> None:
    """Each prompt a streaming request to vLLM's HTTP server."""
    got = _rows(vllm_python(), "vllm-server", "fp32", smollm2.path, tmp_path / "rows.json")
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
                                    "server": True}
    assert got["children_left"] == []
    # The server's own times per request, beside the client's.
    requests = [json.loads(line) for line in (tmp_path / "vllm_requests.jsonl").read_text().splitlines()]
    assert [r["tokens"] for r in requests[-8:]] == [row["n_tokens"] for row in got["rows"]]
    assert all(r["server"]["time_to_first_token_ms"] > 0 for r in requests)
