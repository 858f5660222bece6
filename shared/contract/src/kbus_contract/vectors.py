"""A compact wire form for embedding vectors.

Vectors travel as base64 of little-endian float32: about a third of the size of a JSON list of
floats, and exact. Readers also accept a plain list of numbers, so other clients can publish
without knowing the encoding. The standard library's ``array`` does the packing, so the
contract needs no numpy; an array-like value (a numpy row) is taken through its ``tolist``.
"""

from __future__ import annotations

import base64
import sys
from array import array
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_SWAP = sys.byteorder != "little"


def encode_vector(values: Any) -> str:
    """Encode a sequence of floats as base64 little-endian float32."""
    packed = array("f", values.tolist() if hasattr(values, "tolist") else values)
    if _SWAP:
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def decode_vector(value: Any) -> tuple[float, ...]:
    """Decode base64 float32 (or pass through a list of numbers)."""
    if isinstance(value, str):
        raw = base64.b64decode(value, validate=True)
        if len(raw) % 4:
            raise ValueError("vector bytes are not a multiple of 4")
        floats = array("f")
        floats.frombytes(raw)
        if _SWAP:
            floats.byteswap()
        return tuple(floats)
    if hasattr(value, "tolist"):
        return tuple(value.tolist())
    if isinstance(value, list | tuple):
        return tuple(map(float, value))
    raise ValueError("a vector is base64 float32 or a list of numbers")


Vector = Annotated[
    tuple[float, ...],
    BeforeValidator(decode_vector),
    PlainSerializer(encode_vector, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "type": "string",
            "contentEncoding": "base64",
            "description": "little-endian float32 values, base64-encoded",
        }
    ),
]


def decode_packed(value: Any) -> bytes:
    """Bytes from base64 text (as on the wire) or as they are."""
    if isinstance(value, str):
        return base64.b64decode(value, validate=True)
    if isinstance(value, bytes):
        return value
    raise ValueError("packed token states are base64 text")


def encode_packed(value: bytes) -> str:
    """Base64 text of packed token states."""
    return base64.b64encode(value).decode("ascii")


#: Bytes of one text's packed token states at most: 512 tokens of 1,024 dimensions.
MAX_PACKED_BYTES = 512 * (4 + 1024)

#: One text's token states as the embedder packs them (``kbus_runtime.token_states.pack``:
#: each token's float32 scale, then each token's int8 values), base64 on the wire.
PackedStates = Annotated[
    bytes,
    BeforeValidator(decode_packed),
    PlainSerializer(encode_packed, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "type": "string",
            "contentEncoding": "base64",
            "description": "per token a little-endian float32 scale, then per token int8 values",
        }
    ),
]
