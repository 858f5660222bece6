"""Subscriptions and endpoints of the embedder: thin, the work is in
:mod:`kbus_embedder.vectorizing`."""

from __future__ import annotations

from kbus_runtime.bus import BusMessage
from kbus_runtime.service import Service

from kbus_embedder.settings import EmbedderSettings
from kbus_embedder.vectorizing import Vectorizer


def register(service: Service, vectorizer: Vectorizer, settings: EmbedderSettings) -> None:
    """Consume ``chunks.ready``; serve ``kb.embed`` as the NATS micro service ``kbus-embed``."""
    topology = service.topology

    @service.consume(
        topology.chunks_ready,
        topology.chunks_stream,
        topology.embedder_durable,
        concurrency=settings.concurrency,
        title="embedder:chunks.ready",
        description="Embed a document's chunks; publish them on embeddings.ready.",
    )
    async def on_chunks_ready(message: BusMessage) -> None:
        await vectorizer.handle_chunks(message)

    service.answer(
        {"kb.embed": vectorizer.answer},
        description="kbus embedder: vectors for texts",
        concurrency=settings.request_concurrency,
    )
