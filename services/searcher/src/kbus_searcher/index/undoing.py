"""Taking back what a publish that lost wrote: the one place the indexer removes a publish.

A publish loses when its ruling says so (:mod:`kbus_searcher.state.standing`), when its message
is dead-lettered, or when the server gives up on it. What it may have written (by this
delivery, or an earlier one cut short) goes:

- a publish a deletion or a sync took back after it was written goes whole;
- any other loser goes unless its version is the searchable one, whose chunks it shares (the
  same ids: a publish of the same text again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kbus_contract import EmbeddingsReady
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.state.standing import Ruling
from kbus_searcher.state.versions import Versions
from kbus_searcher.store import ChunkWriter
from kbus_searcher.store.errors import unavailable

log = logging.getLogger("kbus.searcher")


@dataclass(frozen=True)
class Undoing:
    """Removes what losing publishes wrote."""

    store: ChunkWriter
    versions: Versions

    async def lost(
        self, readies: Sequence[EmbeddingsReady], rulings: Sequence[Ruling], *, written: bool
    ) -> None:
        """Undo every publish whose ruling lost (``written``: ruled on after its write, when a
        deletion or a sync takes it back whole)."""
        losers = [
            (ready, ruling) for ready, ruling in zip(readies, rulings, strict=True) if ruling.lost
        ]
        await asyncio.gather(
            *(
                self.take_back(ready)
                if written and ruling in (Ruling.DELETED, Ruling.UNLISTED)
                else self.undo(ready)
                for ready, ruling in losers
            )
        )

    async def undo(self, ready: EmbeddingsReady) -> None:
        """Remove what a publish that will never be the searchable one may have written:
        unless its version is the searchable one, whose chunks it shares (same ids)."""
        doc = ready.document
        current = await self.versions.entry(doc.tenant, doc.library, doc.document_id)
        if current is not None and current[1] == doc.version:
            return
        await self.take_back(ready)

    async def take_back(self, ready: EmbeddingsReady) -> None:
        """Remove everything this publish wrote."""
        doc = ready.document
        try:
            removed = await self.store.delete_publish(ready)
        except WeaviateBaseError as exc:
            raise unavailable(exc, "undo a publish") from exc
        if removed:
            log.info(
                "removed %d chunks of %s/%s@%s (seq %d): a later publish or a deletion won",
                removed,
                doc.library,
                doc.document_id,
                doc.version,
                doc.sequence,
            )
