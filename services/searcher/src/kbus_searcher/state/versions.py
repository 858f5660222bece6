"""The searchable version of each document: a search never sees a half-replaced document.

A new version's chunks are written beside the old version's. Only when every one of them is
stored does the indexer advance the document's entry in this bucket, and only then does it
delete the old chunks. A search keeps a chunk only if its version is its document's entry, or
if the document has no entry yet (its first version is still being written: there is nothing
to mix it with).

A searcher follows the bucket into memory (a key-value watch), so a search reads versions
without a round trip. Where a document's candidates do not all match the copy (a replacement
is under way, or the copy lags), that document is read from the bucket itself, and its answer
applies to all of its candidates: one reply never mixes two versions.
"""

from __future__ import annotations

import asyncio
import contextlib

from kbus_contract.buckets import scope_key
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from kbus_searcher.ordering import DocumentKey, rank
from kbus_searcher.state.buckets import FollowedBucket


class Versions(FollowedBucket[str]):
    """The versions bucket: document key to ``<sequence> <version>``."""

    def __init__(self, config: KeyValueConfig) -> None:
        super().__init__(config, lambda value: _version(value) or "")

    async def advance(
        self, tenant: str, library: str, document_id: str, sequence: int, version: str
    ) -> bool:
        """Make a complete publish the searchable one, unless a later publish already is.

        Returns whether the entry now names this publish. Safe under concurrent indexers: the
        write is conditional on the revision that was read.
        """
        key = scope_key(tenant, library, document_id)
        value = f"{sequence} {version}".encode()
        if self.following and self.copied(key) is None:
            # Most publishes are a document's first: create it in one round trip. An entry the
            # copy has not seen yet makes the create fail, and the loop below reads it.
            with contextlib.suppress(KeyWrongLastSequenceError):
                await self.kv.create(key, value)
                return True
        while True:
            try:
                entry = await self.kv.get(key)
            except KeyNotFoundError:
                entry = None
            if entry is not None and entry.value:
                current = rank(int(entry.value.split(b" ", 1)[0]), _version(entry.value) or "")
                if current > rank(sequence, version):
                    return False
                if current == rank(sequence, version):
                    return True  # the same publish again
            try:
                if entry is None:
                    await self.kv.create(key, value)
                else:
                    await self.kv.update(key, value, last=entry.revision)
                return True
            except KeyWrongLastSequenceError:
                continue  # another indexer wrote first: read again

    async def entry(self, tenant: str, library: str, document_id: str) -> tuple[int, str] | None:
        """The searchable publish of a document, as its sequence and version (read from the
        bucket)."""
        try:
            value = (await self.kv.get(scope_key(tenant, library, document_id))).value or b""
        except KeyNotFoundError:
            return None
        sequence, _, version = value.decode().partition(" ")
        return int(sequence), version

    async def later_than(
        self, tenant: str, library: str, document_id: str, sequence: int, version: str
    ) -> bool:
        """Whether a later publish of the document is already the searchable one (read from
        the bucket)."""
        current = await self.entry(tenant, library, document_id)
        return current is not None and rank(*current) > rank(sequence, version)

    async def searchable(
        self, tenant: str, seen: dict[DocumentKey, set[str]]
    ) -> dict[DocumentKey, str]:
        """The searchable version of each document that has one.

        ``seen`` is the set of versions the candidates of each document carry.
        """
        known: dict[DocumentKey, str] = {}
        ask: list[DocumentKey] = []
        for document, versions in seen.items():
            copied = self.copied(scope_key(tenant, *document))
            if copied is not None and versions == {copied}:
                known[document] = copied
            else:
                ask.append(document)

        async def one(document: DocumentKey) -> tuple[DocumentKey, str | None]:
            try:
                entry = await self.kv.get(scope_key(tenant, *document))
            except KeyNotFoundError:
                return document, None
            return document, _version(entry.value or b"")

        for document, version in await asyncio.gather(*(one(d) for d in ask)):
            if version is not None:
                known[document] = version
        return known


def _version(value: bytes) -> str | None:
    parts = value.split(b" ", 1)
    return parts[1].decode() if len(parts) == 2 else None
