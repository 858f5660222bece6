"""Vectors cached by model and text: a restart or a re-ingest of unchanged text embeds nothing.

A JetStream key-value bucket maps ``sha256(model, text)`` to the float32 vector. The cache is an
optimisation and never a reason to fail: if the bucket cannot be opened or read, the chunks are
embedded as if it were empty.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

import numpy as np
from kbus_shared.bus import open_bucket
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

log = logging.getLogger("kbus.embedder")


def cache_key(model: str, text: str) -> str:
    """The bucket key of one text's vector under one model."""
    return hashlib.sha256(f"{model}\x1f{text}".encode()).hexdigest()


class EmbeddingCache:
    """Reads and writes vectors in the embedding cache bucket."""

    def __init__(self, config: KeyValueConfig) -> None:
        self.config = config
        self._kv: KeyValue | None = None

    async def open(self, js: JetStreamContext, *, create: bool) -> None:
        """Open (or create) the bucket; without it the cache stays off."""
        try:
            self._kv = await open_bucket(js, self.config, create=create)
        except Exception as exc:
            log.warning("embedding cache off: bucket %s: %s", self.config.bucket, exc)
            self._kv = None

    async def get_many(
        self, model: str, texts: list[str], dimension: int
    ) -> list[np.ndarray | None]:
        """The cached vector of each text, or None."""
        if self._kv is None:
            return [None] * len(texts)
        return list(await asyncio.gather(*(self._get(model, t, dimension) for t in texts)))

    async def put_many(self, model: str, texts: list[str], vectors: np.ndarray) -> None:
        """Remember the vectors of texts (best effort)."""
        kv = self._kv
        if kv is None:
            return
        results = await asyncio.gather(
            *(
                kv.put(cache_key(model, t), v.astype(np.float32).tobytes())
                for t, v in zip(texts, vectors, strict=True)
            ),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            log.warning(
                "embedding cache: %d of %d writes failed: %s", len(failed), len(texts), failed[0]
            )

    async def _get(self, model: str, text: str, dimension: int) -> np.ndarray | None:
        assert self._kv is not None
        try:
            entry = await self._kv.get(cache_key(model, text))
        except KeyNotFoundError:
            return None
        except Exception as exc:
            log.warning("embedding cache read failed: %s", exc)
            return None
        value = np.frombuffer(entry.value or b"", dtype=np.float32)
        return value if value.size == dimension else None
