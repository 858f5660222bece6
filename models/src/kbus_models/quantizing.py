"""Dynamic int8 quantization of an encoder graph, done when the model loads.

Weights become int8 with one scale per output channel; activations are quantized per batch at
run time (onnxruntime's MatMulInteger). Nothing is downloaded: the packaged fp32 weights are
the input. Per-channel scales kept nearly fp32's quality where per-tensor scales or 7-bit
weights, as fast, lost more (docs/tuning.md, "KBUS_EMBEDDER_MODEL").
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
