"""Subscriptions of the embedder: thin, the work is in :mod:`kbus_embedder.vectorizing`."""

from __future__ import annotations

from faststream import AckPolicy
from faststream.nats import NatsBroker
from kbus_shared.bus import BusMessage, work_subscriber
from kbus_shared.contracts import EmbedReply, ErrorReply
from kbus_shared.topology import Topology

from kbus_embedder.vectorizing import Vectorizer


def register(
    broker: NatsBroker,
    topology: Topology,
    vectorizer: Vectorizer,
    concurrency: int = 1,
    request_concurrency: int = 1,
) -> None:
    """Consume ``chunks.ready`` (``concurrency`` messages at once); answer ``kb.embed``
    (``request_concurrency`` at once)."""

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

    @broker.subscriber(
        topology.embed,
        queue=topology.embed_queue,
        ack_policy=AckPolicy.MANUAL,
        max_workers=request_concurrency,
        title="embedder:kb.embed",
        description="Request-reply: EmbedRequest in, EmbedReply or ErrorReply out.",
    )
    async def on_embed(message: BusMessage) -> EmbedReply | ErrorReply:
        return await vectorizer.handle_request(message)
