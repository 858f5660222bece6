"""Each chunk's token states, kept at ingest so that re-scoring a search needs no encoder pass.

The embedder's forward pass over a chunk yields one state per token, and the first stage keeps
only their mean. MaxSim re-scoring needs every token's state: kept here, a search's re-scoring
costs the query's encoding and a few matrix products instead of one encoder pass per candidate
(docs/performance.md, "Token states kept at ingest").

A chunk's value is its tokens' unit vectors in int8, each token with its own float32 scale: a
quarter of float32's bytes, and MaxSim's scores move by far less than the gaps between
candidates (the unit tests bound the error).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from nats.aio.client import Client
from nats.js.api import KeyValueConfig

from kbus_runtime.keyed_cache import KeyedCache

#: Seconds between attempts to open a bucket another service has not created yet.
REOPEN_S = 5.0


def pack(states: np.ndarray) -> bytes:
    """``[tokens, dim]`` float states as per-token scales (float32) then int8 values."""
    states = np.asarray(states, dtype=np.float32)
    scales = np.abs(states).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    values = np.rint(states / scales[:, None]).astype(np.int8)
    return bytes(scales.astype(np.float32).tobytes() + values.tobytes())


def unpack(value: bytes, dimension: int) -> np.ndarray | None:
    """The ``[tokens, dim]`` float32 states of a packed value; None when it is not one."""
    row = 4 + dimension
    if not value or len(value) % row:
        return None
    tokens = len(value) // row
    scales = np.frombuffer(value, dtype=np.float32, count=tokens)
    values = np.frombuffer(value, dtype=np.int8, offset=4 * tokens).reshape(tokens, dimension)
    states: np.ndarray = values.astype(np.float32) * scales[:, None]
    return states


class TokenStateStore(KeyedCache):
    """Token states by model and text: the embedder writes them, the reranker reads them."""

    def __init__(self, config: KeyValueConfig) -> None:
        super().__init__(config, "token states")
        self._tried_at = -1.0

    async def reopen(self, nc: Client) -> None:
        """Open the bucket if it is not open yet (at most every ``REOPEN_S``).

        A reader may start before the writer has created the bucket: it keeps asking.
        """
        if self.is_open or (self._tried_at >= 0 and time.monotonic() - self._tried_at < REOPEN_S):
            return
        quiet = self._tried_at >= 0  # said once
        self._tried_at = time.monotonic()
        await self.open(nc, create=False, quiet=quiet)

    async def get_many(
        self, model: str, texts: Sequence[str], dimension: int
    ) -> list[np.ndarray | None]:
        """Each text's token states under ``model``, or None."""
        return [unpack(v or b"", dimension) for v in await self.get(model, texts)]

    async def put_many(
        self, model: str, texts: Sequence[str], states: Sequence[np.ndarray]
    ) -> None:
        """Keep the token states of texts (best effort)."""
        await self.put(model, texts, [pack(s) for s in states])
