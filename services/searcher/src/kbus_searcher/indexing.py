"""Indexing: ``embeddings.ready`` into the store, deletions out of it, and receipts."""

from __future__ import annotations

import logging

from faststream.nats.message import NatsMessage
from kbus_shared.consuming import Stage, stream_sequence
from kbus_shared.contracts import DocumentDeleted, DocumentIndexed, DocumentRemoved, EmbeddingsReady
from kbus_shared.errors import PermanentError, TransientError
from prometheus_client import CollectorRegistry, Counter
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.store import ChunkStore
from kbus_searcher.tombstones import Tombstones
from kbus_searcher.versions import Versions

log = logging.getLogger("kbus.searcher")


class Indexer:
    """Writes each publish of a document, retires older ones, applies deletions, and says so.

    Order comes from the stream sequence of the original ``document.added`` or
    ``document.deleted``: whatever was published later wins, however the messages interleave
    on the way.
    """

    def __init__(
        self,
        stage: Stage,
        store: ChunkStore,
        tombstones: Tombstones,
        versions: Versions,
        registry: CollectorRegistry,
    ) -> None:
        self.stage = stage
        self.store = store
        self.tombstones = tombstones
        self.versions = versions
        self.chunks_indexed = Counter(
            "kbus_indexer_chunks", "Chunks written to the store", registry=registry
        )
        self.skipped = Counter(
            "kbus_indexer_skipped",
            "Publishes skipped as superseded or deleted",
            ["reason"],
            registry=registry,
        )

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``embeddings.ready`` message."""
        await self.stage.settle(message, EmbeddingsReady, self.index)

    async def handle_deletion(self, message: NatsMessage) -> None:
        """Settle one ``document.deleted`` message."""
        sequence = stream_sequence(message) or 0
        await self.stage.settle(message, DocumentDeleted, lambda d: self.delete(d, sequence))

    async def index(self, ready: EmbeddingsReady) -> None:
        """Upsert a part of a document; once every part is stored, retire the older versions.

        The new version is complete in the store before the old one is deleted, so a search
        sees the old version or the new one, never neither.
        """
        doc = ready.document
        if any(len(c.vector) != ready.dimension for c in ready.chunks):
            raise PermanentError(
                "a vector's length differs from the stated dimension", code="bad_vector"
            )
        try:
            if await self._superseded(ready):
                return
            await self.store.upsert(ready)
            self.chunks_indexed.inc(len(ready.chunks))
            # A message with every chunk of its publish completes it (the write has no
            # errors); only a part of a larger document needs to count what is stored.
            whole = len(ready.chunks) == ready.total_chunks
            if not whole and await self.store.count_stored(ready) < ready.total_chunks:
                return  # another part completes the document
            # Searches switch to the new version here, before the old one is deleted.
            await self.versions.advance(
                doc.tenant, doc.library, doc.document_id, doc.sequence, doc.version
            )
            removed = await self.store.delete_superseded(ready)
            if await self._deleted_meanwhile(ready):
                return
        except WeaviateBaseError as exc:
            raise TransientError(f"the store is unavailable: {exc}", code="store_error") from exc
        if removed:
            log.info("replaced %d chunks of older versions of %s", removed, doc.document_id)
        await self._receipt(ready)

    async def _superseded(self, ready: EmbeddingsReady) -> bool:
        doc = ready.document
        # The copy in memory may miss a deletion of the last moment: _deleted_meanwhile reads
        # the bucket after the write and removes what this check let through.
        barrier = await self.tombstones.barrier(
            doc.tenant, doc.library, doc.document_id, fresh=False
        )
        if barrier > doc.sequence:
            self.skipped.labels("deleted").inc()
            return True
        newest = await self.store.newest_sequence(ready)
        if newest is not None and newest > doc.sequence:
            self.skipped.labels("superseded").inc()
            return True
        return False

    async def _deleted_meanwhile(self, ready: EmbeddingsReady) -> bool:
        # A deletion records its tombstone before it deletes; checking again after writing means
        # that either the deletion saw these chunks or this check sees the deletion.
        doc = ready.document
        if await self.tombstones.barrier(doc.tenant, doc.library, doc.document_id) > doc.sequence:
            await self.store.delete_publish(ready)
            self.skipped.labels("deleted").inc()
            return True
        return False

    async def _receipt(self, ready: EmbeddingsReady) -> None:
        doc = ready.document
        receipt = DocumentIndexed(
            tenant=doc.tenant,
            library=doc.library,
            document_id=doc.document_id,
            version=doc.version,
            chunk_count=ready.total_chunks,
            model=ready.model,
        )
        topology = self.stage.topology
        # Parts finishing together may each see the document complete: one receipt is kept.
        await self.stage.publish(
            receipt,
            topology.document_indexed,
            stream=topology.receipts_stream.name,
            msg_id=f"indexed:{doc.tenant}:{doc.library}:{doc.document_id}:{doc.sequence}",
        )

    async def delete(self, deletion: DocumentDeleted, sequence: int) -> None:
        """Apply a deletion to everything published before it, and remember it."""
        await self.tombstones.record(deletion, sequence)
        try:
            removed = await self.store.delete_scope(deletion, sequence)
        except WeaviateBaseError as exc:
            raise TransientError(f"the store is unavailable: {exc}", code="store_error") from exc
        topology = self.stage.topology
        await self.stage.publish(
            DocumentRemoved(
                tenant=deletion.tenant,
                library=deletion.library,
                document_id=deletion.document_id,
                chunks_deleted=removed,
            ),
            topology.document_removed,
            stream=topology.receipts_stream.name,
            msg_id=f"removed:{sequence}",
        )
