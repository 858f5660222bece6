"""Deletions remembered in a JetStream key-value bucket, so late arrivals stay deleted.

A deletion records the stream sequence at which it was published under a key for its scope
(tenant, library or document). Anything published before that sequence must not be indexed,
however late its embeddings arrive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kbus_contract import DocumentDeleted
from kbus_contract.buckets import covering_keys, scope_key
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyNotFoundError

from kbus_searcher.state.buckets import FollowedBucket


class Tombstones(FollowedBucket[int]):
    """The tombstone bucket, and (once following) a copy of it in memory."""

    def __init__(self, config: KeyValueConfig) -> None:
        super().__init__(config, int)

    async def _get(self, key: str) -> int:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return 0
        return int(entry.value or b"0")

    async def record(self, deletion: DocumentDeleted, sequence: int) -> None:
        """Remember a deletion (never lowering an existing mark)."""
        key = scope_key(deletion.tenant, deletion.library, deletion.document_id)
        if await self._get(key) < sequence:
            await self.kv.put(key, str(sequence).encode())

    async def barrier(
        self, tenant: str, library: str, document_id: str, *, fresh: bool = True
    ) -> int:
        """The latest deletion that covers this document (0: none).

        Args:
            fresh: Read the bucket. Otherwise the in-memory copy answers when following: it
                may miss a deletion recorded a moment ago, so use it only where a later fresh
                read catches what it missed.
        """
        if not fresh and self.following:
            return max(self.copied(key) or 0 for key in _keys(tenant, library, document_id))
        [mark] = await self.barriers([(tenant, library, document_id)])
        return mark

    async def barriers_copied(self, documents: Sequence[tuple[str, str, str]]) -> list[int]:
        """The latest deletion covering each document as the copy in memory has it (read from
        the bucket when not following): it may miss a deletion of a moment ago, so only where
        a later :meth:`barriers` catches what it missed."""
        if not self.following:
            return await self.barriers(documents)
        return [max(self.copied(key) or 0 for key in _keys(*document)) for document in documents]

    async def barriers(self, documents: Sequence[tuple[str, str, str]]) -> list[int]:
        """The latest deletion covering each (tenant, library, document id), read from the bucket.

        Keys that several documents share (their tenant, their library) are read once.
        """
        scopes = [_keys(*document) for document in documents]
        keys = list(dict.fromkeys(key for keys in scopes for key in keys))
        marks = dict(zip(keys, await asyncio.gather(*(self._get(k) for k in keys)), strict=True))
        return [max(marks[key] for key in keys) for keys in scopes]


def _keys(tenant: str, library: str, document_id: str) -> tuple[str, str, str]:
    return covering_keys(tenant, library, document_id)
