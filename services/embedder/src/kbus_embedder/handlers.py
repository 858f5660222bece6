"""Subscriptions and endpoints of the embedder: thin, the work is in
:mod:`kbus_embedder.vectorizing`."""

from __future__ import annotations

from faststream.nats import NatsBroker
from kbus_shared.answering import Served, serve
from kbus_shared.bus import BusMessage, work_subscriber
from kbus_shared.topology import Topology
from nats.aio.client import Client

from kbus_embedder.vectorizing import Vectorizer


def register(
    broker: NatsBroker, topology: Topology, vectorizer: Vectorizer, concurrency: int = 1
) -> None:
    """Consume ``chunks.ready``, ``concurrency`` messages at once."""

    @work_subscriber(
        broker,
        topology,
        topology.chunks_ready,
        topology.chunks_stream,
        topology.embedder_durable,
        max_workers=concurrency,
        title="embedder:chunks.ready",
        description="Embed a document's chunks; publish them on embeddings.ready.",
    )
    async def on_chunks_ready(message: BusMessage) -> None:
        await vectorizer.handle_chunks(message)


async def register_embed_service(
    nc: Client, topology: Topology, vectorizer: Vectorizer, version: str, concurrency: int
) -> Served:
    """Serve ``kb.embed`` as the NATS micro service ``kbus-embed``, ``concurrency`` at once."""
    return await serve(
        nc,
        topology,
        {"kb.embed": vectorizer.answer},
        version=version,
        description="kbus embedder: vectors for texts",
        concurrency=concurrency,
    )
