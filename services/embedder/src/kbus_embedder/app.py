"""The embedder: ``chunks.ready`` in, ``embeddings.ready`` out; ``kb.embed`` on request."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from importlib.metadata import version

from faststream.asgi import AsgiFastStream
from kbus_shared.answering import Served
from kbus_shared.bus import connect_and_declare, make_app, make_broker
from kbus_shared.consuming import Stage, StageMetrics
from kbus_shared.logs import configure_logging
from prometheus_client import CollectorRegistry

from kbus_embedder.caching import EmbeddingCache
from kbus_embedder.embedding import create_embedder
from kbus_embedder.handlers import register, register_embed_service
from kbus_embedder.settings import EmbedderSettings
from kbus_embedder.vectorizing import Vectorizer

log = logging.getLogger("kbus.embedder")


def create_app(settings: EmbedderSettings | None = None) -> AsgiFastStream:
    """Build the embedder app; the model loads in the lifespan, never at import."""
    settings = settings or EmbedderSettings()
    configure_logging(settings.log_level)
    registry = CollectorRegistry()
    broker = make_broker(settings.bus, registry, app_name="embedder", log_level=settings.log_level)
    topology = settings.bus.topology
    stage = Stage("embedder", broker, topology, StageMetrics.create(registry))
    cache = (
        EmbeddingCache(replace(topology.embed_cache_kv, max_bytes=settings.cache_max_bytes))
        if settings.cache
        else None
    )
    vectorizer = Vectorizer(
        stage,
        lambda on_call: create_embedder(settings, on_call),
        settings.include_title,
        registry,
        cache,
    )
    register(broker, topology, vectorizer, settings.concurrency)
    services: list[Served] = []

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        embedder = vectorizer.load()
        log.info("embedding with %s (%d dimensions)", embedder.model, embedder.dimension)
        await connect_and_declare(broker, topology)
        if cache is not None:
            await cache.open(broker.connection, create=topology.declare)
        services.append(
            await register_embed_service(
                broker.connection,
                topology,
                vectorizer,
                version("kbus-embedder"),
                settings.request_concurrency,
            )
        )
        yield

    return make_app(broker, registry, lifespan, served=services)
