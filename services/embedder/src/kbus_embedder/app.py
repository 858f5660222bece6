"""The embedder: ``chunks.ready`` in, ``embeddings.ready`` out; ``kb.embed`` on request."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

from faststream.asgi import AsgiFastStream
from kbus_runtime.service import Service
from kbus_runtime.token_states import TokenStateStore

from kbus_embedder.caching import EmbeddingCache
from kbus_embedder.embedding import create_embedder
from kbus_embedder.handlers import register
from kbus_embedder.settings import EmbedderSettings
from kbus_embedder.vectorizing import Vectorizer

log = logging.getLogger("kbus.embedder")


def create_app(settings: EmbedderSettings | None = None) -> AsgiFastStream:
    """Build the embedder app; the model loads in the lifespan, never at import."""
    settings = settings or EmbedderSettings()
    service = Service("embedder", settings)
    topology = service.topology
    cache = (
        EmbeddingCache(replace(topology.embed_cache_kv, max_bytes=settings.cache_max_bytes))
        if settings.cache
        else None
    )
    tokens = (
        TokenStateStore(
            replace(topology.token_states_kv, max_bytes=settings.token_states_max_bytes)
        )
        if settings.token_states
        else None
    )
    vectorizer = Vectorizer(
        service.stage(),
        lambda on_call: create_embedder(settings, on_call),
        settings.include_title,
        service.registry,
        cache,
        tokens,
    )
    register(service, vectorizer, settings)

    @asynccontextmanager
    async def start_up() -> AsyncIterator[None]:
        embedder = vectorizer.load()
        log.info("embedding with %s (%d dimensions)", embedder.model, embedder.dimension)
        for bucket in (cache, tokens):
            if bucket is not None:
                await bucket.open(service.broker.connection, create=topology.declare)
        await service.withdrawals.open(service.broker.connection)
        yield

    return service.app(start_up)
