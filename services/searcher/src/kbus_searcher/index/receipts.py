"""What the indexer and the deleter tell: ``document.indexed`` once a publish is searchable,
``document.removed`` once a deletion applied, each kept in the receipts stream within the
tenant's budget, on the form for restricted documents where one is named; and
``document.progress`` as a large document's parts are stored (sent, not kept)."""

from __future__ import annotations

import logging

from kbus_contract import (
    DocumentDeleted,
    DocumentIndexed,
    DocumentProgress,
    DocumentRemoved,
    EmbeddingsReady,
)
from kbus_contract.restricted import is_everyones
from kbus_runtime.budgets import Resource
from kbus_runtime.stage import Stage
from nats.errors import Error as NatsError

log = logging.getLogger("kbus.searcher")


async def indexed(stage: Stage, ready: EmbeddingsReady) -> None:
    """A publish is searchable. Parts finishing together may each see the document complete:
    one receipt is kept (its message id names the publish)."""
    doc = ready.document
    topology = stage.topology
    await stage.record(
        DocumentIndexed(
            tenant=doc.tenant,
            library=doc.library,
            document_id=doc.document_id,
            version=doc.version,
            chunk_count=ready.total_chunks,
            model=ready.model,
        ),
        topology.indexed(doc.tenant, doc.library, not is_everyones(doc.access)),
        stream=topology.receipts_stream.name,
        msg_id=f"indexed:{doc.tenant}:{doc.library}:{doc.document_id}:{doc.sequence}:{doc.version}",
        tenant=doc.tenant,
        budget=Resource.RECEIPTS,
    )


async def progress(stage: Stage, ready: EmbeddingsReady, stored: int) -> None:
    """A part of a large document is stored: ``stored`` of its chunks so far. Sent, not kept
    (a listener that misses one sees the next, and the receipt)."""
    doc = ready.document
    said = DocumentProgress(
        tenant=doc.tenant,
        library=doc.library,
        document_id=doc.document_id,
        version=doc.version,
        indexed=min(stored, ready.total_chunks),
        total=ready.total_chunks,
    )
    subject = stage.topology.progress(doc.tenant, doc.library, not is_everyones(doc.access))
    try:
        await stage.broker.connection.publish(subject, said.model_dump_json().encode())
    except NatsError as exc:  # told again with the next part, and the receipt says the rest
        log.debug("progress of %s not sent: %s", doc.document_id, exc)


async def removed(
    stage: Stage, deletion: DocumentDeleted, chunks: int, restricted: bool, msg_id: str
) -> None:
    """A deletion applied, ``chunks`` removed."""
    topology = stage.topology
    await stage.record(
        DocumentRemoved(
            tenant=deletion.tenant,
            library=deletion.library,
            document_id=deletion.document_id,
            chunks_deleted=chunks,
        ),
        topology.removed(deletion.tenant, deletion.library, restricted),
        stream=topology.receipts_stream.name,
        msg_id=msg_id,
        tenant=deletion.tenant,
        budget=Resource.RECEIPTS,
    )
