"""Memory estimate for one variant: parameters × bytes + activations + attention scores.

An estimate is shown NEXT TO the measured peaks and never replaces them:
allocator overheads, kernels' workspaces, the framework's own
runtime and fragmentation are not in it. Throughput, interconnect or sharding
cannot be inferred from it either.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from protocol.errors import UserError
from protocol.io.jsonio import loads_unique
from protocol.io.safe_read import open_binary, read_text
from protocol.records.codec import Schema

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
        config = read_model_config(model_dir)
        files = sorted(model_dir.glob("*.safetensors"))
        if not files:
            raise UserError("no *.safetensors weights", str(model_dir), "Save the checkpoint with safetensors.")
        where = str(config_path)
        hidden = _dimension(config, "hidden_size", where)
        layers = _dimension(config, "num_hidden_layers", where)
        heads = _dimension(config, "num_attention_heads", where)
        intermediate = _dimension(config, "intermediate_size", where, default=4 * hidden)
        parameters = linear = 0
        for path in files:
            for name, info in _safetensors_header(path).items():
                if name == "__metadata__":
                    continue
                shape = info.get("shape") if isinstance(info, dict) else None
                if (not isinstance(shape, list) or len(shape) > 8
                        or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**40 for d in shape)):
                    raise UserError(f"tensor {name[:80]!r} has no valid shape", str(path),
                                    "The safetensors header is damaged: save the checkpoint again.")
                count = 1
                for dim in shape:
                    count *= dim
                parameters += count
                if len(shape) == 2 and "embeddings" not in name:
                    linear += count
        return cls(parameters=parameters, linear_parameters=linear, hidden_size=hidden, layers=layers, heads=heads,
                   intermediate_size=intermediate)


#: A model's config.json is a few KiB; anything beyond this is not one.
MAX_CONFIG_BYTES = 16 * 2**20
#: Largest dimension accepted from a config (hidden size, layers, heads…): far above any real model.
MAX_DIMENSION = 2**24


def read_model_config(model_dir: Path) -> dict[str, Any]:
    """The model directory's config.json as a JSON object (a regular UTF-8 file, BOM accepted)."""
    path = Path(model_dir) / "config.json"
    text = read_text(path, "the model's config.json", max_bytes=MAX_CONFIG_BYTES, fix="Point at a saved checkpoint.")
    try:
        config = loads_unique(text)  # a key named twice is refused, never the last value silently
    except RecursionError:
        raise UserError("config.json is nested too deeply", str(path), "Save the checkpoint again.") from None
    except ValueError as exc:  # JSONDecodeError, a key named twice, or an integer of thousands of digits
        raise UserError(f"config.json is not valid JSON: {str(exc)[:120]}", str(path),
                        "Save the checkpoint again.") from None
    if not isinstance(config, dict):
        raise UserError("config.json is not a JSON object", str(path), "Save the checkpoint again.")
    return config


def _dimension(config: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None:
        raise UserError(f"config.json lacks {key!r}", where,
                        "The estimate needs an encoder config (hidden_size, num_hidden_layers, …).")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DIMENSION:
        raise UserError(f"config.json {key} must be an integer from 1 to {MAX_DIMENSION}, got {str(value)[:40]!r}",
                        f"{where}, key {key}", "Save the checkpoint again.")
    return value


def _safetensors_header(path: Path) -> dict[str, Any]:
    with open_binary(path, "weights file") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise UserError("truncated safetensors file", str(path))
        (length,) = struct.unpack("<Q", raw)
        if length > _MAX_HEADER_BYTES:
            raise UserError("implausible safetensors header size", str(path))
        try:
            header = loads_unique(handle.read(length).decode("utf-8"))
        except (ValueError, RecursionError):  # not JSON, not UTF-8, a key twice, nested too deeply, a huge integer
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
    kind: str = "estimate (not a measurement)"
    CODEC: ClassVar[Schema] = Schema("memory estimate", 1)  # history: 1 (0.1.0): first version


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
