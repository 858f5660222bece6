"""Vectors cached by model and text: a restart or a re-ingest of unchanged text embeds nothing.

The bucket maps ``sha256(model, text)`` to the float32 vector (:mod:`kbus_runtime.keyed_cache`).
"""

from __future__ import annotations

import numpy as np
from kbus_runtime.keyed_cache import KeyedCache
from nats.js.api import KeyValueConfig


class EmbeddingCache(KeyedCache):
    """Reads and writes vectors in the embedding cache bucket."""

    def __init__(self, config: KeyValueConfig) -> None:
        super().__init__(config, "embedding cache")

    async def get_many(
        self, model: str, texts: list[str], dimension: int
    ) -> list[np.ndarray | None]:
        """The cached vector of each text, or None."""
        vectors: list[np.ndarray | None] = []
        for value in await self.get(model, texts):
            vector = np.frombuffer(value or b"", dtype=np.float32)
            vectors.append(vector if vector.size == dimension else None)
        return vectors

    async def put_many(self, model: str, texts: list[str], vectors: np.ndarray) -> None:
        """Remember the vectors of texts (best effort)."""
        await self.put(model, texts, [v.astype(np.float32).tobytes() for v in vectors])
