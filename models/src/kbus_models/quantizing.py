"""Dynamic int8 quantization of an encoder graph, done when the model loads.

Weights become int8 with one scale per output channel; activations are quantized per batch at
run time (onnxruntime's MatMulInteger). Nothing is downloaded: the packaged fp32 weights are
the input. On SciFact (all 19,979 chunks, 300 test queries, exhaustive vector search) this lost
0.0020 nDCG@10 against fp32 and encoded 1.33 times as fast on two AVX2 cores; per-tensor
scales or 7-bit weights were as fast but lost more than the 0.005 kbus allows
(docs/performance.md).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path


def quantize_int8(model: bytes) -> bytes:
    """The graph ``model`` with its MatMul weights in int8, one scale per channel."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # onnxruntime logs a pre-processing hint on the root logger; it does not apply here
    # (shape inference only helps graphs whose shapes are unknown).
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))
    try:
        with tempfile.TemporaryDirectory(prefix="kbus-q8-") as folder:
            out = Path(folder) / "model.onnx"
            quantize_dynamic(
                onnx.load_from_string(model),
                out,
                per_channel=True,
                weight_type=QuantType.QInt8,
            )
            return out.read_bytes()
    finally:
        root.setLevel(level)
