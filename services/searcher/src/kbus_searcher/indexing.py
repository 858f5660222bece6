"""Indexing: ``embeddings.ready`` into the store, then a receipt on ``document.indexed``."""

from __future__ import annotations

import logging

from faststream.nats.message import NatsMessage
from kbus_shared.consuming import Stage
from kbus_shared.contracts import DocumentIndexed, EmbeddingsReady
from kbus_shared.errors import PermanentError, TransientError
from prometheus_client import CollectorRegistry, Counter
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.store import ChunkStore

log = logging.getLogger("kbus.searcher")


class Indexer:
    """Writes each document's chunks, removes its older versions, and says so."""

    def __init__(self, stage: Stage, store: ChunkStore, registry: CollectorRegistry) -> None:
        self.stage = stage
        self.store = store
        self.chunks_indexed = Counter(
            "kbus_indexer_chunks", "Chunks written to the store", registry=registry
        )

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``embeddings.ready`` message."""
        await self.stage.settle(message, EmbeddingsReady, self.index)

    async def index(self, ready: EmbeddingsReady) -> None:
        """Upsert a part of a document; once every part is stored, retire the older versions.

        The new version is complete in the store before the old one is deleted, so a search
        sees the old version, then the new one, never neither.
        """
        doc = ready.document
        if any(len(c.vector) != ready.dimension for c in ready.chunks):
            raise PermanentError(
                "a vector's length differs from the stated dimension", code="bad_vector"
            )
        try:
            await self.store.upsert(ready)
            self.chunks_indexed.inc(len(ready.chunks))
            stored = await self.store.count_version(
                doc.tenant, doc.library, doc.document_id, doc.version
            )
            if stored < ready.total_chunks:
                return  # another part completes the document
            removed = await self.store.delete_other_versions(
                doc.tenant, doc.library, doc.document_id, doc.version
            )
        except WeaviateBaseError as exc:
            raise TransientError(f"the store is unavailable: {exc}", code="store_error") from exc
        if removed:
            log.info("replaced %d chunks of older versions of %s", removed, doc.document_id)
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
            msg_id=f"indexed:{doc.tenant}:{doc.library}:{doc.document_id}:{doc.version}",
        )
