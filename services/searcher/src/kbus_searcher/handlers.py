"""Subscriptions of the searcher: thin; the work is in ``indexing`` and ``searching``."""

from __future__ import annotations

from faststream import AckPolicy
from faststream.nats import NatsBroker, PullSub
from faststream.nats.annotations import NatsMessage
from kbus_shared.contracts import ErrorReply, SearchReply, StatsReply
from kbus_shared.topology import Topology, work_consumer

from kbus_searcher.indexing import Indexer
from kbus_searcher.searching import Searcher


def register_indexing(broker: NatsBroker, topology: Topology, indexer: Indexer) -> None:
    """Consume ``embeddings.ready`` through the shared durable pull consumer."""

    @broker.subscriber(
        topology.embeddings_ready,
        stream=topology.embeddings_stream,
        durable=topology.indexer_durable,
        config=work_consumer(topology.indexer_durable),
        pull_sub=PullSub(batch_size=4, timeout=1.0),
        ack_policy=AckPolicy.MANUAL,
        title="searcher:embeddings.ready",
        description="Upsert a document's embedded chunks into Weaviate; publish document.indexed.",
    )
    async def on_embeddings_ready(message: NatsMessage) -> None:
        await indexer.handle(message)

    @broker.subscriber(
        topology.document_deleted,
        stream=topology.documents_stream,
        durable=topology.deleter_durable,
        config=work_consumer(topology.deleter_durable),
        pull_sub=PullSub(batch_size=1, timeout=1.0),
        ack_policy=AckPolicy.MANUAL,
        title="searcher:document.deleted",
        description="Delete a document, library or tenant; publish document.removed.",
    )
    async def on_document_deleted(message: NatsMessage) -> None:
        await indexer.handle_deletion(message)


def register_search(broker: NatsBroker, topology: Topology, searcher: Searcher) -> None:
    """Answer ``kb.search`` in a queue group, so replicas share the requests."""

    @broker.subscriber(
        topology.search,
        queue=topology.search_queue,
        ack_policy=AckPolicy.MANUAL,
        title="searcher:kb.search",
        description="Request-reply: SearchRequest in, SearchReply or ErrorReply out.",
    )
    async def on_search(message: NatsMessage) -> SearchReply | ErrorReply:
        return await searcher.handle(message)

    @broker.subscriber(
        topology.stats,
        queue=topology.search_queue,
        ack_policy=AckPolicy.MANUAL,
        title="searcher:kb.stats",
        description="Request-reply: StatsRequest in, StatsReply or ErrorReply out.",
    )
    async def on_stats(message: NatsMessage) -> StatsReply | ErrorReply:
        return await searcher.handle_stats(message)
