from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.hardware.memory import ModelShape, estimate


def fake_model(tmp_path: Path) -> Path:
    header = {
        "__metadata__": {"format": "pt"},
        "bert.embeddings.word_embeddings.weight": {"dtype": "F32", "shape": [100, 8], "data_offsets": [0, 3200]},
        "bert.encoder.layer.0.attention.self.query.weight": {"dtype": "F32", "shape": [8, 8],
                                                             "data_offsets": [3200, 3456]},
        "bert.encoder.layer.0.attention.self.query.bias": {"dtype": "F32", "shape": [8],
                                                           "data_offsets": [3456, 3488]},
    }
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 3488)
    (tmp_path / "config.json").write_text(json.dumps(
        {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}))
    return tmp_path


def test_parameters_are_counted_from_the_safetensors_header(tmp_path):
    shape = ModelShape.read(fake_model(tmp_path))
    assert (shape.parameters, shape.linear_parameters) == (800 + 64 + 8, 64)


def test_estimate_by_hand(tmp_path):
    shape = ModelShape.read(fake_model(tmp_path))
    fp32 = estimate(shape, "fp32", "none", batch_size=2, max_length=4, attention="eager")
    assert fp32.weight_bytes == 872 * 4
    assert fp32.activation_bytes == 2 * 4 * (5 * 8 + 32) * 4
    assert fp32.attention_score_bytes == 2 * 2 * 4 * 4 * 4
    assert fp32.total_bytes == fp32.weight_bytes + fp32.activation_bytes + fp32.attention_score_bytes
    int8 = estimate(shape, "fp32", "int8-dynamic", batch_size=2, max_length=4, attention="sdpa")
    assert int8.weight_bytes == 64 + (872 - 64) * 4
    assert int8.attention_score_bytes == 0
    assert any("not materialised" in a for a in int8.assumptions)
    assert estimate(shape, "bf16", "none", 2, 4, "sdpa").weight_bytes == 872 * 2


def test_missing_weights_is_a_user_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError, match="no \\*.safetensors"):
        ModelShape.read(tmp_path)
