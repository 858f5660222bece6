"""Deletions: a document, a library or a tenant removed from the index, everything published
before the deletion, and remembered so that nothing older comes back."""

from __future__ import annotations

from faststream.nats.message import NatsMessage
from kbus_contract import DocumentDeleted
from kbus_contract.tenancy import require_library
from kbus_runtime.redelivery import stream_sequence
from kbus_runtime.stage import Stage
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.index import receipts
from kbus_searcher.state.tombstones import Tombstones
from kbus_searcher.store import ChunkWriter
from kbus_searcher.store.errors import unavailable


class Deleter:
    """Applies ``document.deleted`` (and a sync's deletions) to the index."""

    def __init__(self, stage: Stage, store: ChunkWriter, tombstones: Tombstones) -> None:
        self.stage = stage
        self.store = store
        self.tombstones = tombstones

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``document.deleted`` message, for the tenant and library of its subject."""
        sequence = stream_sequence(message) or 0
        sent = self.stage.topology.identity(message.raw_message.subject)

        async def work(deletion: DocumentDeleted) -> None:
            require_library(sent, deletion.tenant, deletion.library)
            await self.delete(deletion, sequence)

        await self.stage.settle(message, DocumentDeleted, work)

    async def delete(
        self, deletion: DocumentDeleted, sequence: int, receipt_id: str | None = None
    ) -> None:
        """Apply a deletion to everything published before it, and remember it; its receipt's
        message id is ``receipt_id`` (a sync deletes several documents at one sequence)."""
        await self.tombstones.record(deletion, sequence)
        try:
            # A library's or tenant's deletion names no document: everyone of it hears that.
            named = deletion.document_id is not None
            restricted = named and await self.store.deletes_restricted(deletion, sequence)
            removed = await self.store.delete_scope(deletion, sequence)
        except WeaviateBaseError as exc:
            raise unavailable(exc, "delete") from exc
        msg_id = receipt_id or f"removed:{sequence}"
        await receipts.removed(self.stage, deletion, removed, restricted, msg_id)
