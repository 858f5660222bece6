"""The searcher: owns the Weaviate collection, indexes ``embeddings.ready``, answers searches."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

from faststream.asgi import AsgiFastStream
from kbus_shared.advisories import MaxDeliveries
from kbus_shared.answering import Served
from kbus_shared.bus import connect_and_declare, make_app, make_broker
from kbus_shared.consuming import Stage, StageMetrics
from kbus_shared.logs import configure_logging
from kbus_shared.store import weaviate_client
from prometheus_client import CollectorRegistry

from kbus_searcher.handlers import register_indexing, register_search_service
from kbus_searcher.indexing import Indexer
from kbus_searcher.rewriting import create_rewriter
from kbus_searcher.searching import Searcher
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore
from kbus_searcher.tombstones import Tombstones
from kbus_searcher.versions import Versions


def create_app(settings: SearcherSettings | None = None) -> AsgiFastStream:
    """Build the searcher app; Weaviate is connected in the lifespan, never at import."""
    settings = settings or SearcherSettings()
    configure_logging(settings.log_level)
    registry = CollectorRegistry()
    broker = make_broker(settings.bus, registry, app_name="searcher", log_level=settings.log_level)
    topology = settings.bus.topology
    metrics = StageMetrics.create(registry)
    client = weaviate_client(settings.store)
    store = ChunkStore.configured(client, settings)
    tombstones = Tombstones(topology.tombstones_kv)
    versions = Versions(topology.versions_kv)
    if settings.index:
        indexer = Indexer(
            Stage("indexer", broker, topology, metrics),
            store,
            tombstones,
            versions,
            registry,
            max_batch=settings.index_concurrency,
            linger_s=settings.index_linger_ms / 1000,
        )
        advisories = MaxDeliveries(Stage("deadletterer", broker, topology, metrics))
        register_indexing(broker, topology, indexer, advisories, settings.index_concurrency)
    searcher = Searcher(
        Stage("searcher", broker, topology, metrics),
        store,
        settings,
        registry,
        versions,
        create_rewriter(settings.rewriter, settings.cohere),
    )

    services: list[Served] = []

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        await client.connect()
        await store.ensure_collection()
        await connect_and_declare(broker, topology)
        js = broker.connection.jetstream()
        await tombstones.open(js, create=topology.declare)
        await versions.open(js, create=topology.declare)
        await tombstones.follow()
        if settings.serve:
            await versions.follow()
            services.append(
                await register_search_service(
                    broker.connection,
                    topology,
                    searcher,
                    version("kbus-searcher"),
                    settings.search_concurrency,
                )
            )
        try:
            yield
        finally:
            await versions.stop()
            await tombstones.stop()
            await client.close()

    return make_app(broker, registry, lifespan, served=services)
