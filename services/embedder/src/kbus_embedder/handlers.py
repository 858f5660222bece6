"""Subscriptions and endpoints of the embedder: thin, the work is in
:mod:`kbus_embedder.vectorizing`."""

from __future__ import annotations

from kbus_runtime.service import Service

from kbus_embedder.settings import EmbedderSettings
from kbus_embedder.vectorizing import Vectorizer


def register(service: Service, vectorizer: Vectorizer, settings: EmbedderSettings) -> None:
    """Consume ``chunks.ready``; serve ``kb.embed`` as the NATS micro service ``kbus-embed``."""
    service.consume(
        "embedder",
        vectorizer.handle_chunks,
        concurrency=settings.concurrency,
        description="Embed a document's chunks; publish them on embeddings.ready.",
    )

    service.answer(
        {"kb.embed": vectorizer.answer},
        description="kbus embedder: vectors for texts",
        concurrency=settings.request_concurrency,
    )
