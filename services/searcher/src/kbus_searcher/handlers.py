"""Subscriptions and endpoints of the searcher: thin; the work is in ``indexing`` and
``searching``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream.nats import NatsBroker
from kbus_shared.advisories import MaxDeliveries
from kbus_shared.bus import BusMessage, work_subscriber
from kbus_shared.catalog import channel
from kbus_shared.topology import Topology
from nats.aio.client import Client
from nats.micro import add_service
from pydantic import BaseModel

from kbus_searcher.answering import Answering, SearchService
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
) -> SearchService:
    """Serve ``kb.search`` and ``kb.stats`` as a NATS micro service (``$SRV.PING/INFO/STATS``).

    Replicas share the queue group, so each request is answered once; standard NATS tooling
    (``nats micro ls``) lists the endpoints with their request and response schemas. Up to
    ``concurrency`` requests are answered at once.
    """
    service = await add_service(
        nc,
        name="kbus-search",
        version=version,
        description="kbus knowledge base: hybrid search and library statistics",
        queue_group=topology.search_queue,
        metadata={"bus_prefix": topology.prefix},
    )
    answering = Answering(concurrency)
    endpoints: dict[str, Callable[[bytes], Awaitable[BaseModel]]] = {
        "kb.search": searcher.answer_search,
        "kb.stats": searcher.answer_stats,
    }
    for name, answer in endpoints.items():
        entry = channel(name)
        await service.add_endpoint(
            name=name.removeprefix("kb."),
            subject=entry.subject(topology),
            handler=answering.responder(answer),
            metadata={
                "request_schema": entry.request_schema(),
                "response_schema": entry.reply_schema(),
            },
        )
    return SearchService(service, answering)
