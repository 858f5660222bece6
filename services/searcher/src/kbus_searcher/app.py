"""The searcher: owns the Weaviate collection, indexes ``embeddings.ready``, answers searches."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.asgi import AsgiFastStream
from kbus_runtime.advisories import MaxDeliveries
from kbus_runtime.service import Service
from kbus_runtime.store import WeaviateNodes

from kbus_searcher.chains import LibraryProfiles
from kbus_searcher.feed import Feed
from kbus_searcher.handlers import register
from kbus_searcher.indexing import Indexer
from kbus_searcher.quotas import Quotas
from kbus_searcher.rewriting import create_rewriter
from kbus_searcher.searching import Searcher
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore
from kbus_searcher.tombstones import Tombstones
from kbus_searcher.versions import Versions


def create_app(settings: SearcherSettings | None = None) -> AsgiFastStream:
    """Build the searcher app; Weaviate is connected in the lifespan, never at import."""
    settings = settings or SearcherSettings()
    service = Service("searcher", settings)
    topology = service.topology
    client = WeaviateNodes(settings.store)
    store = ChunkStore.configured(client, settings)
    quotas = Quotas(
        settings.tenant_limits, settings.default_tenant_limit, store.queries.count_chunks
    )
    tombstones = Tombstones(topology.tombstones_kv)
    versions = Versions(topology.versions_kv)
    profiles = LibraryProfiles(topology.profiles_kv)
    indexing = (
        (
            Indexer(
                service.stage("indexer"),
                store.writes,
                tombstones,
                versions,
                service.registry,
                max_batch=settings.index_concurrency,
                linger_s=settings.index_linger_ms / 1000,
                quotas=quotas,
            ),
            MaxDeliveries(service.stage("deadletterer")),
        )
        if settings.index
        else None
    )
    searcher = (
        Searcher(
            service.stage(),
            store,
            settings,
            service.registry,
            versions,
            profiles,
            create_rewriter(settings.rewriter, settings.cohere, settings.llm),
            quotas,
        )
        if settings.serve
        else None
    )
    register(service, settings, indexing, searcher, Feed(service.stage()) if searcher else None)

    @asynccontextmanager
    async def start_up() -> AsyncIterator[None]:
        await client.connect()
        try:
            await store.collections.ensure()
            js = service.broker.connection.jetstream()
            await tombstones.open(js, create=topology.declare)
            await versions.open(js, create=topology.declare)
            await tombstones.follow()
            if settings.serve:
                await profiles.open(js, create=topology.declare)
                await versions.follow()
                await profiles.follow()
            yield
        finally:
            await profiles.stop()
            await versions.stop()
            await tombstones.stop()
            await client.close()

    return service.app(start_up)
