"""Memory estimate for one variant: parameters × bytes + activations + attention scores.

An estimate is shown NEXT TO the measured peaks and never replaces them
(SPEC R8): allocator overheads, kernels' workspaces, the framework's own
runtime and fragmentation are not in it. Throughput, interconnect or sharding
cannot be inferred from it either.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError

BYTES_PER_VALUE = {"fp32": 4, "bf16": 2, "fp16": 2}
_MAX_HEADER_BYTES = 100 * 2**20


@dataclass(frozen=True)
class ModelShape:
    parameters: int
    linear_parameters: int  # weights of 2-D matrices outside the embeddings (what int8-dynamic quantizes)
    hidden_size: int
    layers: int
    heads: int
    intermediate_size: int

    @classmethod
    def read(cls, model_dir: Path) -> ModelShape:
        config_path = model_dir / "config.json"
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError("config.json not found", str(model_dir), "Point at a saved checkpoint.") from None
        files = sorted(model_dir.glob("*.safetensors"))
        if not files:
            raise UserError("no *.safetensors weights", str(model_dir), "Save the checkpoint with safetensors.")
        parameters = linear = 0
        for path in files:
            for name, info in _safetensors_header(path).items():
                if name == "__metadata__":
                    continue
                count = 1
                for dim in info["shape"]:
                    count *= int(dim)
                parameters += count
                if len(info["shape"]) == 2 and "embeddings" not in name:
                    linear += count
        try:
            return cls(
                parameters=parameters,
                linear_parameters=linear,
                hidden_size=int(config["hidden_size"]),
                layers=int(config["num_hidden_layers"]),
                heads=int(config["num_attention_heads"]),
                intermediate_size=int(config.get("intermediate_size", 4 * int(config["hidden_size"]))),
            )
        except KeyError as exc:
            raise UserError(f"config.json lacks {exc.args[0]!r}", str(config_path),
                            "The estimate needs an encoder config (hidden_size, num_hidden_layers, …).") from None


def _safetensors_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise UserError("truncated safetensors file", str(path))
        (length,) = struct.unpack("<Q", raw)
        if length > _MAX_HEADER_BYTES:
            raise UserError("implausible safetensors header size", str(path))
        try:
            header = json.loads(handle.read(length))
        except json.JSONDecodeError:
            raise UserError("unreadable safetensors header", str(path)) from None
    if not isinstance(header, dict):
        raise UserError("unreadable safetensors header", str(path))
    return header


@dataclass(frozen=True)
class MemoryEstimate:
    parameters: int
    weight_bytes: int
    activation_bytes: int
    attention_score_bytes: int
    total_bytes: int
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["assumptions"] = list(self.assumptions)
        data["schema_version"] = 1
        data["kind"] = "estimate (not a measurement)"
        return data


def estimate(shape: ModelShape, precision: str, quantization: str, batch_size: int, max_length: int,
             attention: str) -> MemoryEstimate:
    value_bytes = BYTES_PER_VALUE[precision]
    assumptions = [f"{precision}: {value_bytes} bytes per weight and activation value"]
    if quantization == "int8-dynamic":
        weight_bytes = shape.linear_parameters * 1 + (shape.parameters - shape.linear_parameters) * value_bytes
        assumptions.append("int8-dynamic: 1 byte per weight of the Linear layers, the rest unchanged")
    else:
        weight_bytes = shape.parameters * value_bytes
    tokens = batch_size * max_length
    # Inference without gradients keeps about one layer's buffers alive at a time:
    # hidden states in and out, the q/k/v projections and the feed-forward intermediate.
    activation_bytes = tokens * (5 * shape.hidden_size + shape.intermediate_size) * value_bytes
    assumptions.append(
        f"activations: batch {batch_size} × {max_length} tokens (every input padded to max_length, the worst "
        "case) × (5 × hidden + intermediate) values, one layer alive at a time"
    )
    if attention == "eager":
        attention_bytes = batch_size * shape.heads * max_length * max_length * value_bytes
        assumptions.append("eager attention materialises batch × heads × length² scores")
    else:
        attention_bytes = 0
        assumptions.append("sdpa attention: scores assumed not materialised (fused kernel); eager would add "
                           f"{batch_size * shape.heads * max_length * max_length * value_bytes} bytes")
    assumptions.append("not included: the framework runtime, allocator caching and fragmentation, workspaces")
    return MemoryEstimate(
        parameters=shape.parameters,
        weight_bytes=weight_bytes,
        activation_bytes=activation_bytes,
        attention_score_bytes=attention_bytes,
        total_bytes=weight_bytes + activation_bytes + attention_bytes,
        assumptions=tuple(assumptions),
    )
