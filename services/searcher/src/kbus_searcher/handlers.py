"""Subscriptions and endpoints of the searcher: thin; the work is in ``indexing`` and
``searching``."""

from __future__ import annotations

from faststream.nats import NatsBroker
from kbus_shared.advisories import MaxDeliveries
from kbus_shared.answering import Served, serve
from kbus_shared.bus import BusMessage, work_subscriber
from kbus_shared.topology import Topology
from nats.aio.client import Client

from kbus_searcher.indexing import Indexer
from kbus_searcher.searching import Searcher


def register_indexing(
    broker: NatsBroker,
    topology: Topology,
    indexer: Indexer,
    advisories: MaxDeliveries,
    concurrency: int,
) -> None:
    """Consume ``embeddings.ready`` (``concurrency`` at once), deletions and max-deliveries
    advisories (shared durables)."""

    @work_subscriber(
        broker,
        topology,
        topology.embeddings_ready,
        topology.embeddings_stream,
        topology.indexer_durable,
        max_workers=concurrency,
        title="searcher:embeddings.ready",
        description="Upsert a document's embedded chunks into Weaviate; publish document.indexed.",
    )
    async def on_embeddings_ready(message: BusMessage) -> None:
        await indexer.handle(message)

    @work_subscriber(
        broker,
        topology,
        topology.document_deleted,
        topology.documents_stream,
        topology.deleter_durable,
        title="searcher:document.deleted",
        description="Delete a document, library or tenant; publish document.removed.",
    )
    async def on_document_deleted(message: BusMessage) -> None:
        await indexer.handle_deletion(message)

    @work_subscriber(
        broker,
        topology,
        topology.max_deliveries_advisories,
        topology.advisories_stream,
        topology.advisory_durable,
        title="searcher:max-deliveries advisories",
        description="Dead-letter each message the server gave up on, and remove it from its "
        "work queue.",
    )
    async def on_max_deliveries(message: BusMessage) -> None:
        await advisories.handle(message)


async def register_search_service(
    nc: Client, topology: Topology, searcher: Searcher, version: str, concurrency: int
) -> Served:
    """Serve ``kb.search`` and ``kb.stats`` as the NATS micro service ``kbus-search``.

    Replicas share the queue group, so each request is answered once; standard NATS tooling
    (``nats micro ls``) lists the endpoints with their request and response schemas. Up to
    ``concurrency`` requests are answered at once.
    """
    return await serve(
        nc,
        topology,
        {"kb.search": searcher.answer_search, "kb.stats": searcher.answer_stats},
        version=version,
        description="kbus knowledge base: hybrid search and library statistics",
        concurrency=concurrency,
    )
